#include "nn/inference_kernels.h"

#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "autograd/dtype.h"
#include "autograd/ops.h"
#include "autograd/ops/gemm.h"
#include "autograd/threading.h"
#include "autograd/vec_math.h"
#include "nn/block_gemv.h"
#include "nn/lanes.h"
#include "nn/panel_gemv.h"

namespace nn::inference {

namespace {

// The loops below keep several independent sums of v16 (nn/lanes.h) in registers: one
// chain of multiply-adds waits four cycles a step.

// One stage of a 16x16 transpose: vectors a = m[k] and c = m[k + 2^b] (bit b of k clear)
// trade the lanes whose bit b differs from their row's, a taking c's lower and c taking
// a's upper half of each 2^(b+1)-lane block. (Without AVX-512, stages 0-2 trade within
// each 8-lane half, and stage 3 trades the halves.)
template <int b, typename V, size_t... J>
inline void swap_lanes(V& a, V& c, std::index_sequence<J...>) {
  constexpr int h = 1 << b, n = sizeof...(J);
  const V lo = __builtin_shufflevector(a, c, ((J >> b) & 1 ? int(J) - h + n : int(J))...);
  const V hi = __builtin_shufflevector(a, c, ((J >> b) & 1 ? int(J) + n : int(J) + h)...);
  a = lo, c = hi;
}
template <int b>
inline void swap_pair(v16& a, v16& c) {
#ifdef __AVX512F__
  swap_lanes<b>(a, c, std::make_index_sequence<kLanes>{});
#else
  if constexpr (b == 3) {
    const v8 a_hi = a.hi;
    a.hi = c.lo, c.lo = a_hi;
  } else {
    swap_lanes<b>(a.lo, c.lo, std::make_index_sequence<8>{});
    swap_lanes<b>(a.hi, c.hi, std::make_index_sequence<8>{});
  }
#endif
}
template <int b>
inline void transpose_stage(v16 (&m)[kLanes]) {
  for (int k = 0; k < kLanes; ++k)
    if (!((k >> b) & 1)) swap_pair<b>(m[k], m[k + (1 << b)]);
}

// s[k] = sum_lanes(acc[k]) for 16 sums at once, the same additions in the same order (lane
// k of the result adds acc[k]'s lanes 0, 1, ..., 15 to 0): the rows are transposed into
// lanes by 64 shuffles, where one sum at a time took 15 extractions and 15 dependent adds.
// acc is transposed in place (a copy of its 1 KB was a call to memmove: 4.5% of a server's
// CPU with 8 streams of the default model).
inline void sum_lanes_16(v16 (&m)[kLanes], float* s) {
  transpose_stage<0>(m), transpose_stage<1>(m), transpose_stage<2>(m), transpose_stage<3>(m);
  v16 sum = {};
  for (int j = 0; j < kLanes; ++j) sum += m[j];
  store(s, sum);
}

// y[0..n) (+)= s[0..n) + bias[0..n) (+ 0 without a bias): four outputs a vector, the same
// two roundings in the same order as one at a time (the scalar loop this replaced was a
// third of a 4x4 block's instructions on 128-wide rows).
template <int n>
inline void add_bias_and_store(const float* s, const float* bias, float* y, bool accumulate) {
  typedef float v4 __attribute__((vector_size(16)));
  int k = 0;
  for (; k + 4 <= n; k += 4) {
    v4 v, b = {}, before;
    std::memcpy(&v, s + k, sizeof v);
    if (bias) std::memcpy(&b, bias + k, sizeof b);
    v += b;
    if (accumulate) std::memcpy(&before, y + k, sizeof before), v = before + v;
    std::memcpy(y + k, &v, sizeof v);
  }
  for (; k < n; ++k) store_output(s[k], bias, k, y[k], accumulate);
}

// Sixteen weights as floats: float32 loaded, bfloat16 widened (exact: its bits shifted up).
inline v16 load_weights(const float* p) {
  return load(p);
}
inline v16 load_weights(const ag::bfloat16* p) {
#ifdef __AVX512F__
  typedef uint16_t u16x16 __attribute__((vector_size(32)));
  typedef uint32_t u32x16 __attribute__((vector_size(64)));
  u16x16 h;
  std::memcpy(&h, p, sizeof h);
  const u32x16 wide = __builtin_convertvector(h, u32x16) << 16;
  v16 v;
  std::memcpy(&v, &wide, sizeof v);
  return v;
#else
  typedef uint16_t u16x8 __attribute__((vector_size(16)));
  typedef uint32_t u32x8 __attribute__((vector_size(32)));
  v16 v;
  for (int half = 0; half < 2; ++half) {
    u16x8 h;
    std::memcpy(&h, p + 8 * half, sizeof h);
    const u32x8 wide = __builtin_convertvector(h, u32x8) << 16;
    std::memcpy(half ? &v.hi : &v.lo, &wide, sizeof wide);
  }
  return v;
#endif
}

// 32 floats from lo and hi (16 each) split into their even and odd lanes, in order
inline void even_odd(v16 lo, v16 hi, v16& even, v16& odd) {
#ifdef __AVX512F__
  even = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  odd = __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
#else
  even = {__builtin_shufflevector(lo.lo, lo.hi, 0, 2, 4, 6, 8, 10, 12, 14),
          __builtin_shufflevector(hi.lo, hi.hi, 0, 2, 4, 6, 8, 10, 12, 14)};
  odd = {__builtin_shufflevector(lo.lo, lo.hi, 1, 3, 5, 7, 9, 11, 13, 15),
         __builtin_shufflevector(hi.lo, hi.hi, 1, 3, 5, 7, 9, 11, 13, 15)};
#endif
}

// 16 pairs of bfloat16 weights as floats: each pair's even element (its low half, shifted
// up) and odd one (its high half, masked), exact
inline void widen_pairs(const ag::bfloat16* p, v16& even, v16& odd) {
#ifdef __AVX512F__
  typedef uint32_t u32x16 __attribute__((vector_size(64)));
  u32x16 pairs;
  std::memcpy(&pairs, p, sizeof pairs);
  const u32x16 e = pairs << 16, o = pairs & 0xffff0000u;
  std::memcpy(&even, &e, sizeof even);
  std::memcpy(&odd, &o, sizeof odd);
#else
  typedef uint32_t u32x8 __attribute__((vector_size(32)));
  for (int half = 0; half < 2; ++half) {
    u32x8 pairs;
    std::memcpy(&pairs, p + 16 * half, sizeof pairs);
    const u32x8 e = pairs << 16, o = pairs & 0xffff0000u;
    std::memcpy(half ? &even.hi : &even.lo, &e, sizeof e);
    std::memcpy(half ? &odd.hi : &odd.lo, &o, sizeof o);
  }
#endif
}

// The weights a step reads are streamed from memory once; the loops below ask for the
// next group of rows (the same place in them) while they work on this one, which the
// hardware's own prefetcher, following each load, starts too late: with it a token's
// GEMVs read at about 95% of a plain read's bandwidth in float32 and 85% in bfloat16,
// against 80% and 55% without (GPT-2 124M's matrices on one thread, docs/gpt2-scale.md).
template <typename W>
inline void prefetch_next(const W* w, int64_t group_elements) {
  __builtin_prefetch(w + group_elements);
}

// R weight rows against one row of x: R sums in registers (R independent chains of
// multiply-adds: enough to keep both FMA units busy while the loads stream).
template <int R, typename W>
struct Rows {
  const W* w[R];
  int64_t ahead;  // elements from a row to the same row of the next group
  v16 acc[R] = {};

