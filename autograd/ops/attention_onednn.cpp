#include "autograd/ops/attention_onednn.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/ops/batched_matmul.h"
#include "autograd/parallel.h"
#include "autograd/test_hooks.h"
#include "autograd/vec_math.h"

namespace ag::detail::attention {

namespace {

// A call's blocks: 64 queries by 64 keys (AMX tiles are 16 rows by 32 bfloat16 pairs; a
// causal square's diagonal blocks are whole when both are equal)
constexpr int64_t kQueryBlock = 64, kKeyBlock = 64;
// Scores of one call (float32: 256 KiB, in L2 beside its operands)
constexpr int64_t kCallScores = 1 << 16;
// At most this many floats a call holds for its rows across every key (backward's dk and
// dv sums, the dropout masks): 8 MiB, or one row where a row alone is more
constexpr int64_t kRowFloats = 1 << 21;
// Groups of rows: at least this many where there are rows for them, so that a team of up to
// this many threads shares the work (the groups never depend on the team's size)
constexpr int64_t kMinGroups = 8;

std::atomic<int64_t> g_test_queries{0}, g_test_keys{0};
std::atomic<bool> g_test_twin{false};

template <typename In>
using Acc = std::conditional_t<std::is_same_v<In, double>, double, float>;

// v stored as an operand: rounded to bfloat16 (its bits: storing a bfloat16 made by its
// constructor copies a temporary, which GCC does not vectorise), or as it is in float64
inline void store(bfloat16* p, int64_t j, float v) {
  p[j].bits = bf16_bits_from_f32_bits(std::bit_cast<uint32_t>(v));
}
inline void store(double* p, int64_t j, double v) {
  p[j] = v;
}

inline void product(const BatchedProduct& p, const bfloat16* a, const bfloat16* b, float* c,
                    bool accumulate) {
  if (!onednn_batched_product(p, a, b, c, accumulate))
    throw std::logic_error("attention: oneDNN lost the bfloat16 kernel it was chosen for");
}
inline void product(const BatchedProduct& p, const double* a, const double* b, double* c,
                    bool accumulate) {
  plain_batched_product(p, a, b, c, accumulate);
}

// The call in hand: key and value rows [kr0, kr0 + kb) with their query rows, queries
// [i0, i0 + m). Row x of the call's blocks is query i0 + x % m of query row r_of(x).
struct Call {
  int64_t kr0, kb, i0, m, group;
  int64_t rows() const { return kb * group * m; }
  int64_t r_of(int64_t x) const { return kr0 * group + x / m; }
  int64_t i_of(int64_t x) const { return i0 + x % m; }
};

// One thread's scratch, kept from call to call and only grown (made afresh at every call,
// its pages, MiBs, were faulted in and zeroed at every layer)
template <typename In>
struct Scratch {
  using A = Acc<In>;
  std::vector<In> q, k, v, dout, left, right;
  std::vector<A> scores, dp, sums, dk, dv, keep, max, total, delta, lse;

