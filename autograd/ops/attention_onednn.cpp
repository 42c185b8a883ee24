#include "autograd/ops/attention_onednn.h"

#include <bit>
#include <cmath>
#include <exception>
#include <limits>
#include <stdexcept>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/ops/gemm.h"
#include "autograd/parallel.h"
#include "autograd/test_hooks.h"
#include "autograd/vec_math.h"

namespace ag::detail::attention {

namespace {

// Queries per block: as many as keep a block's scores within kBlockScores (fixed by the
// problem, never by the thread count)
int64_t block_queries(const Spec& s) {
  return std::clamp<int64_t>(kBlockScores / std::max<int64_t>(s.S, 1), 1,
                             std::max<int64_t>(s.T, 1));
}
// C [m, n] (leading dimension ldc) = A [m, k] B [k, n] (+ C with beta 1) on this thread, A
// and B row-major with leading dimensions lda and ldb, or read as the transpose of one
void product(bool ta, int64_t lda, bool tb, int64_t ldb, int64_t m, int64_t n, int64_t k,
             const bfloat16* a, const bfloat16* b, float* c, int64_t ldc, float beta = 0) {
  if (!onednn_matmul_here({ta, lda}, {tb, ldb}, m, n, k, a, b, c, ldc, beta))
    throw std::logic_error("attention: oneDNN lost the bfloat16 kernel it was chosen for");
}

// One thread's scratch: a block's scores (and backward's dp) in float32, the bfloat16
// values its products read, a query row's dropout mask, and per query 1/l or delta. Kept
// by the thread from call to call and only grown: made afresh at every call, its pages
// (MiBs) were faulted in and zeroed at every layer.
struct Scratch {
  std::vector<float> scores, dp;
  std::vector<bfloat16> left, right;
  std::vector<float> keep, per_query;

  static Scratch& of_this_thread(const Spec& s) {
    thread_local Scratch w;
    const size_t n = static_cast<size_t>(block_queries(s) * s.S);
    grow(w.scores, n), grow(w.dp, n), grow(w.left, n), grow(w.right, n);
    grow(w.keep, static_cast<size_t>(s.S)),
        grow(w.per_query, static_cast<size_t>(block_queries(s)));
    return w;
  }
  template <typename T>
  static void grow(std::vector<T>& v, size_t n) {
    if (v.size() < n) v.resize(n);
  }
};

double row_macs(const Spec& s) {
  return static_cast<double>(s.T) * s.S * (s.D + s.Dv) * (s.causal ? 0.5 : 1.0);
}

// The largest of sx [seen]
float row_max(const float* sx, int64_t seen) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < seen; ++j) mx = std::max(mx, sx[j]);
  return mx;
}

// The bits of f rounded to bfloat16. The loops below store these into .bits: storing a
// bfloat16 value made by its constructor copies a temporary, which GCC does not vectorise.
inline uint16_t bf16_bits(float f) {
  return bf16_bits_from_f32_bits(std::bit_cast<uint32_t>(f));
}

// Query i's forward row from its raw scores sx: ex [nk] = bfloat16(exp(scale sx - m) keep)
// (0 past the keys it sees), lse and 1 / l, in one pass after the maximum
void forward_row(const Spec& s, int64_t r, int64_t i, int64_t nk, const float* sx, bfloat16* ex,
                 float* lse, float* inv_total, Scratch& w) {
  const int64_t seen = visible(s, i);
  const float scale = static_cast<float>(s.scale);
  const float mx = row_max(sx, seen) * scale;  // the largest scaled score: rounding is monotonic
  const bool dropout = s.p > 0;
  if (dropout) row_mask(s, r, i, w.keep.data());
  const float* keep = w.keep.data();
  float total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t j = 0; j < seen; ++j) {
    const float e = exp_fast(sx[j] * scale - mx);
    total += e;
    ex[j].bits = bf16_bits(dropout ? e * keep[j] : e);
  }
  std::fill(ex + seen, ex + nk, bfloat16(0.0f));
  lse[r * s.T + i] = mx + std::log(total);
  *inv_total = 1.0f / total;
}

// o and lse of the m queries of row r from i0
void forward_block(const Spec& s, int64_t r, int64_t i0, int64_t m, const bfloat16* q,
                   const bfloat16* k, const bfloat16* v, float* o, float* lse, Scratch& w) {
  const int64_t nk = visible(s, i0 + m - 1);
  product(false, s.D, true, s.D, m, nk, s.D, q + (r * s.T + i0) * s.D, k + r * s.S * s.D,
          w.scores.data(), nk);
  for (int64_t x = 0; x < m; ++x)
    forward_row(s, r, i0 + x, nk, w.scores.data() + x * nk, w.left.data() + x * nk, lse,
                &w.per_query[x], w);
  float* ob = o + (r * s.T + i0) * s.Dv;
  product(false, nk, false, s.Dv, m, s.Dv, nk, w.left.data(), v + r * s.S * s.Dv, ob, s.Dv);
  for (int64_t x = 0; x < m; ++x)
    for (int64_t c = 0; c < s.Dv; ++c) ob[x * s.Dv + c] *= w.per_query[x];
}

// Query i's backward row: ax [nk] = bfloat16(p keep) and dsx [nk] = bfloat16(p (dp keep -
// delta) scale), 0 past the keys it sees, in one pass
void backward_row(const Spec& s, int64_t r, int64_t i, int64_t nk, const float* sx,
                  const float* dpx, float lse, float delta, bfloat16* ax, bfloat16* dsx,
                  Scratch& w) {
  const int64_t seen = visible(s, i);
  const float scale = static_cast<float>(s.scale);
  const bool dropout = s.p > 0;
  if (dropout) row_mask(s, r, i, w.keep.data());
  const float* keep = w.keep.data();
  AG_SIMD
  for (int64_t j = 0; j < seen; ++j) {
    const float p = exp_fast(sx[j] * scale - lse), kj = dropout ? keep[j] : 1.0f;
    ax[j].bits = bf16_bits(p * kj);
    dsx[j].bits = bf16_bits(p * (dpx[j] * kj - delta) * scale);
  }
  std::fill(ax + seen, ax + nk, bfloat16(0.0f));
  std::fill(dsx + seen, dsx + nk, bfloat16(0.0f));
}