  // acc[k] += w[k][i..i+16) * x[i..i+16) for i from `from` while 16 remain; returns where
  // it stopped.
  int64_t sixteens(const float* x, int64_t from, int64_t in) {
    int64_t i = from;
    for (; i + kLanes <= in; i += kLanes) {
      const v16 xv = load(x + i);
      for (int k = 0; k < R; ++k) {
        prefetch_next(w[k] + i, ahead);
        acc[k] += load_weights(w[k] + i) * xv;
      }
    }
    return i;
  }

  // y[0..R) (+)= bias[0..R) + the sums, the elements from `from` on added one by one.
  // (The sums are finished side by side, before any store: their chains of adds overlap,
  // and no store to y can alias a later load.)
  void finish(const float* x, int64_t from, int64_t in, const float* bias, float* y,
              bool accumulate) {
    float s[R];
    if constexpr (R == kLanes)
      sum_lanes_16(acc, s);
    else
      for (int k = 0; k < R; ++k) s[k] = sum_lanes(acc[k]);
    for (int64_t i = from; i < in; ++i)
      for (int k = 0; k < R; ++k) s[k] += float(w[k][i]) * x[i];
    add_bias_and_store<R>(s, bias, y, accumulate);
  }
};

// bfloat16 weights 32 at a time: a 64-byte load holds 16 pairs; a pair's even element
// becomes a float by a shift and its odd one by a mask (no conversion), and each meets its
// own half of x (its 32 floats split into even and odd lanes once for the R rows).
// Returns where it stopped. Half the instructions of widening 16 at a time: with them a
// step of the base config was bound by instructions, not by the bytes it reads.
template <int R>
int64_t thirty_twos(Rows<R, ag::bfloat16>& r, const float* x, int64_t in) {
  int64_t i = 0;
  for (; i + 2 * kLanes <= in; i += 2 * kLanes) {
    v16 xe, xo;
    even_odd(load(x + i), load(x + i + kLanes), xe, xo);
    for (int k = 0; k < R; ++k) {
      prefetch_next(r.w[k] + i, r.ahead);
      v16 we, wo;
      widen_pairs(r.w[k] + i, we, wo);
      r.acc[k] += we * xe, r.acc[k] += wo * xo;
    }
  }
  return i;
}

// y[r][o..o+R) (+)= bias + x[r] . W[o..o+R): R weight rows at a time, each read once
// from memory for every row of x (they stay in the cache).
template <int R, typename W>
void row_group(const float* x, int64_t rows, int64_t in, const W* w, const float* bias, int64_t o,
               float* y, int64_t ldy, bool accumulate) {
  const W* w0 = w + o * in;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * in;
    Rows<R, W> group;
    for (int k = 0; k < R; ++k) group.w[k] = w0 + k * in;
    group.ahead = R * in;
    int64_t i = 0;
    if constexpr (std::is_same_v<W, ag::bfloat16>) i = thirty_twos(group, xr, in);
    i = group.sixteens(xr, i, in);
    group.finish(xr, i, in, bias ? bias + o : nullptr, y + r * ldy + o, accumulate);
  }
}

// The same for one output (the last out % 4).
template <typename W>
void one_output(const float* x, int64_t rows, int64_t in, const W* w, const float* bias, int64_t o,
                float* y, int64_t ldy, bool accumulate) {
  const W* wo = w + o * in;
  for (int64_t r = 0; r < rows; ++r) {
    float s = 0;
    for (int64_t i = 0; i < in; ++i) s += float(wo[i]) * x[r * in + i];
    store_output(s, bias, o, y[r * ldy + o], accumulate);
  }
}

// Rows a pass reads at a time: 16 sums in AVX-512's registers (their lanes summed by one
// transpose), and the next 16 rows asked for; 4 in AVX2's, where 16 sums of two registers
// each spilled to memory. (Each row's sum is the same whatever the group: 16 or 4 rows at a
// time, the same bits.)
#ifdef __AVX512F__
constexpr int kGroupRows = 16;
#else
constexpr int kGroupRows = 4;
#endif

// Four rows of x against four float32 weight rows of a width of whole lanes: each weight
// loaded once for the four rows, and the 16 sums' lanes added up by one transpose
// (sum_lanes_16). Each (weight row, x row) sum adds the same products in the same order as
// Rows::sixteens and its lanes as Rows::finish does, so every row gets the bits it has
// alone (a step of many independent rows is then bound by arithmetic, not by loads).
void four_by_four(const float* x, int64_t in, const float* w, const float* bias, int64_t o,
                  float* y, int64_t ldy, bool accumulate) {
  constexpr int kX = 4, kW = 4;
  const float* wk[kW];
  for (int k = 0; k < kW; ++k) wk[k] = w + (o + k) * in;
  v16 acc[kX * kW] = {};
#ifdef __AVX512F__
  // the same fused products in the same order as below, in registers: GCC reloads the
  // four rows of x from memory for every weight row there, two loads an FMA, which held
  // a 128-wide matrix to about 25 GFLOP/s on a Zen 4 core. (A do-while: `in` is a whole
  // number of lanes, at least one, and a loop that may not run made GCC zero a copy of the
  // sums in memory by a call to memset for every block.)
  int64_t i = 0;
  do {
    const __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + in + i),
                 x2 = _mm512_loadu_ps(x + 2 * in + i), x3 = _mm512_loadu_ps(x + 3 * in + i);
    for (int k = 0; k < kW; ++k) {
      prefetch_next(wk[k] + i, kW * in);
      const __m512 wv = _mm512_loadu_ps(wk[k] + i);
      v16* a = acc + k;
      a[0 * kW] = v16(_mm512_fmadd_ps(wv, x0, __m512(a[0 * kW])));
      a[1 * kW] = v16(_mm512_fmadd_ps(wv, x1, __m512(a[1 * kW])));
      a[2 * kW] = v16(_mm512_fmadd_ps(wv, x2, __m512(a[2 * kW])));
      a[3 * kW] = v16(_mm512_fmadd_ps(wv, x3, __m512(a[3 * kW])));
    }
    i += kLanes;
  } while (i + kLanes <= in);
#else
  // AVX2's 16 registers hold the sums of a 2 x 2 block (8 of them) beside its operands, not
  // the 32 of 4 x 4, which spilled to memory (a server's 8 rows of the base config's MLP ran
  // at 5 GFLOP/s on an AMD EPYC Zen 3): four passes of 2 x 2, each sum's products the same,
  // in the same order
  for (int j0 = 0; j0 < kX; j0 += 2)
    for (int k0 = 0; k0 < kW; k0 += 2) {
      v16 a00 = {}, a01 = {}, a10 = {}, a11 = {};
      for (int64_t i = 0; i + kLanes <= in; i += kLanes) {
        const v16 x0 = load(x + j0 * in + i), x1 = load(x + (j0 + 1) * in + i);
        const v16 w0 = load(wk[k0] + i), w1 = load(wk[k0 + 1] + i);
        a00 += w0 * x0, a01 += w1 * x0, a10 += w0 * x1, a11 += w1 * x1;
      }
      v16* a = acc + j0 * kW + k0;
      a[0] = a00, a[1] = a01, a[kW] = a10, a[kW + 1] = a11;
    }
#endif
  float s[kX * kW];
  sum_lanes_16(acc, s);
  for (int j = 0; j < kX; ++j)
    add_bias_and_store<kW>(s + j * kW, bias ? bias + o : nullptr, y + j * ldy + o, accumulate);
}

