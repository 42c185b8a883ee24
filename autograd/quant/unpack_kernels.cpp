// Compiled with -ffp-contract=off and without the precompiled header, whose own options
// GCC would take instead (autograd/CMakeLists.txt): GCC's intrinsics are vector arithmetic
// it may fuse. The one fused operation here is written out: see scaled().
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns of the undefined vectors inside its own AVX-512 intrinsics when they are
// inlined into a function of another target (a false positive: they are written before use)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "autograd/quant/unpack_kernels.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "autograd/quant/block_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
// Compiled for AVX-512 whatever the build targets; run only where the CPU has it.
#define AG_UNPACK_TARGET __attribute__((target("avx512f,avx512bw,f16c")))
#define AG_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))
#endif

namespace ag::quant {

namespace {

constexpr int64_t kQ4K = 256, kQ4KBytes = 144, kQ80 = 32, kQ80Bytes = 34;

// The d dx_b and dmin dx_b of a Q4_K block's two terms by Q8_K activations.
inline void q4_k_q8_scales(const uint8_t* block, float dx, float& d, float& dmin) {
  d = blocks::load_half(block) * dx;
  dmin = blocks::load_half(block + 2) * dx;
}

// The reference: the format table's floats, then rounded one by one.
template <void (*Dequantize)(const uint8_t*, float*), int64_t Elements, int64_t Bytes>
void reference_bf16(const uint8_t* in, int64_t n, bfloat16* out) {
  float y[Elements];
  for (int64_t b = 0; b < n / Elements; ++b) {
    Dequantize(in + b * Bytes, y);
    for (int64_t i = 0; i < Elements; ++i) out[b * Elements + i] = bfloat16(y[i]);
  }
}

#if defined(__x86_64__)

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Sixteen floats to bfloat16 as bf16_bits_from_f32_bits does: a NaN keeps its top bits and
// is made quiet; anything else rounds to nearest, ties to even (subnormals too).
AG_UNPACK_TARGET inline void store(bfloat16* p, __m512 f) {
  const __m512i u = _mm512_castps_si512(f);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  const __m512i bits = _mm512_mask_mov_epi32(rounded, nan, quiet);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(bits));
}
AG_UNPACK_TARGET inline void store(float* p, __m512 f) {
  _mm512_storeu_ps(p, f);
}

// d1 q - m1 for 16 levels q (int32 lanes), the reference's product and difference in one
// fused operation: the same floats, since the product is exact (d1 = d sc has at most 17
// significant bits, a half's 11 and a 6-bit scale's, and q at most 4).
AG_UNPACK_TARGET inline __m512 scaled(__m512i q, const float* d1, const float* m1) {
  return _mm512_fmsub_ps(_mm512_set1_ps(*d1), _mm512_cvtepi32_ps(q), _mm512_set1_ps(*m1));
}

// A Q4_K block's 8 sub-block scales d sc (lanes 0..7) and minimums dmin m (lanes 8..15) in one
// register: the 6-bit sc and m of its 12 bytes taken four at a time by word arithmetic (the
// bits blocks::scale_min_k4 takes one at a time), converted and multiplied as the
// reference does (one product each, the same floats), d and dmin by the F16C conversion (exact).
inline __m128i q4_k_scale_bytes(const uint8_t* b) {
  const uint32_t a = load_u32(b + 4), m = load_u32(b + 8), c = load_u32(b + 12);
  const uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, top2 = 0x03030303;
  const uint32_t words[4] = {a & low6, (c & low4) | (((a >> 6) & top2) << 4), m & low6,
                             ((c >> 4) & low4) | (((m >> 6) & top2) << 4)};
  __m128i bytes;
  std::memcpy(&bytes, words, 16);
  return bytes;
}
AG_UNPACK_TARGET inline __m512 q4_k_scales_avx512(const uint8_t* b) {
  const __m128i bytes = q4_k_scale_bytes(b);
  const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u32(b))));
  const __m512 d = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(_mm_cvtss_f32(dd)),
                                        _mm512_set1_ps(_mm_cvtss_f32(_mm_movehdup_ps(dd))));
  return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes)));
}

