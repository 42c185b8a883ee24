#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns of the undefined vectors inside its own AVX-512 intrinsics once they are
// inlined (a false positive: they are written before use)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// The Q8_0-by-Q8_0 GEMV (nn/block_gemv.h, q8_0_q8_linear): llama.cpp's arithmetic for Q8_0
// weights. The activations are rounded to Q8_0 blocks and each block's dot product is an
// exact sum of integer products, 64 of them an AVX-512 VNNI instruction (32 an AVX2 one), so
// that a step reads the weights at the memory's pace where widening and converting every level
// (the float32 activations' GEMV, block_gemv.cpp) kept it at 71-81% of a plain read.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/half.h"
#include "nn/block_gemv.h"
#include "nn/inference_kernels.h"

namespace nn::inference {

namespace {

constexpr int64_t kGroupBlocks = 16, kGroupBytes = 34 * kGroupBlocks, kChunks = 8;
// How far ahead of its group a row asks for its bytes: four groups (2176 bytes; past a row's
// end, the next row's start). With little arithmetic a block the hardware prefetcher alone
// kept too few lines in flight. Measured with `bench --decode` (2 threads, the Intel Xeon
// with AMX, shares of the bound): one row at a time without prefetch, SmolLM2-135M 55%,
// Qwen2.5-0.5B 74%, Llama-3.2-1B 86%; four rows a pass, each asking for the next four
// rows' group (the float32 GEMV's way), 55%, 76%, 85%; four groups ahead 90%, 92%, 96%
// (two, six and eight groups ahead 92%, 92% and 91% at the 1B shape).
constexpr int64_t kPrefetchBytes = 4 * kGroupBytes;

// One row of x rounded to Q8_0 blocks, laid out as a group of the interleaved weights reads
// it: per group of 16 blocks, 8 chunks of 64 levels (lane l of chunk j: levels 4j..4j+3 of
// block 16 g + l), each block's correction -128 (the sum of its levels) for the weights'
// +128, and each block's scale dx; lanes past the row's last block hold zeros.
struct PreparedRow {
  std::vector<int8_t> levels;
  std::vector<int32_t> corrections;
  std::vector<float> scales;
};

int64_t groups_of(int64_t blocks) {
  return (blocks + kGroupBlocks - 1) / kGroupBlocks;
}

// The largest |v| of a block of 32, and whether all 32 are finite.
float block_largest(const float* v, bool& finite) {
#ifdef __AVX512F__
  const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(v)), b = _mm512_abs_ps(_mm512_loadu_ps(v + 16));
  const __m512 most = _mm512_set1_ps(std::numeric_limits<float>::max());
  finite =
      (_mm512_cmp_ps_mask(a, most, _CMP_LE_OQ) & _mm512_cmp_ps_mask(b, most, _CMP_LE_OQ)) == 0xffff;
  return _mm512_reduce_max_ps(_mm512_max_ps(a, b));
#elif defined(__AVX2__)
  const __m256 sign = _mm256_set1_ps(-0.0f),
               most = _mm256_set1_ps(std::numeric_limits<float>::max());
  __m256 largest = _mm256_setzero_ps();
  int within = 0xff;
  for (int i = 0; i < 32; i += 8) {
    const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(v + i));
    within &= _mm256_movemask_ps(_mm256_cmp_ps(a, most, _CMP_LE_OQ));
    largest = _mm256_max_ps(largest, a);
  }
  finite = within == 0xff;
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(largest), _mm256_extractf128_ps(largest, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
#else
  float largest = 0;
  finite = true;
  for (int i = 0; i < 32; ++i) {
    const float a = std::fabs(v[i]);
    finite = finite && a <= std::numeric_limits<float>::max();
    largest = std::max(largest, a);
  }
  return largest;
#endif
}

// levels[i] = v[i] inverse rounded to the nearest integer, ties to even (|levels| <= 127).
void block_levels(const float* v, float inverse, int8_t* levels) {
#ifdef __AVX512F__
  const __m512 by = _mm512_set1_ps(inverse);
  for (int h = 0; h < 2; ++h)
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(levels + 16 * h),
        _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(v + 16 * h), by))));
#elif defined(__AVX2__)
  const __m256 by = _mm256_set1_ps(inverse);
  __m256i q[4];
  for (int i = 0; i < 4; ++i)
    q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + 8 * i), by));
  // the packs work within 128-bit halves: 4-byte groups come out as q0 q1 q2 q3 (levels 0..3
  // of each), then their levels 4..7; the permute puts them back in order
  const __m256i bytes =
      _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  _mm256_storeu_si256(
      reinterpret_cast<__m256i*>(levels),
      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
#else
  for (int i = 0; i < 32; ++i) levels[i] = static_cast<int8_t>(std::nearbyint(v[i] * inverse));
#endif
}