// Four rows or more on float32 weights of a width of whole lanes (in % 16 == 0): blocks of
// four rows by four_by_four, the rest of the rows and outputs as one row at a time would run.
void many_rows(const float* x, int64_t rows, int64_t in, const float* w, const float* bias,
               int64_t out, float* y, int64_t ldy, bool accumulate) {
  const int64_t whole = rows / 4 * 4, fours = out / 4 * 4;
  for (int64_t o = 0; o < fours; o += 4) {
    for (int64_t r = 0; r < whole; r += 4)
      four_by_four(x + r * in, in, w, bias, o, y + r * ldy, ldy, accumulate);
    if (whole < rows)
      row_group<4>(x + whole * in, rows - whole, in, w, bias, o, y + whole * ldy, ldy, accumulate);
  }
  for (int64_t o = fours; o < out; ++o) one_output(x, rows, in, w, bias, o, y, ldy, accumulate);
}

template <typename W>
void vector_linear(const float* x, int64_t rows, int64_t in, const W* w, const float* bias,
                   int64_t out, float* y, int64_t ldy, bool accumulate) {
  // (a width that is not whole lanes leaves a tail, whose products the compiler may fuse
  // differently in a group of 16 weight rows than in one of 4: those keep one row a time)
  if constexpr (std::is_same_v<W, float>)
    if (rows >= 4 && in >= kLanes && in % kLanes == 0)  // (four_by_four: a lane or more)
      return many_rows(x, rows, in, w, bias, out, y, ldy, accumulate);
  int64_t o = 0;
  // Rows of a multiple of 4 KB (Llama-3.2-1B's 2048 and 8192 weights) put every row of a
  // group of 16 in one set of the 8-way L1 cache, and the group evicts itself: 4 rows a pass
  // there. (One Zen 4 core, bf16 [64, 2048] from the caches: 16 rows 1.1-2.6 G weights/s,
  // 4 rows 15.6-17.9; from memory 17-57% of a plain read against 53-78%.)
  const bool one_set = in * static_cast<int64_t>(sizeof(W)) % 4096 == 0;
  // One row of x against bfloat16 rows of 4 KB (Llama-3.2-1B's 2048 weights), its x (8 KB)
  // staying in L1 beside them: two weight rows a pass, the matrix read in order, each pair
  // asking for the next; the last out % 4 outputs one at a time, as several rows of x take
  // them. (One Zen 4 core, [8192, 2048] from memory: one row a pass 76-82% of a plain read
  // against 61-69% four at a time. The AMX Xeon: two rows a pass 100-105% against one row's
  // 76-83%, from the caches 21-23 G weights/s against 14.7: one row's sum is one chain of
  // multiply-adds, whose latency bound it. Rows of 8192, whose x would fill L1, keep four:
  // 41-49% one at a time against 71-72%; rows of 576 to 1536 showed no gain.)
  if (std::is_same_v<W, ag::bfloat16> && rows == 1 && in * static_cast<int64_t>(sizeof(W)) == 4096)
    for (; o + 2 <= out / 4 * 4; o += 2) row_group<2>(x, rows, in, w, bias, o, y, ldy, accumulate);
  for (; !one_set && o + kGroupRows <= out; o += kGroupRows)
    row_group<kGroupRows>(x, rows, in, w, bias, o, y, ldy, accumulate);
  for (; o + 4 <= out; o += 4) row_group<4>(x, rows, in, w, bias, o, y, ldy, accumulate);
  for (; o < out; ++o) one_output(x, rows, in, w, bias, o, y, ldy, accumulate);
}

}  // namespace

