// Fused scaled dot-product attention. One kernel forward, one backward, each walking the
// query rows of every (batch, head) pair: scores for a row live in a buffer of one row,
// causally hidden keys are never visited, and only each row's log-sum-exp is saved, so
// backward recomputes the softmax instead of storing a [T, S] matrix per head.
// R = rows (product of leading dims), T = queries, S = keys, D = head dim, Dv = value dim.
#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"

namespace ag {

namespace {

uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Row (r, i) draws its dropout mask from its own stream, derived from the op's one draw,
// so rows can run in any order (or thread) and backward can replay any row alone.
Generator row_stream(uint64_t draw, int64_t r, int64_t i, int64_t T) {
  return Generator(draw ^ mix64(static_cast<uint64_t>(r * T + i) + 1));
}

struct Dims {
  int64_t R, T, S, D, Dv;
};

// visible keys of query row i
inline int64_t visible(const Dims& d, bool causal, int64_t i) {
  return causal ? std::min(i + 1, d.S) : d.S;
}

// scores[j] = scale q_i . k_j for visible j; returns the row max
template <typename T>
T row_scores(const T* qi, const T* k, int64_t n, int64_t D, T scale, T* scores) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    const T* kj = k + j * D;
    T s = 0;
    AG_SIMD
    for (int64_t c = 0; c < D; ++c) s += qi[c] * kj[c];
    scores[j] = s * scale;
    m = std::max(m, scores[j]);
  }
  return m;
}

// keep[j] = 0 or 1/(1-p) for the n visible keys of row (r, i)
template <typename T>
void row_mask(uint64_t draw, int64_t r, int64_t i, int64_t Tq, double p, int64_t n, T* keep) {
  Generator g = row_stream(draw, r, i, Tq);
  const T scale = p >= 1.0 ? T(0) : static_cast<T>(1.0 / (1.0 - p));
  for (int64_t j = 0; j < n; ++j) keep[j] = g.uniform() < p ? T(0) : scale;
}

// o_i = sum_j softmax(s)_j keep_j v_j;  lse_i = log sum_j exp(s_j)
template <typename T>
void sdpa_forward(const Dims& d, bool causal, double p, uint64_t draw, T scale, const T* q,
                  const T* k, const T* v, T* o, T* lse) {
#pragma omp parallel
  {
    std::vector<T> w(d.S), keep(d.S, T(1));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < d.R; ++r) {
      const T* kr = k + r * d.S * d.D;
      const T* vr = v + r * d.S * d.Dv;
      for (int64_t i = 0; i < d.T; ++i) {
        const int64_t n = visible(d, causal, i);
        const T* qi = q + (r * d.T + i) * d.D;
        T* oi = o + (r * d.T + i) * d.Dv;
        const T m = row_scores(qi, kr, n, d.D, scale, w.data());
        double total = 0;
        for (int64_t j = 0; j < n; ++j) total += (w[j] = std::exp(w[j] - m));
        lse[r * d.T + i] = m + static_cast<T>(std::log(total));
        const T inv = static_cast<T>(1.0 / total);
        if (p > 0) row_mask(draw, r, i, d.T, p, n, keep.data());
        for (int64_t c = 0; c < d.Dv; ++c) oi[c] = 0;
        for (int64_t j = 0; j < n; ++j) {
          const T wj = w[j] * inv * keep[j];
          const T* vj = vr + j * d.Dv;
          AG_SIMD
          for (int64_t c = 0; c < d.Dv; ++c) oi[c] += wj * vj[c];
        }
      }
    }
  }
}

// w = softmax row (recomputed from lse), a_j = w_j keep_j:
//   dv_j += a_j do_i;  dw_j = keep_j (do_i . v_j);  ds_j = w_j (dw_j - sum_k w_k dw_k)
//   dq_i = scale sum_j ds_j k_j;  dk_j += scale ds_j q_i
template <typename T>
void sdpa_backward(const Dims& d, bool causal, double p, uint64_t draw, T scale, const T* q,
                   const T* k, const T* v, const T* lse, const T* dout, T* dq, T* dk, T* dv) {
#pragma omp parallel
  {
    std::vector<T> w(d.S), keep(d.S, T(1)), ds(d.S);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < d.R; ++r) {
      const T* kr = k + r * d.S * d.D;
      const T* vr = v + r * d.S * d.Dv;
      T* dkr = dk + r * d.S * d.D;
      T* dvr = dv + r * d.S * d.Dv;
      for (int64_t x = 0; x < d.S * d.D; ++x) dkr[x] = 0;
      for (int64_t x = 0; x < d.S * d.Dv; ++x) dvr[x] = 0;
      for (int64_t i = 0; i < d.T; ++i) {
        const int64_t n = visible(d, causal, i);
        const T* qi = q + (r * d.T + i) * d.D;
        const T* doi = dout + (r * d.T + i) * d.Dv;
        T* dqi = dq + (r * d.T + i) * d.D;
        row_scores(qi, kr, n, d.D, scale, w.data());
        const T l = lse[r * d.T + i];
        if (p > 0) row_mask(draw, r, i, d.T, p, n, keep.data());
        double weighted = 0;  // sum_k w_k dw_k
        for (int64_t j = 0; j < n; ++j) {
          w[j] = std::exp(w[j] - l);
          const T* vj = vr + j * d.Dv;
          T dw = 0;
          AG_SIMD
          for (int64_t c = 0; c < d.Dv; ++c) dw += doi[c] * vj[c];
          ds[j] = dw * keep[j];
          weighted += w[j] * ds[j];
          const T a = w[j] * keep[j];
          T* dvj = dvr + j * d.Dv;
          AG_SIMD
          for (int64_t c = 0; c < d.Dv; ++c) dvj[c] += a * doi[c];
        }
        for (int64_t c = 0; c < d.D; ++c) dqi[c] = 0;
        for (int64_t j = 0; j < n; ++j) {
          const T g = w[j] * (ds[j] - static_cast<T>(weighted)) * scale;
          const T* kj = kr + j * d.D;
          T* dkj = dkr + j * d.D;
          AG_SIMD
          for (int64_t c = 0; c < d.D; ++c) {
            dqi[c] += g * kj[c];
            dkj[c] += g * qi[c];
          }
        }
      }
    }
  }
}