// One Q4_K block: sub-blocks 2j and 2j + 1 (64 weights) in the low and high nibbles of the
// 32 bytes at 16 + 32 j, 16 bytes (16 weights of each) at a time.
template <typename T>
AG_UNPACK_TARGET void q4_k_block_avx512(const uint8_t* b, T* y) {
  alignas(64) float scales[16];
  _mm512_store_ps(scales, q4_k_scales_avx512(b));
  const float *d1 = scales, *m1 = scales + 8;
  const __m512i low4 = _mm512_set1_epi32(0x0f);
  for (int j = 0; j < 4; ++j)
    for (int h = 0; h < 2; ++h) {
      const __m512i q = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 + 32 * j + 16 * h)));
      T* at = y + 64 * j + 16 * h;
      store(at, scaled(_mm512_and_si512(q, low4), d1 + 2 * j, m1 + 2 * j));
      store(at + 32, scaled(_mm512_srli_epi32(q, 4), d1 + 2 * j + 1, m1 + 2 * j + 1));
    }
}

// One Q8_0 block: q d (q first, as the reference multiplies).
template <typename T>
AG_UNPACK_TARGET void q8_0_block_avx512(const uint8_t* b, T* y) {
  const __m512 d = _mm512_set1_ps(blocks::load_half(b));
  for (int h = 0; h < 2; ++h) {
    const __m512i q =
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + 16 * h)));
    store(y + 16 * h, _mm512_mul_ps(_mm512_cvtepi32_ps(q), d));
  }
}

template <typename T>
AG_UNPACK_TARGET void q4_k_avx512(const uint8_t* in, int64_t n, T* out) {
  for (int64_t b = 0; b < n / kQ4K; ++b) q4_k_block_avx512(in + b * kQ4KBytes, out + b * kQ4K);
}
template <typename T>
AG_UNPACK_TARGET void q8_0_avx512(const uint8_t* in, int64_t n, T* out) {
  for (int64_t b = 0; b < n / kQ80; ++b) q8_0_block_avx512(in + b * kQ80Bytes, out + b * kQ80);
}

// The 16 values a sub-block's levels take, d1 q - m1 for q = 0..15, by the unpacking
// kernel's product and difference (scaled): looking a level up in them gives its weight's
// exact float, one permute in place of a conversion, a product and a difference per 16.
AG_UNPACK_TARGET inline __m512 level_values(const float* d1, const float* m1) {
  return scaled(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), d1, m1);
}

// Sub-blocks 2j and 2j + 1 of a Q4_K block dequantized in registers and multiplied into the
// sums: bytes 16 h..16 h + 15 of the pair's 32 hold weights 16 h.. of both (low and high
// nibbles), so h = 0 goes to `low` and h = 1 to `high`, sub-block 2j before 2j + 1. (A
// permute reads the low 4 bits of each index: the low nibble needs no mask.)
AG_UNPACK_TARGET inline void q4_k_pair_dot(const uint8_t* qs, const float* x, __m512 values0,
                                           __m512 values1, __m512& low, __m512& high) {
  __m512* sums[2] = {&low, &high};
  for (int h = 0; h < 2; ++h) {
    const __m512i q =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * h)));
    *sums[h] =
        _mm512_fmadd_ps(_mm512_permutexvar_ps(q, values0), _mm512_loadu_ps(x + 16 * h), *sums[h]);
    *sums[h] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), values1),
                               _mm512_loadu_ps(x + 32 + 16 * h), *sums[h]);
  }
}