// Rows vector_rows or fewer go through the kernels above (a step: one row per sample);
// more through BLAS's GEMM, which reuses each weight for more rows at a time, where the
// whole product is large enough that no thread's share meets BLAS's small-matrix kernels.
void linear(const float* x, int64_t rows, int64_t in, Weights W, const float* bias, int64_t out,
            int64_t matrix_out, float* y, int64_t ldy, bool accumulate, int64_t vector_rows) {
  if (rows <= vector_rows) {  // never BLAS's threads: a step shares its rows out itself
    if (W.q8_0_q8) return q8_0_q8_linear(x, rows, in, W.q8_0_q8, bias, out, y, ldy, accumulate);
    if (W.q4_k_q8) return q4_k_q8_linear(x, rows, in, W.q4_k_q8, bias, out, y, ldy, accumulate);
    if (W.q8_0) return q8_0_linear(x, rows, in, W.q8_0, bias, out, y, ldy, accumulate);
    if (W.q4_k) return q4_k_linear(x, rows, in, W.q4_k, bias, out, y, ldy, accumulate);
    if (W.bf16) return vector_linear(x, rows, in, W.bf16, bias, out, y, ldy, accumulate);
    if (W.panels)
      return panel_linear(x, rows, in, W.panels, W.first, bias, out, y, ldy, accumulate);
    return vector_linear(x, rows, in, W.f32, bias, out, y, ldy, accumulate);
  }
  const double product =
      static_cast<double>(rows) * static_cast<double>(matrix_out) * static_cast<double>(in);
  if (product < kBlasMultiplyAdds && W.panels)
    return panel_linear(x, rows, in, W.panels, W.first, bias, out, y, ldy, accumulate);
  if (product < kBlasMultiplyAdds)
    return vector_linear(x, rows, in, W.f32, bias, out, y, ldy, accumulate);
  if (bias)
    for (int64_t r = 0; r < rows; ++r) {
      float* yr = y + r * ldy;
      if (accumulate) {
        AG_SIMD
        for (int64_t i = 0; i < out; ++i) yr[i] += bias[i];
      } else {
        std::memcpy(yr, bias, static_cast<size_t>(out) * sizeof(float));
      }
    }
  const float beta = bias || accumulate ? 1.0f : 0.0f;
  ag::detail::sgemm_nt_here(rows, out, in, x, in, W.f32, in, beta, y, ldy);
}

