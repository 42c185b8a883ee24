#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns of the undefined vectors inside its own AVX-512 intrinsics once they are
// inlined (a false positive: they are written before use)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "nn/block_gemv.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "autograd/half.h"
#include "autograd/quant/unpack_kernels.h"
#include "nn/inference_kernels.h"
#include "nn/lanes.h"

namespace nn::inference {

namespace {

constexpr int64_t kQ80Bytes = 34, kLongRow = 2048;
// How far ahead a row read alone asks for its bytes (past its end, the next row's start):
// on the Intel Xeon with AMX the hardware prefetcher alone read SmolLM2's and Qwen2.5's
// short rows at 27% and 42% of the bound (`bench --decode`, q8_0-f32), 2176 bytes ahead at
// 67% and 78% (the distance the Q8_0-by-Q8_0 GEMV measured best, block_gemv_q8.cpp).
constexpr int64_t kOneRowAhead = 2176;

// A block's half scale d as a float, by the CPU's F16C instruction where it has one.
inline float block_scale(const uint8_t* block) {
  uint16_t h;
  std::memcpy(&h, block, 2);
#ifdef __F16C__
  return _cvtsh_ss(h);
#else
  return ag::half_to_float(h);
#endif
}

// Sixteen int8 levels as floats (exact): one sign-extension and one conversion with
// AVX-512, two of each with AVX2 (GCC 12 turns a vector conversion from int8 into one lane
// at a time).
inline v16 widen_levels(const uint8_t* p) {
#ifdef __AVX512F__
  const __m512 f = _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  v16 v;
  std::memcpy(&v, &f, sizeof v);
  return v;
#elif defined(__AVX2__)
  // (the loop below stayed scalar: Q8_0 by float32 decoded at 12% of the bandwidth bound on
  // an AMD EPYC Zen 3)
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)),
          _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(bytes, 8)))};
#else
  float v[kLanes];
  for (int i = 0; i < kLanes; ++i) v[i] = static_cast<float>(static_cast<int8_t>(p[i]));
  return load(v);
#endif
}

// acc + p d with one rounding: one instruction with AVX-512, two with AVX2, std::fma lane by
// lane elsewhere (the same bits on every build, not whatever the compiler contracts).
inline v16 fused(v16 p, float d, v16 acc) {
#ifdef __AVX512F__
  __m512 a, b;
  std::memcpy(&a, &p, sizeof a);
  std::memcpy(&b, &acc, sizeof b);
  const __m512 r = _mm512_fmadd_ps(a, _mm512_set1_ps(d), b);
  v16 v;
  std::memcpy(&v, &r, sizeof v);
  return v;
#elif defined(__AVX2__) && defined(__FMA__)
  // (v16's halves are 8-float vectors, the type __m256 is)
  const __m256 by = _mm256_set1_ps(d);
  return {_mm256_fmadd_ps(p.lo, by, acc.lo), _mm256_fmadd_ps(p.hi, by, acc.hi)};
#else
  float v[kLanes];
  for (int i = 0; i < kLanes; ++i) v[i] = std::fma(p[i], d, acc[i]);
  return load(v);
#endif
}

// R rows of Q8_0 blocks (row k at w + k row_bytes) against one row of x: s[k] = x . W[k] in
// the order block_gemv.h documents, each block of x loaded once for the R rows. Each row's
// block asks for the same block of the next group of R rows: the hardware prefetcher alone
// kept too few lines in flight (at 14 instructions a block the core's window reaches only
// ~700 bytes ahead, a plain read's ten times as far); a fixed distance ahead in each row
// fell inside the next row, already being read, where rows are short (2048 weights).
// Measured on one Zen 4 core from memory (bench --micro --decode, llama3.2-1b's MLP): no
// prefetch 32-55% of a plain read, 2 KB or 8 KB ahead 44-65%, the next group 62-90%.
template <int R>
void q8_0_rows(const float* x, const uint8_t* w, int64_t row_bytes, int64_t blocks, float* s) {
  v16 lo[R] = {}, hi[R] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    const v16 xl = load(x + 32 * b), xh = load(x + 32 * b + kLanes);
    for (int k = 0; k < R; ++k) {
      const uint8_t* block = w + k * row_bytes + kQ80Bytes * b;
      if constexpr (R > 1) __builtin_prefetch(block + R * row_bytes);
      if constexpr (R == 1) __builtin_prefetch(block + kOneRowAhead);
      const float d = block_scale(block);
      lo[k] = fused(widen_levels(block + 2) * xl, d, lo[k]);
      hi[k] = fused(widen_levels(block + 18) * xh, d, hi[k]);
    }
  }
  for (int k = 0; k < R; ++k) s[k] = sum_lanes(lo[k] + hi[k]);
}