// R rows side by side (dot_q4_k_rows), each row's sums in dot_q4_k's order; ahead > 0 asks
// for each block's bytes that far on.
template <int R>
AG_UNPACK_TARGET void dot_q4_k_rows_avx512(const float* x, const uint8_t* w, int64_t row_bytes,
                                           int64_t n, int64_t ahead, float* s) {
  __m512 low[R], high[R];
  for (int k = 0; k < R; ++k) low[k] = _mm512_setzero_ps(), high[k] = _mm512_setzero_ps();
  alignas(64) float scales[R][16];  // a row's d1[0..8), m1 at 8..16
  for (int64_t b = 0; b < n / kQ4K; ++b) {
    for (int k = 0; k < R; ++k) {
      const uint8_t* block = w + k * row_bytes + b * kQ4KBytes;
      if (ahead > 0)
        for (int line = 0; line < kQ4KBytes; line += 64)
          _mm_prefetch(block + ahead + line, _MM_HINT_T0);
      _mm512_store_ps(scales[k], q4_k_scales_avx512(block));
    }
    // read back from memory: broadcasts from memory are loads, where GCC would otherwise
    // take each scale out of the register by a permute (two shuffles a table)
    asm volatile("" ::: "memory");
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < R; ++k)
        q4_k_pair_dot(w + k * row_bytes + b * kQ4KBytes + 16 + 32 * j, x + b * kQ4K + 64 * j,
                      level_values(scales[k] + 2 * j, scales[k] + 8 + 2 * j),
                      level_values(scales[k] + 2 * j + 1, scales[k] + 9 + 2 * j), low[k], high[k]);
  }
  for (int k = 0; k < R; ++k) {
    alignas(64) float l[16], h[16];
    _mm512_store_ps(l, low[k]);
    _mm512_store_ps(h, high[k]);
    float sum = 0;
    for (int i = 0; i < 16; ++i) sum += l[i] + h[i];
    s[k] = sum;
  }
}

// The AVX2 forms (AMD EPYC Zen 3 and the like: AVX2, FMA and F16C, no AVX-512), the same
// arithmetic 8 lanes at a time: the reference's Q4_K dot products had decoded a 1B model at
// 2% of the bandwidth bound on a Zen 3.

// Eight floats to bfloat16 as store(bfloat16*, __m512) rounds them.
AG_AVX2_TARGET inline void store(bfloat16* p, __m256 f) {
  const __m256i u = _mm256_castps_si256(f);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i bits = _mm256_blendv_epi8(rounded, quiet, nan);
  // (16-bit values in 32-bit lanes: the pack is exact; it works within 128-bit halves)
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bits, bits), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}
AG_AVX2_TARGET inline void store(float* p, __m256 f) {
  _mm256_storeu_ps(p, f);
}

// scaled() for 8 levels
AG_AVX2_TARGET inline __m256 scaled8(__m256i q, float d1, float m1) {
  return _mm256_fmsub_ps(_mm256_set1_ps(d1), _mm256_cvtepi32_ps(q), _mm256_set1_ps(m1));
}

// q4_k_scale_bytes's 16 bytes in vector registers: its four words' byte-wise masks and
// shifts side by side, each word's bytes gathered by a shuffle. (Taken through general
// registers and moved across, they took a tenth of the Q4_K-by-Q8_K kernel's time on an AMD
// EPYC Zen 3: the kernel alone, one thread from the caches, 25 against 28-29 G weights/s.)
AG_AVX2_TARGET inline __m128i q4_k_scale_bytes_avx2(const uint8_t* b) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));  // d, dmin, a, m, c
  const __m128i acmc =
      _mm_shuffle_epi8(v, _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15));
  const __m128i aamm =
      _mm_shuffle_epi8(v, _mm_setr_epi8(4, 5, 6, 7, 4, 5, 6, 7, 8, 9, 10, 11, 8, 9, 10, 11));
  const __m128i low = _mm_and_si128(_mm_srlv_epi32(acmc, _mm_setr_epi32(0, 0, 0, 4)),
                                    _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m128i top =
      _mm_and_si128(_mm_srli_epi32(aamm, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(low, top);
}

// q4_k_scales_avx512's 16 floats, d sc at 0..7 and dmin m at 8..15, into `to`.
AG_AVX2_TARGET inline void q4_k_scales_avx2(const uint8_t* b, float* to) {
  const __m128i bytes = q4_k_scale_bytes_avx2(b);
  const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u32(b))));
  const __m256 d = _mm256_set1_ps(_mm_cvtss_f32(dd)),
               dmin = _mm256_set1_ps(_mm_cvtss_f32(_mm_movehdup_ps(dd)));
  _mm256_storeu_ps(to, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes))));
  _mm256_storeu_ps(
      to + 8,
      _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8)))));
}