  static Scratch& of_this_thread(const Spec& s, const Blocking& b) {
    thread_local Scratch w;
    const size_t rows = b.kv_rows * s.group * b.queries, keys = b.keys;
    const size_t all_keys = (s.S + b.keys - 1) / b.keys * b.keys * b.kv_rows;
    grow(w.q, rows * s.D), grow(w.dout, rows * s.Dv), grow(w.k, b.kv_rows * keys * s.D);
    grow(w.v, b.kv_rows * keys * s.Dv), grow(w.left, rows * keys), grow(w.right, rows * keys);
    grow(w.scores, rows * keys), grow(w.dp, rows * keys);
    grow(w.sums, rows * std::max(s.D, s.Dv));
    grow(w.dk, all_keys * s.D), grow(w.dv, all_keys * s.Dv);
    if (s.p > 0) grow(w.keep, rows * s.S);
    grow(w.max, rows), grow(w.total, rows), grow(w.delta, rows), grow(w.lse, rows);
    return w;
  }
  template <typename T>
  static void grow(std::vector<T>& v, size_t n) {
    if (v.size() < n) v.resize(n);
  }
};

// The call's query rows [rows, width] of src [R, T, width], side by side
template <typename In>
void gather_queries(const Call& c, const Spec& s, const In* src, int64_t width, In* dst) {
  for (int64_t x = 0; x < c.rows(); x += c.m)
    std::memcpy(dst + x * width, src + (c.r_of(x) * s.T + c.i0) * width, sizeof(In) * c.m * width);
}

// Keys [j0, j0 + n) of the call's key rows [kb, n, width] of src [R / group, S, width]
template <typename In>
void gather_keys(const Call& c, const Spec& s, const In* src, int64_t j0, int64_t n, int64_t width,
                 In* dst) {
  for (int64_t b = 0; b < c.kb; ++b)
    std::memcpy(dst + b * n * width, src + ((c.kr0 + b) * s.S + j0) * width,
                sizeof(In) * n * width);
}

// The call's dropout masks: keep [x * nk + j] for the keys j < nk its rows see
template <typename A>
void call_masks(const Call& c, const Spec& s, int64_t nk, A* keep) {
  if (s.p > 0)
    for (int64_t x = 0; x < c.rows(); ++x) row_mask(s, c.r_of(x), c.i_of(x), keep + x * nk);
}

// How many of the n keys from j0 query i sees
int64_t seen_in_block(const Spec& s, int64_t i, int64_t j0, int64_t n) {
  return std::clamp<int64_t>(visible(s, i) - j0, 0, n);
}

template <typename A>
A row_max(const A* sx, int64_t seen) {
  A mx = -std::numeric_limits<A>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < seen; ++j) mx = std::max(mx, sx[j]);
  return mx;
}

// ---- forward

// Query row x of the call against keys [j0, j0 + n) (raw scores sx): the online softmax's
// step. ex = bf16(e keep) (0 past the keys it sees); the row's running maximum and total,
// and its output sums (orow, Dv) rescaled to the new maximum.
template <typename In, typename A = Acc<In>>
void forward_row(const Spec& s, int64_t i, int64_t j0, int64_t n, const A* sx, const A* keep,
                 In* ex, A& max, A& total, A* orow) {
  const int64_t seen = seen_in_block(s, i, j0, n);
  const A scale = static_cast<A>(s.scale);
  A factor = 1;
  if (seen > 0) {
    const A top = std::max(row_max(sx, seen) * scale, max);  // rounding is monotonic
    factor = j0 == 0 ? A(0) : exp_fast(max - top);
    max = top;
    A sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < seen; ++j) {
      const A e = exp_fast(sx[j] * scale - top);
      sum += e;
      store(ex, j, keep != nullptr ? e * keep[j] : e);
    }
    total = total * factor + sum;
  }
  for (int64_t j = seen; j < n; ++j) store(ex, j, A(0));
  if (j0 > 0 && factor != A(1))
    for (int64_t c = 0; c < s.Dv; ++c) orow[c] *= factor;
}

