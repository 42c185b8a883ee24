#include "nn/panel_gemv.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "autograd/hold_in_register.h"
#include "nn/inference_kernels.h"
#include "nn/lanes.h"

namespace nn::inference {

namespace {

// Where a tile writes: its first panel's lane 0 is output `start` of y's share (negative
// when the share begins inside that panel), and the share holds outputs [0, out).
struct TileOutputs {
  int64_t start, out;
  bool holds(int64_t o) const { return o >= 0 && o < out; }
};

#ifdef __AVX512F__
// The lanes of panel v of a tile that fall inside the share.
inline __mmask16 lanes_inside(TileOutputs t, int v) {
  unsigned bits = 0;
  for (int l = 0; l < kLanes; ++l)
    if (t.holds(t.start + v * kLanes + l)) bits |= 1u << l;
  return static_cast<__mmask16>(bits);
}

// R rows of x against V panels from `panels` (a panel each vector): R V sums in registers,
// each weight vector loaded once for the R rows: enough chains to keep both FMA units busy
// (R V >= 8), and few enough loads an FMA (V + R per R V).
template <int R, int V>
void tile(const float* x, int64_t in, const float* panels, TileOutputs t, const float* bias,
          float* y, int64_t ldy, bool accumulate) {
  __m512 acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t i = 0; i < in; ++i) {
    __m512 w[V];
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) w[v] = _mm512_loadu_ps(panels + (v * in + i) * kLanes);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 xb = _mm512_set1_ps(x[r * in + i]);
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(w[v], xb, acc[r][v]);
    }
  }
  for (int v = 0; v < V; ++v) {
    const __mmask16 mask = lanes_inside(t, v);
    const int64_t o = t.start + v * kLanes;
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + o) : _mm512_setzero_ps();
    for (int r = 0; r < R; ++r) {
      __m512 s = _mm512_add_ps(acc[r][v], b);
      if (accumulate) s = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y + r * ldy + o), s);
      _mm512_mask_storeu_ps(y + r * ldy + o, mask, s);
    }
  }
}
#elif defined(__AVX2__) && defined(__FMA__)
// AVX2: a panel's 16 lanes as two registers, the same fused multiply-add a lane in the same
// order (the scalar form below took 80% of a default model's sampling on an AMD EPYC Zen 3);
// the sums leave through store_output, the same two roundings as AVX-512's.
template <int R, int V>
void tile(const float* x, int64_t in, const float* panels, TileOutputs t, const float* bias,
          float* y, int64_t ldy, bool accumulate) {
  __m256 acc[R][V][2];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) acc[r][v][0] = acc[r][v][1] = _mm256_setzero_ps();
  for (int64_t i = 0; i < in; ++i) {
    __m256 w[V][2];
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) {
      w[v][0] = _mm256_loadu_ps(panels + (v * in + i) * kLanes);
      w[v][1] = _mm256_loadu_ps(panels + (v * in + i) * kLanes + 8);
      // held in registers where several rows use them (4 rows had taken longer than 5);
      // one row uses each once, and its 8 vectors would not fit beside its 8 sums
      if constexpr (R > 1)
        ag::detail::hold_in_register(w[v][0]), ag::detail::hold_in_register(w[v][1]);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m256 xb = _mm256_set1_ps(x[r * in + i]);
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) {
        acc[r][v][0] = _mm256_fmadd_ps(w[v][0], xb, acc[r][v][0]);
        acc[r][v][1] = _mm256_fmadd_ps(w[v][1], xb, acc[r][v][1]);
      }
    }
  }
  for (int v = 0; v < V; ++v)
    for (int r = 0; r < R; ++r) {
      float sums[kLanes];
      _mm256_storeu_ps(sums, acc[r][v][0]);
      _mm256_storeu_ps(sums + 8, acc[r][v][1]);
      for (int l = 0; l < kLanes; ++l) {
        const int64_t o = t.start + v * kLanes + l;
        if (t.holds(o)) store_output(sums[l], bias, o, y[r * ldy + o], accumulate);
      }
    }
}
#else
// The same sums output by output (std::fma: the same roundings as the vector FMA).
template <int R, int V>
void tile(const float* x, int64_t in, const float* panels, TileOutputs t, const float* bias,
          float* y, int64_t ldy, bool accumulate) {
  for (int v = 0; v < V; ++v)
    for (int l = 0; l < kLanes; ++l) {
      const int64_t o = t.start + v * kLanes + l;
      if (!t.holds(o)) continue;
      const float* w = panels + v * in * kLanes + l;
      for (int r = 0; r < R; ++r) {
        float acc = 0;
        for (int64_t i = 0; i < in; ++i) acc = std::fma(w[i * kLanes], x[r * in + i], acc);
        store_output(acc, bias, o, y[r * ldy + o], accumulate);
      }
    }
}
#endif