// Eight levels from 8 bytes, as int32 lanes.
AG_AVX2_TARGET inline __m256i levels8(const uint8_t* p, bool is_signed) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return is_signed ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
}

template <typename T>
AG_AVX2_TARGET void q4_k_block_avx2(const uint8_t* b, T* y) {
  alignas(32) float scales[16];
  q4_k_scales_avx2(b, scales);
  const __m256i low4 = _mm256_set1_epi32(0x0f);
  for (int j = 0; j < 4; ++j)
    for (int h = 0; h < 4; ++h) {
      const __m256i q = levels8(b + 16 + 32 * j + 8 * h, false);
      T* at = y + 64 * j + 8 * h;
      store(at, scaled8(_mm256_and_si256(q, low4), scales[2 * j], scales[8 + 2 * j]));
      store(at + 32, scaled8(_mm256_srli_epi32(q, 4), scales[2 * j + 1], scales[9 + 2 * j]));
    }
}

template <typename T>
AG_AVX2_TARGET void q8_0_block_avx2(const uint8_t* b, T* y) {
  const __m256 d = _mm256_set1_ps(blocks::load_half(b));
  for (int h = 0; h < 4; ++h)
    store(y + 8 * h, _mm256_mul_ps(_mm256_cvtepi32_ps(levels8(b + 2 + 8 * h, true)), d));
}

template <typename T>
AG_AVX2_TARGET void q4_k_avx2(const uint8_t* in, int64_t n, T* out) {
  for (int64_t b = 0; b < n / kQ4K; ++b) q4_k_block_avx2(in + b * kQ4KBytes, out + b * kQ4K);
}
template <typename T>
AG_AVX2_TARGET void q8_0_avx2(const uint8_t* in, int64_t n, T* out) {
  for (int64_t b = 0; b < n / kQ80; ++b) q8_0_block_avx2(in + b * kQ80Bytes, out + b * kQ80);
}

// q4_k_pair_dot's sums, each 16-lane sum as two 8-lane halves ([0] lanes 0..7, [1] 8..15).
AG_AVX2_TARGET inline void q4_k_pair_dot_avx2(const uint8_t* qs, const float* x, const float* d1,
                                              const float* m1, __m256* low, __m256* high) {
  __m256* sums[2] = {low, high};
  const __m256i low4 = _mm256_set1_epi32(0x0f);
  for (int h = 0; h < 2; ++h)
    for (int half = 0; half < 2; ++half) {
      const __m256i q = levels8(qs + 16 * h + 8 * half, false);
      const float* at = x + 16 * h + 8 * half;
      __m256& sum = sums[h][half];
      sum = _mm256_fmadd_ps(scaled8(_mm256_and_si256(q, low4), d1[0], m1[0]), _mm256_loadu_ps(at),
                            sum);
      sum = _mm256_fmadd_ps(scaled8(_mm256_srli_epi32(q, 4), d1[1], m1[1]),
                            _mm256_loadu_ps(at + 32), sum);
    }
}