void gelu(float* y, int64_t n) {
  AG_SIMD
  for (int64_t i = 0; i < n; ++i) y[i] = ag::detail::gelu_value(y[i]);
}

namespace {

// s[0..t) = softmax(s[0..t)) unnormalised; returns the sum to divide by.
float exp_shifted(float* s, int64_t t) {
  // the largest, sixteen lanes at a time (GCC left `omp simd reduction(max)` over std::max a
  // scalar chain, a quarter of this function's time); each lane and then the lanes as
  // std::max takes them (a NaN passed over), and a largest is the same in any order
  v16 lanes = v16{} - INFINITY;
  int64_t j = 0;
  for (; j + kLanes <= t; j += kLanes) {
    const v16 x = load(s + j);
    lanes = larger(lanes, x);
  }
  float m = -INFINITY;
  for (int l = 0; l < kLanes; ++l) m = std::max(m, lanes[l]);
  for (; j < t; ++j) m = std::max(m, s[j]);
  float sum = 0;
  AG_SIMD_SUM(sum)
  for (int64_t j = 0; j < t; ++j) sum += (s[j] = ag::detail::exp_fast(s[j] - m));
  return sum;
}

}  // namespace

void causal_softmax(float* scores, int64_t rows, int64_t n, int64_t first) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = first + r;
    float* s = scores + r * n;
    const float inv = 1.0f / exp_shifted(s, i + 1);
    AG_SIMD
    for (int64_t j = 0; j <= i; ++j) s[j] *= inv;
    std::fill(s + i + 1, s + n, 0.0f);
  }
}