// o and lse of the call's rows
template <typename In, typename Out>
void forward_call(const Spec& s, const Blocking& bl, const Call& c, const In* q, const In* k,
                  const In* v, Out* o, Out* lse, Scratch<In>& w) {
  const int64_t rows = c.rows(), M = c.group * c.m, nk = visible(s, c.i0 + c.m - 1);
  gather_queries(c, s, q, s.D, w.q.data());
  call_masks(c, s, nk, w.keep.data());
  std::fill_n(w.max.data(), rows, -std::numeric_limits<Out>::infinity());
  std::fill_n(w.total.data(), rows, Out(0));
  for (int64_t j0 = 0; j0 < nk; j0 += bl.keys) {
    const int64_t n = std::min(bl.keys, s.S - j0);
    gather_keys(c, s, k, j0, n, s.D, w.k.data());
    gather_keys(c, s, v, j0, n, s.Dv, w.v.data());
    product({c.kb, M, n, s.D, false, true}, w.q.data(), w.k.data(), w.scores.data(), false);
    for (int64_t x = 0; x < rows; ++x)
      forward_row(s, c.i_of(x), j0, n, w.scores.data() + x * n,
                  s.p > 0 ? w.keep.data() + x * nk + j0 : nullptr, w.left.data() + x * n, w.max[x],
                  w.total[x], w.sums.data() + x * s.Dv);
    product({c.kb, M, s.Dv, n, false, false}, w.left.data(), w.v.data(), w.sums.data(), j0 > 0);
  }
  for (int64_t x = 0; x < rows; ++x) {
    const int64_t at = c.r_of(x) * s.T + c.i_of(x);
    const Out inv = Out(1) / w.total[x];
    for (int64_t d = 0; d < s.Dv; ++d) o[at * s.Dv + d] = w.sums[x * s.Dv + d] * inv;
    lse[at] = w.max[x] + std::log(w.total[x]);
  }
}

// ---- backward

// Query row x of the call against keys [j0, j0 + n): ax = bf16(p keep) and dsx = bf16(p (dp
// keep - delta) scale), 0 past the keys it sees
template <typename In, typename A = Acc<In>>
void backward_row(const Spec& s, int64_t i, int64_t j0, int64_t n, const A* sx, const A* dpx,
                  const A* keep, A lse, A delta, In* ax, In* dsx) {
  const int64_t seen = seen_in_block(s, i, j0, n);
  const A scale = static_cast<A>(s.scale);
  AG_SIMD
  for (int64_t j = 0; j < seen; ++j) {
    const A p = exp_fast(sx[j] * scale - lse), kj = keep != nullptr ? keep[j] : A(1);
    store(ax, j, p * kj);
    store(dsx, j, p * (dpx[j] * kj - delta) * scale);
  }
  for (int64_t j = seen; j < n; ++j) store(ax, j, A(0)), store(dsx, j, A(0));
}

// What backward reads (the forward's operands, its output and lse, the output's gradient)
// and writes (dq, dk, dv)
template <typename In, typename Out>
struct Backward {
  const In *q, *k, *v, *o, *dout;
  const Out* lse;
  Out *dq, *dk, *dv;
};

// Per row of the call: delta = do . o and its lse
template <typename In, typename Out>
void row_statistics(const Spec& s, const Call& c, const Backward<In, Out>& b, Scratch<In>& w) {
  for (int64_t x = 0; x < c.rows(); ++x) {
    const int64_t at = c.r_of(x) * s.T + c.i_of(x);
    const In* dox = w.dout.data() + x * s.Dv;
    const In* ox = b.o + at * s.Dv;
    Out delta = 0;
#pragma omp simd reduction(+ : delta)
    for (int64_t d = 0; d < s.Dv; ++d) delta += Out(dox[d]) * Out(ox[d]);
    w.delta[x] = delta, w.lse[x] = b.lse[at];
  }
}