// dot_q4_k_rows_avx512's sums for R rows (two at most: four rows' 16 sums would take every
// AVX2 register).
template <int R>
AG_AVX2_TARGET void dot_q4_k_rows_avx2(const float* x, const uint8_t* w, int64_t row_bytes,
                                       int64_t n, int64_t ahead, float* s) {
  __m256 low[R][2], high[R][2];
  for (int k = 0; k < R; ++k)
    for (int half = 0; half < 2; ++half) low[k][half] = high[k][half] = _mm256_setzero_ps();
  alignas(32) float scales[R][16];  // a row's d1[0..8), m1 at 8..16
  for (int64_t b = 0; b < n / kQ4K; ++b) {
    for (int k = 0; k < R; ++k) {
      const uint8_t* block = w + k * row_bytes + b * kQ4KBytes;
      if (ahead > 0)
        for (int line = 0; line < kQ4KBytes; line += 64)
          _mm_prefetch(block + ahead + line, _MM_HINT_T0);
      q4_k_scales_avx2(block, scales[k]);
    }
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < R; ++k)
        q4_k_pair_dot_avx2(w + k * row_bytes + b * kQ4KBytes + 16 + 32 * j, x + b * kQ4K + 64 * j,
                           scales[k] + 2 * j, scales[k] + 8 + 2 * j, low[k], high[k]);
  }
  for (int k = 0; k < R; ++k) {
    float l[16], h[16];
    for (int half = 0; half < 2; ++half) {
      _mm256_storeu_ps(l + 8 * half, low[k][half]);
      _mm256_storeu_ps(h + 8 * half, high[k][half]);
    }
    float sum = 0;
    for (int i = 0; i < 16; ++i) sum += l[i] + h[i];
    s[k] = sum;
  }
}

// The exact sum of 8 int32 lanes.
AG_AVX2_TARGET inline int32_t sum_lanes(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1)));
}

// Sub-block s's scale in every 16-bit lane, from the 8 scales as words in both halves of
// `scales` (one vpshufb: taking each byte to a general register and broadcasting it back
// cost three instructions a scale, a fifth of a block's instructions).
AG_AVX2_TARGET inline __m256i q4_k_scale_words(__m256i scales, int s) {
  return _mm256_shuffle_epi8(scales, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * s)));
}

// dot_q4_k_q8_rows's isum lanes for one block: per pair of sub-blocks, 32 bytes of levels
// (low nibbles sub-block 2j, high 2j + 1) by x's 64 levels, 32 products a vpmaddubsw (its
// pair sums exact: at most 2 x 15 x 127), then lane l = weights 4 l..4 l + 3 times the
// sub-blocks' scales (sc_s, the words of `scales`) by a vpmaddwd.
AG_AVX2_TARGET inline __m256i q4_k_q8_block_sums(const uint8_t* block, const int8_t* p,
                                                 __m256i scales) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  __m256i sum = _mm256_setzero_si256();
  for (int j = 0; j < 4; ++j) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 16 + 32 * j));
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * j));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * j + 32));
    const __m256i low = _mm256_maddubs_epi16(_mm256_and_si256(q, low4), x0);
    const __m256i high = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), x1);
    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(low, q4_k_scale_words(scales, 2 * j)));
    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(high, q4_k_scale_words(scales, 2 * j + 1)));
  }
  return sum;
}