// R rows against the share's panels: V at a time, then one at a time.
template <int R, int V>
void rows_of(const float* x, int64_t in, const float* panels, int64_t first, const float* bias,
             int64_t out, float* y, int64_t ldy, bool accumulate) {
  const int64_t p0 = first / kLanes, p1 = (first + out + kLanes - 1) / kLanes;
  int64_t p = p0;
  auto at = [&](int64_t panel) { return TileOutputs{panel * kLanes - first, out}; };
  for (; p + V <= p1; p += V)
    tile<R, V>(x, in, panels + p * in * kLanes, at(p), bias, y, ldy, accumulate);
  for (; p < p1; ++p) tile<R, 1>(x, in, panels + p * in * kLanes, at(p), bias, y, ldy, accumulate);
}

// Rows a pass takes and panels a tile for R of them: at least 8 sums a tile but for one row.
// AVX-512 (a panel one of 32 registers, at most 29 used): 7 to 12 rows (a prefill's blocks)
// two panels a tile; 3 to 6 (a step's rows, bound by reading the weights: 3 rows took two
// passes, 2 and 1, as long as two of 4 rows) four; 1 and 2 eight. AVX (a panel two of 16
// registers, at most 12 sums): 1 row four, 2 rows two, 3 to 6 one.
#ifdef __AVX512F__
constexpr int kMostRows = 12;
constexpr int panels_a_tile(int R) {
  return R <= 2 ? 8 : R <= 6 ? 4 : 2;
}
#else
constexpr int kMostRows = 6;
constexpr int panels_a_tile(int R) {
  return R == 1 ? 4 : R == 2 ? 2 : 1;
}
#endif

// n in [1, R] rows in one pass over the panels, each weight vector loaded once for all of
// them
template <int R>
void rows_up_to(int64_t n, const float* x, int64_t in, const float* panels, int64_t first,
                const float* bias, int64_t out, float* y, int64_t ldy, bool accumulate) {
  if constexpr (R > 1)
    if (n < R) return rows_up_to<R - 1>(n, x, in, panels, first, bias, out, y, ldy, accumulate);
  rows_of<R, panels_a_tile(R)>(x, in, panels, first, bias, out, y, ldy, accumulate);
}

// R rows (at most 12) over the panels: in one pass, or passes of kMostRows where fewer
// registers hold fewer sums (each row's sums are the same in any pass)
void rows_in_one_pass(int64_t R, const float* x, int64_t in, const float* panels, int64_t first,
                      const float* bias, int64_t out, float* y, int64_t ldy, bool accumulate) {
  for (; R > kMostRows; R -= kMostRows, x += kMostRows * in, y += kMostRows * ldy)
    rows_up_to<kMostRows>(kMostRows, x, in, panels, first, bias, out, y, ldy, accumulate);
  rows_up_to<kMostRows>(R, x, in, panels, first, bias, out, y, ldy, accumulate);
}

}  // namespace

int64_t panel_floats(int64_t out, int64_t in) {
  return (out + kLanes - 1) / kLanes * kLanes * in;
}

void pack_panels(const float* w, int64_t out, int64_t in, float* panels) {
  for (int64_t p = 0; p * kLanes < out; ++p)
    for (int64_t i = 0; i < in; ++i)
      for (int64_t l = 0; l < kLanes; ++l) {
        const int64_t o = p * kLanes + l;
        panels[(p * in + i) * kLanes + l] = o < out ? w[o * in + i] : 0.0f;
      }
}

// Eight rows or more: as few passes over the panels as blocks of at most 12 rows allow, the
// rows shared evenly between them (a window's re-prefill of 33 positions: three blocks of
// 11, where blocks of 8 left a 33rd row to read every panel again alone), and the rows
// left (13 to 15 rows: 12, then 1 to 3) in one more pass. Four rows take four panels a
// tile, two and one eight: the shapes measured fastest for each count on the AMX Xeon
// ([384, 128] and [128, 512]).
void panel_linear(const float* x, int64_t rows, int64_t in, const float* panels, int64_t first,
                  const float* bias, int64_t out, float* y, int64_t ldy, bool accumulate) {
  if (out <= 0) return;  // (a thread's empty share would still read the panel it starts in)
  // blocks of 8 to 12 rows over as many rows as they can hold (13 rows: 12, then one)
  int64_t blocks = (rows + 11) / 12;
  if (rows < 8 * blocks) --blocks;
  const int64_t in_blocks = std::min(rows, 12 * blocks);
  int64_t r = 0;
  for (; blocks > 0; --blocks) {
    const int64_t R = (in_blocks - r + blocks - 1) / blocks;
    rows_in_one_pass(R, x + r * in, in, panels, first, bias, out, y + r * ldy, ldy, accumulate);
    r += R;
  }
  if (r < rows)
    rows_in_one_pass(rows - r, x + r * in, in, panels, first, bias, out, y + r * ldy, ldy,
                     accumulate);
}

}  // namespace nn::inference