// dq of the call's rows, and their share of dk and dv added into the group's sums (w.dk,
// w.dv: key block by key block, each [kb, n, D])
template <typename In, typename Out>
void backward_call(const Spec& s, const Blocking& bl, const Call& c, const Backward<In, Out>& b,
                   Scratch<In>& w) {
  const int64_t rows = c.rows(), M = c.group * c.m, nk = visible(s, c.i0 + c.m - 1);
  gather_queries(c, s, b.q, s.D, w.q.data());
  gather_queries(c, s, b.dout, s.Dv, w.dout.data());
  call_masks(c, s, nk, w.keep.data());
  row_statistics(s, c, b, w);
  for (int64_t j0 = 0; j0 < nk; j0 += bl.keys) {
    const int64_t n = std::min(bl.keys, s.S - j0), block = j0 * c.kb;
    gather_keys(c, s, b.k, j0, n, s.D, w.k.data());
    gather_keys(c, s, b.v, j0, n, s.Dv, w.v.data());
    product({c.kb, M, n, s.D, false, true}, w.q.data(), w.k.data(), w.scores.data(), false);
    product({c.kb, M, n, s.Dv, false, true}, w.dout.data(), w.v.data(), w.dp.data(), false);
    for (int64_t x = 0; x < rows; ++x)
      backward_row(s, c.i_of(x), j0, n, w.scores.data() + x * n, w.dp.data() + x * n,
                   s.p > 0 ? w.keep.data() + x * nk + j0 : nullptr, w.lse[x], w.delta[x],
                   w.left.data() + x * n, w.right.data() + x * n);
    product({c.kb, n, s.Dv, M, true, false}, w.left.data(), w.dout.data(),
            w.dv.data() + block * s.Dv, true);
    product({c.kb, n, s.D, M, true, false}, w.right.data(), w.q.data(), w.dk.data() + block * s.D,
            true);
    product({c.kb, M, s.D, n, false, false}, w.right.data(), w.k.data(), w.sums.data(), j0 > 0);
  }
  for (int64_t x = 0; x < rows; ++x)
    std::copy_n(w.sums.data() + x * s.D, s.D, b.dq + (c.r_of(x) * s.T + c.i_of(x)) * s.D);
}

// The group's dk or dv sums (key block by key block, each [kb, n, width]) into out
// [R / group, S, width]
template <typename Out>
void scatter_key_sums(const Spec& s, const Blocking& bl, const Call& c, const Out* sums,
                      int64_t width, Out* out) {
  for (int64_t j0 = 0; j0 < s.S; j0 += bl.keys) {
    const int64_t n = std::min(bl.keys, s.S - j0);
    for (int64_t b = 0; b < c.kb; ++b)
      std::copy_n(sums + (j0 * c.kb + b * n) * width, n * width,
                  out + ((c.kr0 + b) * s.S + j0) * width);
  }
}

// ---- the work shared among threads

