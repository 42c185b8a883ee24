#include "autograd/ops/tile_kernels_bf16.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "autograd/bfloat16.h"
#include "autograd/ops/tile_kernels.h"
#include "autograd/test_hooks.h"

#if defined(__x86_64__)
#include <immintrin.h>
// The kernels are compiled for AVX-512 BF16 whatever the build targets, and called only
// where the CPU has it (units_available)
#define AG_BF16_TARGET __attribute__((target("avx512f,avx512bf16")))
#endif

namespace ag::tile::bf16 {

std::atomic<int> g_forced_for_tests{0};  // a Forced: force_attention_kernel_for_tests

namespace {

uint32_t bits_of(float f) {
  return std::bit_cast<uint32_t>(f);
}

// a pair of float32 values rounded to bfloat16, ties to even
word rounded_pair(float lo, float hi) {
  return static_cast<word>(bf16_bits_from_f32_bits(bits_of(lo))) |
         static_cast<word>(bf16_bits_from_f32_bits(bits_of(hi))) << 16;
}

Forced forced_by_environment() {
  const char* value = std::getenv("ATTOGRAD_ATTENTION_BF16");
  if (value == nullptr) return Forced::none;
  const std::string f = value;
  if (f == "fma") return Forced::fma;
  if (f == "onednn") return Forced::onednn;  // the op checks oneDNN's kernels (attention.cpp)
  if (f != "units")
    throw std::invalid_argument("ATTOGRAD_ATTENTION_BF16 must be units, fma or onednn, got '" +
                                f.substr(0, 64) + "'");
  if (!units_available())
    throw std::invalid_argument(
        "ATTOGRAD_ATTENTION_BF16=units: this CPU has no AVX-512 BF16 instructions");
  return Forced::units;
}

}  // namespace

bool units_available() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

Forced forced() {
  if (const int by_test = g_forced_for_tests.load(std::memory_order_relaxed); by_test != 0)
    return static_cast<Forced>(by_test);
  static const Forced by_environment = forced_by_environment();
  return by_environment;
}

bool rule_units() {
#if defined(__x86_64__)
  return units_available() && __builtin_cpu_is("amd");
#else
  return false;
#endif
}

// ---- packing

void transposed_words(const bfloat16* src, int64_t m, int64_t n, word* bt) {
  const int64_t np = n / 2;
  for (int64_t x = 0; x < m; ++x)
    for (int64_t p = 0; p < np; ++p) std::memcpy(bt + p * kTile + x, src + x * n + 2 * p, 4);
  for (int64_t p = 0; p < np; ++p) std::fill(bt + p * kTile + m, bt + (p + 1) * kTile, word(0));
}

void paired_rows(const bfloat16* src, int64_t rows, int64_t n, int64_t w, word* dst) {
  for (int64_t p = 0; 2 * p < rows; ++p) {
    const bfloat16* lo = src + 2 * p * n;
    word* d = dst + p * w;
    if (2 * p + 1 < rows)
      for (int64_t c = 0; c < n; ++c) d[c] = lo[c].bits | static_cast<word>(lo[n + c].bits) << 16;
    else
      for (int64_t c = 0; c < n; ++c) d[c] = lo[c].bits;
    std::fill(d + n, d + w, word(0));
  }
}

void key_pairs(const float* tile, int64_t nk, word* dst) {
  for (int64_t p = 0; 2 * p < nk; ++p) {
    const float* lo = tile + 2 * p * kTile;
    const float* hi = lo + kTile;
    word* d = dst + p * kTile;
    if (2 * p + 1 < nk)
      for (int64_t x = 0; x < kTile; ++x) d[x] = rounded_pair(lo[x], hi[x]);
    else
      for (int64_t x = 0; x < kTile; ++x) d[x] = rounded_pair(lo[x], 0.0f);
  }
}

void lane_pairs(const float* tile, int64_t nk, word* dst) {
  for (int64_t i = 0; i < nk * kTile / 2; ++i) dst[i] = rounded_pair(tile[2 * i], tile[2 * i + 1]);
}

// ---- the products

#if defined(__x86_64__)

namespace {

constexpr int64_t kWords = 16;  // words (and float32 sums) a vector

// c[x][0, NV vectors) (+)= alpha sum_{p0 <= t < p1} a[x ars + t acs] . b[t ldb + 0, NV
// vectors), for the x < rows (<= MR) rows of one strip; tile_kernels.h's strip on pairs
template <int MR, int NV>
AG_BF16_TARGET inline void strip(int64_t rows, int64_t p0, int64_t p1, const word* a, int64_t ars,
                                 int64_t acs, const word* b, int64_t ldb, float* c, int64_t ldc,
                                 bool add, float alpha) {
  const word* ar[MR];
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int x = 0; x < MR; ++x) {
    ar[x] = a + std::min<int64_t>(x, rows - 1) * ars;
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) acc[x][u] = _mm512_setzero_ps();
  }
  for (int64_t t = p0; t < p1; ++t) {
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) bv[u] = (__m512bh)_mm512_loadu_si512(b + t * ldb + u * kWords);
#pragma GCC unroll 16
    for (int x = 0; x < MR; ++x) {
      int32_t pair;  // (A may be bfloat16 rows: read as bytes, not through a word pointer)
      std::memcpy(&pair, ar[x] + t * acs, sizeof pair);
      const __m512bh ax = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 4
      for (int u = 0; u < NV; ++u) acc[x][u] = _mm512_dpbf16_ps(acc[x][u], ax, bv[u]);
    }
  }
  const __m512 scale = _mm512_set1_ps(alpha);