namespace {

// p[0..n) in a vector's first n (< 16) lanes, zeros after; nothing past p + n is read (a
// cache row's last positions).
inline v16 load_first(const float* p, int64_t n) {
#ifdef __AVX512F__
  return reinterpret_cast<v16>(_mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p));
#elif defined(__AVX2__)
  // masked loads (a lane left out reads nothing): the copy through memory below made each
  // dimension's multiply-add wait on a call to memcpy and a store's forwarding, the default
  // model's attention scores on an AMD EPYC Zen 3 spending two thirds of their time there
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lane);
  const __m256i hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n) - 8), lane);
  return {reinterpret_cast<v8>(_mm256_maskload_ps(p, lo)),
          reinterpret_cast<v8>(_mm256_maskload_ps(p + 8, hi))};
#else
  float v[kLanes] = {};
  for (int64_t l = 0; l < n; ++l) v[l] = p[l];
  return load(v);
#endif
}
inline void store_first(float* p, v16 v, int64_t n) {
  for (int64_t l = 0; l < n; ++l) p[l] = v[l];
}

// s[j0, j0 + 16 B - 16 + part): B blocks of 16 positions side by side (a chain each), the
// last one `part` positions long when part > 0.
template <int B>
void score_blocks(const float* q, const float* kt, int64_t ldk, int64_t j0, int64_t part, int64_t D,
                  float scale, float* s) {
  v16 a[B] = {};
  for (int64_t d = 0; d < D; ++d) {
    const float qd = q[d] * scale;
    const float* kd = kt + d * ldk + j0;
#pragma GCC unroll 4
    for (int b = 0; b < B - 1; ++b) a[b] += qd * load(kd + b * kLanes);
    a[B - 1] += qd * (part ? load_first(kd + (B - 1) * kLanes, part) : load(kd + (B - 1) * kLanes));
  }
  for (int b = 0; b < B - 1; ++b) store(s + j0 + b * kLanes, a[b]);
  if (part)
    store_first(s + j0 + (B - 1) * kLanes, a[B - 1], part);
  else
    store(s + j0 + (B - 1) * kLanes, a[B - 1]);
}