// fn(first key row, key rows, scratch) for each group of key and value rows, [0, count) of
// them, groups shared among the team; the first exception is rethrown after the team is done
// (none may leave a parallel region)
template <typename In, typename F>
void for_each_group(const Spec& s, const Blocking& bl, int64_t units, double work, F&& fn) {
  std::exception_ptr failure;
#pragma omp parallel if (team_pays(work / kMacsPerElement))
  {
    Scratch<In>& w = Scratch<In>::of_this_thread(s, bl);
#pragma omp for schedule(dynamic)
    for (int64_t u = 0; u < units; ++u) {
      try {
        fn(u, w);
      } catch (...) {
#pragma omp critical(attention_blocked_failure)
        if (!failure) failure = std::current_exception();
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

Blocking blocking_of(const Spec& s) {
  const int64_t test_queries = g_test_queries, test_keys = g_test_keys;
  const int64_t queries = std::clamp<int64_t>(test_queries > 0 ? test_queries : kQueryBlock, 1,
                                              std::max<int64_t>(s.T, 1));
  const int64_t keys =
      std::clamp<int64_t>(test_keys > 0 ? test_keys : kKeyBlock, 1, std::max<int64_t>(s.S, 1));
  const int64_t kv_total = std::max<int64_t>(s.R / s.group, 1);
  const int64_t per_row = std::max<int64_t>(s.S, 1) * std::max(s.group * queries, s.D + s.Dv);
  const int64_t kv_rows = s.call_rows > 0
                              ? s.call_rows
                              : std::min({kCallScores / (s.group * queries * keys),
                                          kRowFloats / per_row, ceil_div(kv_total, kMinGroups)});
  return {std::clamp<int64_t>(kv_rows, 1, kv_total), queries, keys};
}

void set_blocks_for_tests(int64_t queries, int64_t keys, bool twin) {
  g_test_queries = queries, g_test_keys = keys, g_test_twin = twin;
}

bool blocked_twin_for_tests() {
  return g_test_twin;
}

bool onednn_available(const Spec& s) {
  // a product in each layout the kernel uses (q kᵀ, p v, aᵀ do), once: oneDNN has kernels
  // for every shape of a layout or for none, as its ISA decides
  static const bool available = [] {
    constexpr int64_t n = 64;
    const std::vector<bfloat16> a(2 * n * n), b(2 * n * n);
    std::vector<float> c(2 * n * n);
    return onednn_batched_product({2, n, n, n, false, true}, a.data(), b.data(), c.data(), false) &&
           onednn_batched_product({2, n, n, n, false, false}, a.data(), b.data(), c.data(), true) &&
           onednn_batched_product({2, n, n, n, true, false}, a.data(), b.data(), c.data(), true);
  }();
  return available && s.D > 0 && s.Dv > 0 && s.S > 0 && s.T > 0;
}

template <typename In, typename Out>
void blocked_forward(const Spec& s, const In* q, const In* k, const In* v, Out* o, Out* lse) {
  const Blocking bl = blocking_of(s);
  const int64_t groups = ceil_div(s.R / s.group, bl.kv_rows), blocks = ceil_div(s.T, bl.queries);
  for_each_group<In>(s, bl, groups * blocks, attention_macs(s), [&](int64_t u, Scratch<In>& w) {
    const int64_t kr0 = u / blocks * bl.kv_rows, i0 = u % blocks * bl.queries;
    const Call c{kr0, std::min(bl.kv_rows, s.R / s.group - kr0), i0, std::min(bl.queries, s.T - i0),
                 s.group};
    forward_call(s, bl, c, q, k, v, o, lse, w);
  });
}

template <typename In, typename Out>
void blocked_backward(const Spec& s, const In* q, const In* k, const In* v, const In* o,
                      const Out* lse, const In* dout, Out* dq, Out* dk, Out* dv) {
  const Blocking bl = blocking_of(s);
  const Backward<In, Out> b{q, k, v, o, dout, lse, dq, dk, dv};
  const int64_t groups = ceil_div(s.R / s.group, bl.kv_rows);
  for_each_group<In>(s, bl, groups, 2 * attention_macs(s), [&](int64_t g, Scratch<In>& w) {
    const int64_t kr0 = g * bl.kv_rows, kb = std::min(bl.kv_rows, s.R / s.group - kr0);
    const int64_t all_keys = ceil_div(s.S, bl.keys) * bl.keys * kb;
    std::fill_n(w.dk.data(), all_keys * s.D, Out(0));
    std::fill_n(w.dv.data(), all_keys * s.Dv, Out(0));
    for (int64_t i0 = 0; i0 < s.T; i0 += bl.queries)
      backward_call(s, bl, {kr0, kb, i0, std::min(bl.queries, s.T - i0), s.group}, b, w);
    const Call c{kr0, kb, 0, 1, s.group};
    scatter_key_sums(s, bl, c, w.dk.data(), s.D, dk);
    scatter_key_sums(s, bl, c, w.dv.data(), s.Dv, dv);
  });
}

template void blocked_forward(const Spec&, const bfloat16*, const bfloat16*, const bfloat16*,
                              float*, float*);
template void blocked_forward(const Spec&, const double*, const double*, const double*, double*,
                              double*);
template void blocked_backward(const Spec&, const bfloat16*, const bfloat16*, const bfloat16*,
                               const bfloat16*, const float*, const bfloat16*, float*, float*,
                               float*);
template void blocked_backward(const Spec&, const double*, const double*, const double*,
                               const double*, const double*, const double*, double*, double*,
                               double*);

}  // namespace ag::detail::attention

namespace ag {

void force_attention_blocks_for_tests(int64_t queries, int64_t keys, bool float64_twin) {
  detail::attention::set_blocks_for_tests(queries, keys, float64_twin);
}

bool attention_onednn_available() {
  detail::attention::Spec s{};
  s.R = s.T = s.S = s.D = s.Dv = 1;
  return detail::attention::onednn_available(s);
}

}  // namespace ag