Dims check_attention_inputs(const Tensor& q, const Tensor& k, const Tensor& v) {
  auto fail = [&](const std::string& why) {
    return std::invalid_argument(fmt::format("scaled_dot_product_attention: {} (q {}, k {}, v {})",
                                             why, shape_str(q.shape()), shape_str(k.shape()),
                                             shape_str(v.shape())));
  };
  if (q.dim() < 2 || k.dim() != q.dim() || v.dim() != q.dim())
    throw fail("q, k and v need the same rank, at least 2");
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype()) throw fail("dtypes differ");
  const int64_t r = q.dim();
  for (int64_t x = 0; x < r - 2; ++x)
    if (k.shape()[x] != q.shape()[x] || v.shape()[x] != q.shape()[x])
      throw fail("leading dims differ");
  Dims d;
  d.T = q.shape()[r - 2];
  d.D = q.shape()[r - 1];
  d.S = k.shape()[r - 2];
  d.Dv = v.shape()[r - 1];
  d.R = shape_numel(Shape(q.shape().begin(), q.shape().end() - 2));
  if (k.shape()[r - 1] != d.D) throw fail("q and k differ in their last dim");
  if (v.shape()[r - 2] != d.S) throw fail("k and v differ in their number of keys");
  if (d.S == 0 && d.T > 0) throw fail("there are no keys to attend to");
  return d;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    double dropout_p, Generator* gen, double scale) {
  const Dims d = check_attention_inputs(q, k, v);
  if (!(dropout_p >= 0.0 && dropout_p <= 1.0))
    throw std::invalid_argument(fmt::format(
        "scaled_dot_product_attention: dropout_p must be in [0, 1], got {}", dropout_p));
  if (dropout_p > 0 && gen == nullptr)
    throw std::invalid_argument(
        "scaled_dot_product_attention: dropout_p > 0 needs a generator for the mask");
  const uint64_t draw = dropout_p > 0 ? gen->next_u64() : 0;
  const double s =
      scale != 0 ? scale : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(d.D, 1)));
  Tensor qc = q.detach().contiguous(), kc = k.detach().contiguous(), vc = v.detach().contiguous();
  Shape out_shape = q.shape();
  out_shape.back() = d.Dv;
  Tensor out = empty(out_shape, q.dtype());
  Tensor lse = empty({d.R, d.T}, q.dtype());
  AG_DISPATCH_FLOAT(q.dtype(), "scaled_dot_product_attention", [&] {
    sdpa_forward<scalar_t>(d, causal, dropout_p, draw, static_cast<scalar_t>(s),
                           qc.data<scalar_t>(), kc.data<scalar_t>(), vc.data<scalar_t>(),
                           out.data<scalar_t>(), lse.data<scalar_t>());
  });
  if (needs_recording({q, k, v}))
    attach_backward(
        out, "ScaledDotProductAttentionBackward", {q, k, v},
        [qc, kc, vc, lse, d, causal, dropout_p, draw, s](const Tensor& g) -> std::vector<Tensor> {
          Tensor gc = g.contiguous();
          Tensor dq = empty(qc.shape(), qc.dtype()), dk = empty(kc.shape(), kc.dtype()),
                 dv = empty(vc.shape(), vc.dtype());
          AG_DISPATCH_FLOAT(qc.dtype(), "scaled_dot_product_attention backward", [&] {
            sdpa_backward<scalar_t>(d, causal, dropout_p, draw, static_cast<scalar_t>(s),
                                    qc.data<scalar_t>(), kc.data<scalar_t>(), vc.data<scalar_t>(),
                                    lse.data<scalar_t>(), gc.data<scalar_t>(), dq.data<scalar_t>(),
                                    dk.data<scalar_t>(), dv.data<scalar_t>());
          });
          return {dq, dk, dv};
        });
  return out;
}

Tensor attention_dropout_mask(int64_t rows, int64_t T, int64_t S, bool causal, double p,
                              uint64_t draw, DType dtype) {
  Tensor mask = zeros({rows, T, S}, dtype);
  const Dims d{rows, T, S, 0, 0};
  AG_DISPATCH_FLOAT(dtype, "attention_dropout_mask", [&] {
    scalar_t* m = mask.data<scalar_t>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < T; ++i)
        row_mask(draw, r, i, T, p, visible(d, causal, i), m + (r * T + i) * S);
  });
  return mask;
}

}  // namespace ag