template <int R>
AG_AVX2_TARGET void dot_q4_k_q8_rows_avx2(const Q8KRow& x, const uint8_t* w, int64_t row_bytes,
                                          int64_t n, int64_t ahead, float* s) {
  __m256 lo[R], hi[R];
  for (int k = 0; k < R; ++k) lo[k] = hi[k] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQ4K; ++b) {
    const int8_t* p = x.levels.data() + b * kQ4K;
    const __m256i sub_sums =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.sub_sums.data() + 8 * b));
    const float dx = x.scales[static_cast<size_t>(b)];
    for (int k = 0; k < R; ++k) {
      const uint8_t* block = w + k * row_bytes + b * kQ4KBytes;
      if (ahead > 0)
        for (int line = 0; line < kQ4KBytes; line += 64)
          _mm_prefetch(block + ahead + line, _MM_HINT_T0);
      const __m128i scale_bytes = q4_k_scale_bytes_avx2(block);
      // sc_j at byte j, m_j at 8 + j; the sc as words, in both halves
      const __m256i isum =
          q4_k_q8_block_sums(block, p, _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scale_bytes)));
      const __m256i msum =
          _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(scale_bytes, 8)), sub_sums);
      // d dx and dmin dx (F16C's halves: load_half's exact values)
      const __m128 dd = _mm_mul_ps(
          _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u32(block)))), _mm_set1_ps(dx));
      const float d = _mm_cvtss_f32(dd), dmin = _mm_cvtss_f32(_mm_movehdup_ps(dd));
      lo[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d), lo[k]);
      hi[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_setzero_si256(), msum)),
                              _mm256_set1_ps(dmin), hi[k]);
    }
  }
  for (int k = 0; k < R; ++k) {
    float l[8], h[8], sum = 0;
    _mm256_storeu_ps(l, lo[k]);
    _mm256_storeu_ps(h, hi[k]);
    for (int i = 0; i < 8; ++i) sum += l[i] + h[i];
    s[k] = sum;
  }
}

// round_to_q8_k's block of 256 values (scale, levels and sub-block sums; all zero on entry).
AG_AVX2_TARGET void round_q8_k_block_avx2(const float* v, float& dx, int8_t* p, int32_t* sums) {
  const __m256 sign = _mm256_set1_ps(-0.0f),
               most = _mm256_set1_ps(std::numeric_limits<float>::max());
  __m256 largest = _mm256_setzero_ps();
  int within = 0xff;
  for (int i = 0; i < kQ4K; i += 8) {
    const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(v + i));
    within &= _mm256_movemask_ps(_mm256_cmp_ps(a, most, _CMP_LE_OQ));
    largest = _mm256_max_ps(largest, a);
  }
  if (within != 0xff) {
    dx = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(largest), _mm256_extractf128_ps(largest, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  const float top = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
  dx = top / 127.0f;
  if (dx == 0.0f) return;
  const __m256 by = _mm256_set1_ps(127.0f / top);
  for (int j = 0; j < 8; ++j) {
    __m256i q[4];
    for (int i = 0; i < 4; ++i)
      q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + 32 * j + 8 * i), by));
    // (the packs work within 128-bit halves; the permute puts the 4-level groups in order)
    const __m256i bytes =
        _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(p + 32 * j),
        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    const __m256i total =
        _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    sums[j] = sum_lanes(total);
  }
}

#endif

// The same sums in scalar code: a block dequantized by the reference, one fused
// multiply-add per weight into its lane.
float dot_q4_k_reference(const float* x, const uint8_t* w, int64_t n) {
  float low[16] = {}, high[16] = {}, y[kQ4K];
  for (int64_t b = 0; b < n / kQ4K; ++b) {
    blocks::dequantize_q4_k(w + b * kQ4KBytes, y);
    for (int k = 0; k < 8; ++k)
      for (int i = 0; i < 16; ++i) {
        low[i] = std::fma(y[32 * k + i], x[b * kQ4K + 32 * k + i], low[i]);
        high[i] = std::fma(y[32 * k + 16 + i], x[b * kQ4K + 32 * k + 16 + i], high[i]);
      }
  }
  float s = 0;
  for (int i = 0; i < 16; ++i) s += low[i] + high[i];
  return s;
}

