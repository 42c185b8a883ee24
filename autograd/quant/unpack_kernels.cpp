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

#include "autograd/quant/block_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
// Compiled for AVX-512 whatever the build targets; run only where the CPU has it.
#define AG_UNPACK_TARGET __attribute__((target("avx512f,avx512bw,f16c")))
#endif

namespace ag::quant {

namespace {

constexpr int64_t kQ4K = 256, kQ4KBytes = 144, kQ80 = 32, kQ80Bytes = 34;

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
AG_UNPACK_TARGET inline __m512 q4_k_scales_avx512(const uint8_t* b) {
  const uint32_t a = load_u32(b + 4), m = load_u32(b + 8), c = load_u32(b + 12);
  const uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, top2 = 0x03030303;
  const uint32_t words[4] = {a & low6, (c & low4) | (((a >> 6) & top2) << 4), m & low6,
                             ((c >> 4) & low4) | (((m >> 6) & top2) << 4)};
  __m128i bytes;
  std::memcpy(&bytes, words, 16);
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

// R rows side by side (dot_q4_k_rows), each row's sums as dot_q4_k_avx512's; ahead > 0 asks
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

AG_UNPACK_TARGET float dot_q4_k_avx512(const float* x, const uint8_t* w, int64_t n) {
  float s;
  dot_q4_k_rows_avx512<1>(x, w, 0, n, 0, &s);
  return s;
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

bool avx512(UnpackKernel k) {
#if defined(__x86_64__)
  return k == UnpackKernel::avx512;
#else
  (void)k;
  return false;
#endif
}

}  // namespace

UnpackKernel unpack_kernel() {
#if defined(__x86_64__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }();
  if (has) return UnpackKernel::avx512;
#endif
  return UnpackKernel::reference;
}

float dot_q4_k(const float* x, const uint8_t* w, int64_t n, UnpackKernel k) {
#if defined(__x86_64__)
  if (avx512(k)) return dot_q4_k_avx512(x, w, n);
#endif
  return dot_q4_k_reference(x, w, n);
}

void dot_q4_k_rows(const float* x, const uint8_t* w, int64_t row_bytes, int64_t n, int rows,
                   int64_t ahead, float* s, UnpackKernel k) {
#if defined(__x86_64__)
  if (avx512(k)) {
    if (rows == 4) return dot_q4_k_rows_avx512<4>(x, w, row_bytes, n, ahead, s);
    for (int j = 0; j < rows; ++j)
      dot_q4_k_rows_avx512<1>(x, w + j * row_bytes, row_bytes, n, ahead, s + j);
    return;
  }
#endif
  (void)ahead;
  for (int j = 0; j < rows; ++j) s[j] = dot_q4_k_reference(x, w + j * row_bytes, n);
}

void unpack_q4_k(const uint8_t* in, int64_t n, float* out, UnpackKernel k) {
#if defined(__x86_64__)
  if (avx512(k)) return q4_k_avx512(in, n, out);
#endif
  for (int64_t b = 0; b < n / kQ4K; ++b)
    blocks::dequantize_q4_k(in + b * kQ4KBytes, out + b * kQ4K);
}

void unpack_q4_k(const uint8_t* in, int64_t n, bfloat16* out, UnpackKernel k) {
#if defined(__x86_64__)
  if (avx512(k)) return q4_k_avx512(in, n, out);
#endif
  reference_bf16<blocks::dequantize_q4_k, kQ4K, kQ4KBytes>(in, n, out);
}

void unpack_q8_0(const uint8_t* in, int64_t n, float* out, UnpackKernel k) {
#if defined(__x86_64__)
  if (avx512(k)) return q8_0_avx512(in, n, out);
#endif
  for (int64_t b = 0; b < n / kQ80; ++b)
    blocks::dequantize_q8_0(in + b * kQ80Bytes, out + b * kQ80);
}

void unpack_q8_0(const uint8_t* in, int64_t n, bfloat16* out, UnpackKernel k) {
#if defined(__x86_64__)
  if (avx512(k)) return q8_0_avx512(in, n, out);
#endif
  reference_bf16<blocks::dequantize_q8_0, kQ80, kQ80Bytes>(in, n, out);
}

}  // namespace ag::quant