#pragma GCC unroll 16
  for (int x = 0; x < MR; ++x) {
    if (x >= rows) break;
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) {
      float* cp = c + x * ldc + u * kWords;
      __m512 cur = _mm512_mul_ps(acc[x][u], scale);
      if (add) cur = _mm512_add_ps(cur, _mm512_loadu_ps(cp));
      _mm512_storeu_ps(cp, cur);
    }
  }
}

// strip over a panel w words wide (a multiple of kWords): two vectors at a time, then one
AG_BF16_TARGET void strip_panel(int64_t rows, int64_t p0, int64_t p1, const word* a, int64_t ars,
                                int64_t acs, const word* b, int64_t ldb, int64_t w, float* c,
                                int64_t ldc, bool add, float alpha) {
  int64_t col = 0;
  for (; col + 2 * kWords <= w; col += 2 * kWords)
    strip<kStrip, 2>(rows, p0, p1, a, ars, acs, b + col, ldb, c + col, ldc, add, alpha);
  if (col < w) strip<kStrip, 1>(rows, p0, p1, a, ars, acs, b + col, ldb, c + col, ldc, add, alpha);
}

}  // namespace

void key_major_tile(bool causal, int64_t i0, int64_t nk, const word* rows, int64_t np,
                    const word* bt, float alpha, float* st) {
  for (int64_t j0 = 0; j0 < nk; j0 += kStrip) {
    const int64_t col = causal ? std::clamp<int64_t>(j0 - i0, 0, kTile) / kWords * kWords : 0;
    strip_panel(std::min<int64_t>(kStrip, nk - j0), 0, np, rows + j0 * np, np, 1, bt + col, kTile,
                kTile - col, st + j0 * kTile + col, kTile, false, alpha);
  }
}

// A strip's last key pair may hold a key its queries do not see: its tile entries are 0
// there (the softmax's selection), so it adds nothing
void query_rows(bool causal, int64_t i0, int64_t m, int64_t nk, const word* tile, const word* b,
                int64_t w, float* out, int64_t ldo) {
  for (int64_t x0 = 0; x0 < m; x0 += kStrip) {
    const int64_t rows = std::min<int64_t>(kStrip, m - x0);
    const int64_t keys = causal ? std::min(nk, i0 + x0 + rows) : nk;
    strip_panel(rows, 0, (keys + 1) / 2, tile + x0, 1, kTile, b, w, w, out + x0 * ldo, ldo, false,
                1.0f);
  }
}

// (j0 - i0 is even, so a strip's first query starts a pair)
void key_rows(bool causal, int64_t i0, int64_t m, int64_t nk, int64_t fresh, const word* tile,
              const word* b, int64_t w, float* acc, int64_t lda) {
  constexpr int64_t kPairs = kTile / 2;
  for (int64_t j0 = 0; j0 < nk; j0 += kStrip) {
    const int64_t x0 = causal ? std::clamp<int64_t>(j0 - i0, 0, m) : 0;
    strip_panel(std::min<int64_t>(kStrip, nk - j0), x0 / 2, (m + 1) / 2, tile + j0 * kPairs, kPairs,
                1, b, w, w, acc + j0 * lda, lda, j0 < fresh, 1.0f);
  }
}

#else  // no AVX-512 BF16 to run on: the attention never chooses the units (tile_kernels_bf16.h)

void key_major_tile(bool, int64_t, int64_t, const word*, int64_t, const word*, float, float*) {
  std::abort();
}
void query_rows(bool, int64_t, int64_t, int64_t, const word*, const word*, int64_t, float*,
                int64_t) {
  std::abort();
}
void key_rows(bool, int64_t, int64_t, int64_t, int64_t, const word*, const word*, int64_t, float*,
              int64_t) {
  std::abort();
}

#endif

}  // namespace ag::tile::bf16

namespace ag {

void force_attention_kernel_for_tests(AttentionKernelForTests kernel) {
  using tile::bf16::Forced;
  const Forced f = kernel == AttentionKernelForTests::units    ? Forced::units
                   : kernel == AttentionKernelForTests::fma    ? Forced::fma
                   : kernel == AttentionKernelForTests::onednn ? Forced::onednn
                                                               : Forced::none;
  tile::bf16::g_forced_for_tests = static_cast<int>(f);
}

bool attention_bf16_units_available() {
  return tile::bf16::units_available();
}

}  // namespace ag