// round_to_q8_k's block of 256 values in scalar code (all zero on entry).
void round_q8_k_block(const float* v, float& dx, int8_t* p, int32_t* sums) {
  float largest = 0;
  bool finite = true;
  for (int64_t i = 0; i < kQ4K; ++i) {
    const float a = std::fabs(v[i]);
    finite = finite && a <= std::numeric_limits<float>::max();
    largest = a > largest ? a : largest;
  }
  if (!finite) {
    dx = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  dx = largest / 127.0f;
  if (dx == 0.0f) return;  // (127 / largest might overflow; the block adds nothing)
  const float inverse = 127.0f / largest;
  for (int64_t i = 0; i < kQ4K; ++i) {
    p[i] = static_cast<int8_t>(std::nearbyint(v[i] * inverse));
    sums[i / 32] += p[i];
  }
}

// dot_q4_k_q8_rows's sums for one row, in scalar code.
float dot_q4_k_q8_reference(const Q8KRow& x, const uint8_t* w, int64_t n) {
  float lo[8] = {}, hi[8] = {};
  for (int64_t b = 0; b < n / kQ4K; ++b) {
    const uint8_t* block = w + b * kQ4KBytes;
    int32_t isum[8] = {};
    int mins[8];
    for (int j = 0; j < 8; ++j) {
      int sc;
      blocks::scale_min_k4(j, block + 4, sc, mins[j]);
      const uint8_t* qs = block + 16 + 32 * (j / 2);
      const int8_t* p = x.levels.data() + b * kQ4K + 32 * j;
      for (int i = 0; i < 32; ++i) isum[i / 4] += sc * (j % 2 ? qs[i] >> 4 : qs[i] & 15) * p[i];
    }
    float d, dmin;
    q4_k_q8_scales(block, x.scales[static_cast<size_t>(b)], d, dmin);
    for (int l = 0; l < 8; ++l) {
      const int32_t msum = mins[l] * x.sub_sums[static_cast<size_t>(8 * b + l)];
      lo[l] = std::fma(static_cast<float>(isum[l]), d, lo[l]);
      hi[l] = std::fma(static_cast<float>(-msum), dmin, hi[l]);
    }
  }
  float s = 0;
  for (int l = 0; l < 8; ++l) s += lo[l] + hi[l];
  return s;
}

}  // namespace

bool can_run(UnpackKernel k) {
#if defined(__x86_64__)
  static const bool has_avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }();
  static const bool has_avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
  }();
  if (k == UnpackKernel::avx512) return has_avx512;
  if (k == UnpackKernel::avx2) return has_avx2;
#endif
  return k == UnpackKernel::reference;
}

UnpackKernel unpack_kernel() {
  static const UnpackKernel fastest = can_run(UnpackKernel::avx512) ? UnpackKernel::avx512
                                      : can_run(UnpackKernel::avx2) ? UnpackKernel::avx2
                                                                    : UnpackKernel::reference;
  return fastest;
}

// Each entry point below: the kernel asked for where it was compiled (x86-64), else the
// reference.
float dot_q4_k(const float* x, const uint8_t* w, int64_t n, UnpackKernel k) {
  float s;
  dot_q4_k_rows(x, w, 0, n, 1, 0, &s, k);
  return s;
}

void dot_q4_k_rows(const float* x, const uint8_t* w, int64_t row_bytes, int64_t n, int rows,
                   int64_t ahead, float* s, UnpackKernel k) {
#if defined(__x86_64__)
  if (k == UnpackKernel::avx512) {
    if (rows == 4) return dot_q4_k_rows_avx512<4>(x, w, row_bytes, n, ahead, s);
    for (int j = 0; j < rows; ++j)
      dot_q4_k_rows_avx512<1>(x, w + j * row_bytes, row_bytes, n, ahead, s + j);
    return;
  }
  if (k == UnpackKernel::avx2) {
    int j = 0;
    for (; j + 2 <= rows; j += 2)
      dot_q4_k_rows_avx2<2>(x, w + j * row_bytes, row_bytes, n, ahead, s + j);
    if (j < rows) dot_q4_k_rows_avx2<1>(x, w + j * row_bytes, row_bytes, n, ahead, s + j);
    return;
  }
#endif
  (void)ahead;
  for (int j = 0; j < rows; ++j) s[j] = dot_q4_k_reference(x, w + j * row_bytes, n);
}