// y[r][o..o+R) (+)= bias + the sums of R rows from o.
template <int R>
void q8_0_group(const float* x, int64_t rows, int64_t in, const uint8_t* w, const float* bias,
                int64_t o, float* y, int64_t ldy, bool accumulate) {
  const int64_t blocks = in / 32, row_bytes = blocks * kQ80Bytes;
  for (int64_t r = 0; r < rows; ++r) {
    float s[R];
    q8_0_rows<R>(x + r * in, w + o * row_bytes, row_bytes, blocks, s);
    for (int k = 0; k < R; ++k) store_output(s[k], bias, o + k, y[r * ldy + o + k], accumulate);
  }
}

}  // namespace

void q8_0_linear(const float* x, int64_t rows, int64_t in, const uint8_t* w, const float* bias,
                 int64_t out, float* y, int64_t ldy, bool accumulate) {
  int64_t o = 0;
  // Long rows four at a time, asking for the next four ahead; shorter rows one at a time,
  // where a thread's rows one after another are one stream the hardware prefetcher follows
  // well (one Zen 4 core from memory: 8192-wide rows 51-90% of a plain read four at a time
  // against 31-51% one at a time; 576- and 1536-wide rows 30-51% against 48-57%; 2048-wide
  // rows not shown faster either way there, and on an Intel Xeon with AMX 74-77% four at a
  // time against 36% one at a time, 64-66% with a prefetch 2-8 KB ahead in the stream).
  if (in >= kLongRow)
    for (; o + 4 <= out; o += 4) q8_0_group<4>(x, rows, in, w, bias, o, y, ldy, accumulate);
  for (; o < out; ++o) q8_0_group<1>(x, rows, in, w, bias, o, y, ldy, accumulate);
}

// Four rows at a time, their eight chains of sums side by side, each asking for the next
// four's bytes. One row's two chains alone, read as the hardware prefetcher found them, had
// kept the Llama-3.2-1B shape at 20% of the bound on the Intel Xeon with AMX (49% now; the
// 1536-wide rows of SmolLM2's shape gained too: 63-73% against 60% one at a time with a
// prefetch). Each row's sum is dot_q4_k's, whatever the group.
void q4_k_linear(const float* x, int64_t rows, int64_t in, const uint8_t* w, const float* bias,
                 int64_t out, float* y, int64_t ldy, bool accumulate) {
  constexpr int kGroup = 4;
  const int64_t row_bytes = in / 256 * 144;
  const ag::quant::UnpackKernel kernel = ag::quant::unpack_kernel();
  for (int64_t o = 0; o < out; o += kGroup) {
    const int n = static_cast<int>(std::min<int64_t>(kGroup, out - o));
    for (int64_t r = 0; r < rows; ++r) {
      float s[kGroup];
      ag::quant::dot_q4_k_rows(x + r * in, w + o * row_bytes, row_bytes, in, n, kGroup * row_bytes,
                               s, kernel);
      for (int k = 0; k < n; ++k) store_output(s[k], bias, o + k, y[r * ldy + o + k], accumulate);
    }
  }
}

// The same four rows a pass, by x's rows rounded to Q8_K once a call (each thread rounds
// them for its own share of the outputs, as q8_0_q8_linear does), each group asking for the
// bytes at least 16 KB ahead of it: the next group alone (4.6 KB of Llama-3.2-1B's 2048-wide
// rows) left two threads of an AMD EPYC Zen 3 reading 16-22 GB/s of blocks where 16 KB ahead
// read 20-26 (a plain read 23-25; its 8192-wide rows' next group is 18 KB already).
void q4_k_q8_linear(const float* x, int64_t rows, int64_t in, const uint8_t* w, const float* bias,
                    int64_t out, float* y, int64_t ldy, bool accumulate) {
  constexpr int kGroup = 4;
  constexpr int64_t kAheadBytes = 16 * 1024;
  const int64_t row_bytes = in / 256 * 144, group_bytes = kGroup * row_bytes;
  const int64_t ahead = (kAheadBytes + group_bytes - 1) / group_bytes * group_bytes;
  const ag::quant::UnpackKernel kernel = ag::quant::unpack_kernel();
  thread_local std::vector<ag::quant::Q8KRow> xs;
  xs.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    ag::quant::round_to_q8_k(x + r * in, in, xs[static_cast<size_t>(r)]);
  for (int64_t o = 0; o < out; o += kGroup) {
    const int n = static_cast<int>(std::min<int64_t>(kGroup, out - o));
    for (int64_t r = 0; r < rows; ++r) {
      float s[kGroup];
      ag::quant::dot_q4_k_q8_rows(xs[static_cast<size_t>(r)], w + o * row_bytes, row_bytes, in, n,
                                  ahead, s, kernel);
      for (int k = 0; k < n; ++k) store_output(s[k], bias, o + k, y[r * ldy + o + k], accumulate);
    }
  }
}

}  // namespace nn::inference