// Block b of x (32 values) to its scale and levels, as block_gemv.h documents.
void round_block(const float* v, float& dx, int8_t* levels) {
  bool finite;
  const float largest = block_largest(v, finite);
  if (!finite) {
    dx = std::numeric_limits<float>::quiet_NaN();
    std::memset(levels, 0, 32);
    return;
  }
  dx = ag::half_to_float(ag::half_from_float(largest / 127.0f));
  if (dx == 0.0f)  // (127 / largest might overflow; the block adds nothing either way)
    std::memset(levels, 0, 32);
  else
    block_levels(v, 127.0f / largest, levels);
}

void prepare(const float* x, int64_t in, PreparedRow& p) {
  const int64_t blocks = in / 32, groups = groups_of(blocks);
  p.levels.assign(static_cast<size_t>(groups * kGroupBlocks * 32), 0);
  p.corrections.assign(static_cast<size_t>(groups * kGroupBlocks), 0);
  p.scales.assign(static_cast<size_t>(groups * kGroupBlocks), 0.0f);
  int8_t block[32];
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t g = b / kGroupBlocks, lane = b % kGroupBlocks;
    round_block(x + 32 * b, p.scales[static_cast<size_t>(b)], block);
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) sum += block[i];
    p.corrections[static_cast<size_t>(b)] = -128 * sum;
    for (int64_t j = 0; j < kChunks; ++j)
      std::memcpy(&p.levels[static_cast<size_t>(512 * g + 64 * j + 4 * lane)], block + 4 * j, 4);
  }
}

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
// x . W for one row of interleaved blocks, with VNNI: a group's 16 exact block sums in 16
// lanes by 8 instructions, then one conversion and one fused multiply-add by the scales.
float dot(const PreparedRow& x, const uint8_t* row, int64_t blocks) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups_of(blocks); ++g) {
    const int64_t n = std::min(kGroupBlocks, blocks - kGroupBlocks * g);
    const __mmask64 bytes = n == kGroupBlocks ? ~__mmask64{0} : (__mmask64{1} << (4 * n)) - 1;
    const auto lanes = static_cast<__mmask16>((1u << n) - 1);
    const uint8_t* group = row + kGroupBytes * g;
    for (int64_t at = 0; at < kGroupBytes; at += 64)
      __builtin_prefetch(group + kPrefetchBytes + at);
    __m512i sum = _mm512_loadu_si512(x.corrections.data() + kGroupBlocks * g);
    for (int64_t j = 0; j < kChunks; ++j)
      sum = _mm512_dpbusd_epi32(sum, _mm512_maskz_loadu_epi8(bytes, group + 2 * n + 4 * n * j),
                                _mm512_loadu_si512(x.levels.data() + 512 * g + 64 * j));
    const __m512 d = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, group));
    const __m512 scale = _mm512_mul_ps(d, _mm512_loadu_ps(x.scales.data() + kGroupBlocks * g));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scale, acc);
  }
  float lane[kGroupBlocks], s = 0;
  _mm512_storeu_ps(lane, acc);
  for (float v : lane) s += v;
  return s;
}
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// The same sums by AVX2, 32 levels an instruction: the weights' levels back to signed (the
// +128 flipped off) and multiplied as |w| (unsigned) by x's levels with w's sign, whose pairs
// sum exactly in 16 bits (at most 2 x 128 x 127; w + 128 by x could reach 2 x 255 x 127,
// past what the instruction keeps), so each block's sum starts from 0, not its correction.
// Blocks 16 g + 0..7 go to acc[0], 8..15 to acc[1]; a short last group's lanes past n are
// not read (x's levels there are 0) and its missing scales are 0.
inline __m256i chunk_lanes(const uint8_t* p, int64_t n, int h) {
  if (n == kGroupBlocks) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i lane =
      _mm256_add_epi32(_mm256_set1_epi32(8 * h), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_maskload_epi32(reinterpret_cast<const int*>(p),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lane));
}