// (AVX2's form for the AVX-512 kernel too)
void round_to_q8_k(const float* x, int64_t n, Q8KRow& out, UnpackKernel k) {
  const int64_t blocks = n / kQ4K;
  out.levels.assign(static_cast<size_t>(n), 0);
  out.sub_sums.assign(static_cast<size_t>(8 * blocks), 0);
  out.scales.assign(static_cast<size_t>(blocks), 0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    float& dx = out.scales[static_cast<size_t>(b)];
    int8_t* p = out.levels.data() + b * kQ4K;
    int32_t* sums = out.sub_sums.data() + 8 * b;
#if defined(__x86_64__)
    if (k == UnpackKernel::avx2 || k == UnpackKernel::avx512) {
      round_q8_k_block_avx2(x + b * kQ4K, dx, p, sums);
      continue;
    }
#endif
    round_q8_k_block(x + b * kQ4K, dx, p, sums);
  }
}

// AVX2's integer form for the AVX-512 kernel too (every AVX-512 CPU has AVX2)
void dot_q4_k_q8_rows(const Q8KRow& x, const uint8_t* w, int64_t row_bytes, int64_t n, int rows,
                      int64_t ahead, float* s, UnpackKernel k) {
#if defined(__x86_64__)
  if (k == UnpackKernel::avx2 || k == UnpackKernel::avx512) {
    if (rows == 4) return dot_q4_k_q8_rows_avx2<4>(x, w, row_bytes, n, ahead, s);
    for (int j = 0; j < rows; ++j)
      dot_q4_k_q8_rows_avx2<1>(x, w + j * row_bytes, row_bytes, n, ahead, s + j);
    return;
  }
#endif
  (void)ahead;
  for (int j = 0; j < rows; ++j) s[j] = dot_q4_k_q8_reference(x, w + j * row_bytes, n);
}

// The AVX-512 or AVX2 form where asked for, else what follows the macro.
#if defined(__x86_64__)
#define AG_UNPACK_BY(k, avx512_form, avx2_form)        \
  if ((k) == UnpackKernel::avx512) return avx512_form; \
  if ((k) == UnpackKernel::avx2) return avx2_form;
#else
#define AG_UNPACK_BY(k, avx512_form, avx2_form)
#endif

void unpack_q4_k(const uint8_t* in, int64_t n, float* out, UnpackKernel k) {
  AG_UNPACK_BY(k, q4_k_avx512(in, n, out), q4_k_avx2(in, n, out))
  for (int64_t b = 0; b < n / kQ4K; ++b)
    blocks::dequantize_q4_k(in + b * kQ4KBytes, out + b * kQ4K);
}

void unpack_q4_k(const uint8_t* in, int64_t n, bfloat16* out, UnpackKernel k) {
  AG_UNPACK_BY(k, q4_k_avx512(in, n, out), q4_k_avx2(in, n, out))
  reference_bf16<blocks::dequantize_q4_k, kQ4K, kQ4KBytes>(in, n, out);
}

void unpack_q8_0(const uint8_t* in, int64_t n, float* out, UnpackKernel k) {
  AG_UNPACK_BY(k, q8_0_avx512(in, n, out), q8_0_avx2(in, n, out))
  for (int64_t b = 0; b < n / kQ80; ++b)
    blocks::dequantize_q8_0(in + b * kQ80Bytes, out + b * kQ80);
}

void unpack_q8_0(const uint8_t* in, int64_t n, bfloat16* out, UnpackKernel k) {
  AG_UNPACK_BY(k, q8_0_avx512(in, n, out), q8_0_avx2(in, n, out))
  reference_bf16<blocks::dequantize_q8_0, kQ80, kQ80Bytes>(in, n, out);
}

}  // namespace ag::quant