// What backward reads (the forward's operands, its output and lse, the output's gradient)
// and writes (dq, dk, dv), for every row
struct BackwardRow {
  const bfloat16 *q, *k, *v, *o, *dout;
  const float* lse;
  float *dq, *dk, *dv;
};

// dq of the m queries of row r from i0, and their share of dk and dv added into the row's
void backward_block(const Spec& s, int64_t r, int64_t i0, int64_t m, const BackwardRow& b,
                    Scratch& w) {
  const int64_t nk = visible(s, i0 + m - 1);
  const bfloat16* qb = b.q + (r * s.T + i0) * s.D;
  const bfloat16* dob = b.dout + (r * s.T + i0) * s.Dv;
  const bfloat16* ob = b.o + (r * s.T + i0) * s.Dv;
  const bfloat16* kr = b.k + r * s.S * s.D;
  product(false, s.D, true, s.D, m, nk, s.D, qb, kr, w.scores.data(), nk);
  product(false, s.Dv, true, s.Dv, m, nk, s.Dv, dob, b.v + r * s.S * s.Dv, w.dp.data(), nk);
  for (int64_t x = 0; x < m; ++x) {
    float delta = 0;
#pragma omp simd reduction(+ : delta)
    for (int64_t c = 0; c < s.Dv; ++c) delta += float(dob[x * s.Dv + c]) * float(ob[x * s.Dv + c]);
    backward_row(s, r, i0 + x, nk, w.scores.data() + x * nk, w.dp.data() + x * nk,
                 b.lse[r * s.T + i0 + x], delta, w.left.data() + x * nk, w.right.data() + x * nk,
                 w);
  }
  product(true, nk, false, s.Dv, nk, s.Dv, m, w.left.data(), dob, b.dv + r * s.S * s.Dv, s.Dv, 1);
  product(true, nk, false, s.D, nk, s.D, m, w.right.data(), qb, b.dk + r * s.S * s.D, s.D, 1);
  product(false, nk, false, s.D, m, s.D, nk, w.right.data(), kr, b.dq + (r * s.T + i0) * s.D, s.D);
}

// fn(r, scratch) for every row, rows shared among the team; the first exception is
// rethrown after the team is done (none may leave a parallel region)
template <typename F>
void for_each_row(const Spec& s, double macs_per_row, F&& fn) {
  std::exception_ptr failure;
#pragma omp parallel if (team_pays(s.R * macs_per_row / kMacsPerElement))
  {
    Scratch& w = Scratch::of_this_thread(s);
#pragma omp for schedule(dynamic)
    for (int64_t r = 0; r < s.R; ++r) {
      try {
        fn(r, w);
      } catch (...) {
#pragma omp critical(attention_onednn_failure)
        if (!failure) failure = std::current_exception();
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

bool onednn_available(const Spec& s) {
  // a product in each layout the kernels use (q kᵀ, p v, aᵀ do), once: oneDNN has kernels
  // for every shape of a layout or for none, as its ISA decides
  static const bool available = [] {
    constexpr int64_t n = 64;
    const std::vector<bfloat16> a(n * n), b(n * n);
    std::vector<float> c(n * n);
    return onednn_matmul_here({false, n}, {true, n}, n, n, n, a.data(), b.data(), c.data(), n) &&
           onednn_matmul_here({false, n}, {false, n}, n, n, n, a.data(), b.data(), c.data(), n) &&
           onednn_matmul_here({true, n}, {false, n}, n, n, n, a.data(), b.data(), c.data(), n, 1);
  }();
  return available && s.D > 0 && s.Dv > 0 && s.S > 0 && s.T > 0;
}

void onednn_forward(const Spec& s, const bfloat16* q, const bfloat16* k, const bfloat16* v,
                    float* o, float* lse) {
  const int64_t block = block_queries(s);
  for_each_row(s, row_macs(s), [&](int64_t r, Scratch& w) {
    for (int64_t i0 = 0; i0 < s.T; i0 += block)
      forward_block(s, r, i0, std::min(block, s.T - i0), q, k, v, o, lse, w);
  });
}

void onednn_backward(const Spec& s, const bfloat16* q, const bfloat16* k, const bfloat16* v,
                     const bfloat16* o, const float* lse, const bfloat16* dout, float* dq,
                     float* dk, float* dv) {
  const int64_t block = block_queries(s);
  const BackwardRow b{q, k, v, o, dout, lse, dq, dk, dv};
  for_each_row(s, 2 * row_macs(s), [&](int64_t r, Scratch& w) {
    std::fill(dk + r * s.S * s.D, dk + (r + 1) * s.S * s.D, 0.0f);
    std::fill(dv + r * s.S * s.Dv, dv + (r + 1) * s.S * s.Dv, 0.0f);
    for (int64_t i0 = 0; i0 < s.T; i0 += block)
      backward_block(s, r, i0, std::min(block, s.T - i0), b, w);
  });
}

}  // namespace ag::detail::attention

namespace ag {

bool attention_onednn_available() {
  detail::attention::Spec s{};
  s.R = s.T = s.S = s.D = s.Dv = 1;
  return detail::attention::onednn_available(s);
}

}  // namespace ag