float dot(const PreparedRow& x, const uint8_t* row, int64_t blocks) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  const __m256i flip = _mm256_set1_epi8(-128), pairs = _mm256_set1_epi16(1);
  for (int64_t g = 0; g < groups_of(blocks); ++g) {
    const int64_t n = std::min(kGroupBlocks, blocks - kGroupBlocks * g);
    const uint8_t* group = row + kGroupBytes * g;
    for (int64_t at = 0; at < kGroupBytes; at += 64)
      __builtin_prefetch(group + kPrefetchBytes + at);
    uint16_t halves[kGroupBlocks] = {};
    std::memcpy(halves, group, static_cast<size_t>(2 * n));
    for (int h = 0; h < 2; ++h) {
      __m256i sum = _mm256_setzero_si256();
      for (int64_t j = 0; j < kChunks; ++j) {
        const __m256i w =
            _mm256_xor_si256(chunk_lanes(group + 2 * n + 4 * n * j + 32 * h, n, h), flip);
        const __m256i xs = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(x.levels.data() + 512 * g + 64 * j + 32 * h));
        const __m256i products = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(xs, w));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(products, pairs));
      }
      const __m256 d =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(halves + 8 * h)));
      const __m256 scale =
          _mm256_mul_ps(d, _mm256_loadu_ps(x.scales.data() + kGroupBlocks * g + 8 * h));
      acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), scale, acc[h]);
    }
  }
  float lane[kGroupBlocks], s = 0;
  _mm256_storeu_ps(lane, acc[0]);
  _mm256_storeu_ps(lane + 8, acc[1]);
  for (float v : lane) s += v;
  return s;
}
#else
// The same sums lane by lane where the CPU has neither (the integers exact; one std::fma).
float dot(const PreparedRow& x, const uint8_t* row, int64_t blocks) {
  float acc[kGroupBlocks] = {};
  for (int64_t g = 0; g < groups_of(blocks); ++g) {
    const int64_t n = std::min(kGroupBlocks, blocks - kGroupBlocks * g);
    const uint8_t* group = row + kGroupBytes * g;
    for (int64_t l = 0; l < kGroupBlocks; ++l) {
      const auto at = static_cast<size_t>(kGroupBlocks * g + l);
      int32_t sum = x.corrections[at];
      float d = 0;
      if (l < n) {
        uint16_t h;
        std::memcpy(&h, group + 2 * l, 2);
        d = ag::half_to_float(h);
        for (int64_t j = 0; j < kChunks; ++j)
          for (int64_t t = 0; t < 4; ++t)
            sum += group[2 * n + 4 * n * j + 4 * l + t] *
                   x.levels[static_cast<size_t>(512 * g + 64 * j + 4 * l + t)];
      }
      acc[l] = std::fma(static_cast<float>(sum), d * x.scales[at], acc[l]);
    }
  }
  float s = 0;
  for (float v : acc) s += v;
  return s;
}
#endif

}  // namespace

void interleave_q8_0(const uint8_t* blocks, int64_t rows, int64_t in, uint8_t* to) {
  const int64_t n_blocks = in / 32;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* from = blocks + r * n_blocks * 34;
    uint8_t* row = to + r * n_blocks * 34;
    for (int64_t g = 0; g < groups_of(n_blocks); ++g) {
      const int64_t n = std::min(kGroupBlocks, n_blocks - kGroupBlocks * g);
      uint8_t* group = row + kGroupBytes * g;
      for (int64_t l = 0; l < n; ++l) {
        const uint8_t* block = from + 34 * (kGroupBlocks * g + l);
        std::memcpy(group + 2 * l, block, 2);
        for (int64_t j = 0; j < kChunks; ++j)
          for (int64_t t = 0; t < 4; ++t)
            group[2 * n + 4 * n * j + 4 * l + t] =
                static_cast<uint8_t>(block[2 + 4 * j + t] ^ 0x80);
      }
    }
  }
}

// One weight row at a time (a thread's rows one stream, each asking kPrefetchBytes ahead),
// against every row of x while it is in L1.
void q8_0_q8_linear(const float* x, int64_t rows, int64_t in, const uint8_t* w, const float* bias,
                    int64_t out, float* y, int64_t ldy, bool accumulate) {
  thread_local std::vector<PreparedRow> xs;
  xs.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) prepare(x + r * in, in, xs[static_cast<size_t>(r)]);
  const int64_t blocks = in / 32;
  for (int64_t o = 0; o < out; ++o) {
    const uint8_t* row = w + o * blocks * 34;
    for (int64_t r = 0; r < rows; ++r) {
      const PreparedRow& p = xs[static_cast<size_t>(r)];
      store_output(dot(p, row, blocks), bias, o, y[r * ldy + o], accumulate);
    }
  }
}

}  // namespace nn::inference