// s[0..t) = scale q . k_j, 64 positions at a time summed over the dimensions in four
// registers (the keys are transposed: dimension d of position j at kt[d * ldk + j]), then
// the rest (under 64 positions: most of a small context's) in as many registers side by
// side, the last of them masked: one chain at a time waited on each multiply-add's latency
// (the default model's attention took 12% of a server's steps, the scalar tail's chains
// included). Each position's sum is one chain of fused multiply-adds over the dimensions
// in order, whichever register it falls in.
void scores(const float* q, const float* kt, int64_t ldk, int64_t t, int64_t D, float scale,
            float* s) {
  int64_t j0 = 0;
  for (; j0 + 4 * kLanes <= t; j0 += 4 * kLanes) score_blocks<4>(q, kt, ldk, j0, 0, D, scale, s);
  const int64_t left = t - j0, part = left % kLanes;
  switch ((left + kLanes - 1) / kLanes) {
    case 1: return score_blocks<1>(q, kt, ldk, j0, part, D, scale, s);
    case 2: return score_blocks<2>(q, kt, ldk, j0, part, D, scale, s);
    case 3: return score_blocks<3>(q, kt, ldk, j0, part, D, scale, s);
    case 4: return score_blocks<4>(q, kt, ldk, j0, part, D, scale, s);
    default: return;  // none left
  }
}

// out[0..D) = sum_j w[j] v_j: sixteen dimensions at a time, four positions side by side.
void weighted_values(const float* w, const float* v, int64_t ldv, int64_t t, int64_t D,
                     float* out) {
  int64_t d0 = 0;
  for (; d0 + kLanes <= D; d0 += kLanes) {
    v16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
    const float* vd = v + d0;
    int64_t j = 0;
    for (; j + 4 <= t; j += 4) {
      a0 += w[j] * load(vd + j * ldv), a1 += w[j + 1] * load(vd + (j + 1) * ldv);
      a2 += w[j + 2] * load(vd + (j + 2) * ldv), a3 += w[j + 3] * load(vd + (j + 3) * ldv);
    }
    for (; j < t; ++j) a0 += w[j] * load(vd + j * ldv);
    store(out + d0, (a0 + a1) + (a2 + a3));
  }
  for (int64_t d = d0; d < D; ++d) {
    float a = 0;
    for (int64_t j = 0; j < t; ++j) a += w[j] * v[j * ldv + d];
    out[d] = a;
  }
}

}  // namespace

void attend(const float* q, const float* kt, int64_t ldk, const float* v, int64_t ldv, int64_t t,
            int64_t D, float scale, float* s, float* out) {
  scores(q, kt, ldk, t, D, scale, s);
  const float inv = 1.0f / exp_shifted(s, t);
  weighted_values(s, v, ldv, t, D, out);
  AG_SIMD
  for (int64_t d = 0; d < D; ++d) out[d] *= inv;
}

void transpose_into(const float* k, int64_t n, int64_t ld, int64_t c0, int64_t c1, float* kt,
                    int64_t T, int64_t t0) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = c0; c < c1; ++c) kt[c * T + t0 + t] = k[t * ld + c];
}

void SpinBarrier::wait(int threads) {
  if (threads <= 1) return;
  const unsigned generation = generation_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) == threads - 1) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    return;
  }
  for (int spins = 0; generation_.load(std::memory_order_acquire) == generation; ++spins) {
    if (spins >= 2000) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
    else
      __builtin_ia32_pause();
#endif
  }
}

// The start alternates, team first (T 1 T 1 T 1): each way's first step is a warm-up and
// the next kTimedFirst are kept by their minimum, so that one step slowed by something else
// (a page fault, another process) cannot settle the choice; a wrong one would stand until
// the next trial, 32 steps or more later (a whole short sample of a large model).
bool StepPace::threaded() {
  ++steps_;
  const int64_t start = kTimedFirst + 1;
  if (timed_[0] < start || timed_[1] < start) return timed_[1] <= timed_[0];
  const bool faster = average_[1] <= average_[0];
  if (trial_ == 0 && steps_ >= next_trial_) trial_ = 2;
  return trial_ > 0 ? !faster : faster;
}

void StepPace::record(bool threaded, double seconds) {
  const int mode = threaded ? 1 : 0;
  if (timed_[mode]++ == 0) return;  // a warm-up: the team's threads start, caches fill
  // a trial's first step is a warm-up too: after steps on one thread the team's other
  // threads sleep, and waking them took 700-950 us against a step's 56 (a server's one
  // stream, the default model), which kept one row on one thread, 1.7x slower
  if (trial_ == 2) {
    trial_ = 1;
    return;
  }
  const int64_t start = kTimedFirst + 1;
  // at the start the minimum; then the mode in use is averaged, each step counted as at
  // most twice the average (one step slowed by another process, or by a handler taking the
  // core, moves it by an eighth, where it could flip the choice), and a trial of the other
  // stands for it alone (its old average may be from a busier minute)
  double& avg = average_[mode];
  if (timed_[mode] == 2 || trial_ == 1)
    avg = seconds;
  else
    avg = timed_[mode] <= start ? std::min(avg, seconds)
                                : 0.875 * avg + 0.125 * std::min(seconds, 2 * avg);
  if (timed_[0] < start || timed_[1] < start) return;
  if (trial_ == 1 || next_trial_ == 0) {  // the next trial of the slower: rarer the slower it is
    const double ratio = std::max(average_[0], average_[1]) / std::min(average_[0], average_[1]);
    next_trial_ = steps_ + static_cast<int64_t>(32 * std::min(ratio, 64.0));
    trial_ = 0;
  }
}

StepPace& PacesByRows::operator[](int64_t rows) {
  const auto r = static_cast<uint64_t>(std::max<int64_t>(rows, 1));
  // (16, 32] the next, (32, 64] the one after, ...
  const size_t at = r <= kExact ? r : kExact + std::bit_width(r - 1) - std::bit_width(kExact - 1);
  return paces_[at];
}

Range share(int64_t n, int tid, int threads, int64_t align) {
  const int64_t units = (n + align - 1) / align;
  const int64_t per = units / threads, extra = units % threads;
  const int64_t first = tid * per + std::min<int64_t>(tid, extra);
  const int64_t count = per + (tid < extra ? 1 : 0);
  return {std::min(n, first * align), std::min(n, (first + count) * align)};
}

}  // namespace nn::inference
