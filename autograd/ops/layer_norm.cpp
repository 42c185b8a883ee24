// LayerNorm and RMSNorm over the last dim, fused: one pass for the row statistics, one for
// the output. B*T rows of C channels; the per-row statistics (LayerNorm's mean and rstd,
// RMSNorm's rstd) are saved for backward. The float32 forwards run the row kernels that
// ops.h exposes (ag::kernels), so the decoder's inference step gets the training bits.
#include <fmt/format.h>

#include <cmath>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/profile.h"

namespace ag {

namespace {

constexpr int64_t kRowGrain = 32;  // rows per parallel chunk

// Rows [0, rows) of x [rows, C]: y = xhat w + b, saving mean and rstd per row where asked.
// Statistics accumulate in double: float sums over thousands of channels lose digits.
template <typename T>
void layer_norm_forward(const T* x, int64_t rows, int64_t C, const T* w, const T* b, double eps,
                        T* y, T* mean, T* rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * C;
    double m = 0;
#pragma omp simd reduction(+ : m)
    for (int64_t i = 0; i < C; ++i) m += row[i];
    m /= C;
    double v = 0;
#pragma omp simd reduction(+ : v)
    for (int64_t i = 0; i < C; ++i) v += (row[i] - m) * (row[i] - m);
    v /= C;
    const T mt = static_cast<T>(m), rs = static_cast<T>(1.0 / std::sqrt(v + eps));
    if (mean) mean[r] = mt;
    if (rstd) rstd[r] = rs;
    T* yr = y + r * C;
    AG_SIMD
    for (int64_t i = 0; i < C; ++i) yr[i] = (row[i] - mt) * rs * w[i] + b[i];
  }
}

// Rows [0, rows) of x [rows, C]: y = x rstd w, rstd = 1 / sqrt(mean(x^2) + eps), saving
// rstd per row where asked. The mean of squares accumulates in double, as above.
template <typename T>
void rms_norm_forward(const T* x, int64_t rows, int64_t C, const T* w, double eps, T* y, T* rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * C;
    double sq = 0;
#pragma omp simd reduction(+ : sq)
    for (int64_t i = 0; i < C; ++i) sq += static_cast<double>(row[i]) * row[i];
    const T rs = static_cast<T>(1.0 / std::sqrt(sq / C + eps));
    if (rstd) rstd[r] = rs;
    T* yr = y + r * C;
    AG_SIMD
    for (int64_t i = 0; i < C; ++i) yr[i] = row[i] * rs * w[i];
  }
}

// dxhat = g w;  dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat));
// dw += g xhat and db += g into this chunk's partial sums pw, pb (double).
template <typename T>
void layer_norm_backward(T* dx, double* pw, double* pb, const T* g, const T* x, const T* w,
                         const T* mean, const T* rstd, int64_t r0, int64_t r1, int64_t C) {
  for (int64_t r = r0; r < r1; ++r) {
    const T m = mean[r], rs = rstd[r];
    const T* xr = x + r * C;
    const T* gr = g + r * C;
    double sum_dxhat = 0, sum_dxhat_xhat = 0;
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
    for (int64_t i = 0; i < C; ++i) {
      const T xhat = (xr[i] - m) * rs, dxhat = gr[i] * w[i];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
      pw[i] += gr[i] * xhat;
      pb[i] += gr[i];
    }
    const T mean_dxhat = static_cast<T>(sum_dxhat / C);
    const T mean_dxhat_xhat = static_cast<T>(sum_dxhat_xhat / C);
    T* dxr = dx + r * C;
    AG_SIMD
    for (int64_t i = 0; i < C; ++i) {
      const T xhat = (xr[i] - m) * rs;
      dxr[i] = rs * (gr[i] * w[i] - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
}

// xhat = x rstd, dxhat = g w;  dx = rstd (dxhat - xhat mean(dxhat xhat)) (the mean of x
// is not subtracted, so neither is the mean of dxhat); dw += g xhat into pw (double).
template <typename T>
void rms_norm_backward(T* dx, double* pw, const T* g, const T* x, const T* w, const T* rstd,
                       int64_t r0, int64_t r1, int64_t C) {
  for (int64_t r = r0; r < r1; ++r) {
    const T rs = rstd[r];
    const T* xr = x + r * C;
    const T* gr = g + r * C;
    double sum_dxhat_xhat = 0;
#pragma omp simd reduction(+ : sum_dxhat_xhat)
    for (int64_t i = 0; i < C; ++i) {
      const T xhat = xr[i] * rs;
      sum_dxhat_xhat += gr[i] * w[i] * xhat;
      pw[i] += gr[i] * xhat;
    }
    const T mean_dxhat_xhat = static_cast<T>(sum_dxhat_xhat / C);
    T* dxr = dx + r * C;
    AG_SIMD
    for (int64_t i = 0; i < C; ++i) dxr[i] = rs * (gr[i] * w[i] - xr[i] * rs * mean_dxhat_xhat);
  }
}

// The affine parameter p (weight or bias) is absent or [C] of x's dtype.
void check_affine(const char* op, const char* name, const Tensor& p, const Tensor& x) {
  const int64_t C = x.shape().back();
  if (p.defined() && (p.shape() != Shape{C} || p.dtype() != x.dtype()))
    throw std::invalid_argument(
        fmt::format("{}: {} of shape {} ({}) does not match the normalised dim [{}] ({})", op, name,
                    shape_str(p.shape()), dtype_name(p.dtype()), C, dtype_name(x.dtype())));
}

// p contiguous, or `fill` [C] where p is absent (absent weights act as 1 and biases as 0,
// so the kernels have one form).
Tensor affine_or(const Tensor& p, int64_t C, DType dtype, double fill) {
  return p.defined() ? p.detach().contiguous() : full({C}, fill, dtype);
}

// Runs kernel(r0, r1, partials) over the rows in chunks of kRowGrain, giving each chunk its
// own zeroed partial sums [sums][C] in double, and returns the sums' totals [C]: the
// per-channel gradients (dw, db) are sums over rows, and adding the chunks' partials in
// chunk order makes them independent of the thread count.
template <typename T, typename F>
std::vector<Tensor> channel_sums_by_chunk(int64_t rows, int64_t C, int sums, const F& kernel) {
  const int64_t chunks = std::max<int64_t>((rows + kRowGrain - 1) / kRowGrain, 1);
  std::vector<double> part(chunks * sums * C, 0.0);
  detail::parallel_for_items(rows, kRowGrain, static_cast<double>(C), [&](int64_t r0, int64_t r1) {
    kernel(r0, r1, part.data() + r0 / kRowGrain * sums * C);
  });
  std::vector<Tensor> totals;
  std::vector<T*> out;
  for (int k = 0; k < sums; ++k) {
    totals.push_back(empty({C}, dtype_of<T>()));
    out.push_back(totals.back().template data<T>());
  }
  detail::add_chunk_partials(part.data(), chunks, sums * C,
                             [&](int64_t e, double s) { out[e / C][e % C] = static_cast<T>(s); });
  return totals;
}

}  // namespace

namespace kernels {

void layer_norm_rows(const float* x, int64_t rows, int64_t C, const float* w, const float* b,
                     double eps, float* y, float* mean, float* rstd) {
  layer_norm_forward(x, rows, C, w, b, eps, y, mean, rstd);
}

void rms_norm_rows(const float* x, int64_t rows, int64_t C, const float* w, double eps, float* y,
                   float* rstd) {
  rms_norm_forward(x, rows, C, w, eps, y, rstd);
}

}  // namespace kernels

namespace {

// The ops' rows: float32 through the kernels above (the decoder's very code), float64
// through the same templates.
using kernels::layer_norm_rows;
using kernels::rms_norm_rows;

void layer_norm_rows(const double* x, int64_t rows, int64_t C, const double* w, const double* b,
                     double eps, double* y, double* mean, double* rstd) {
  layer_norm_forward(x, rows, C, w, b, eps, y, mean, rstd);
}

void rms_norm_rows(const double* x, int64_t rows, int64_t C, const double* w, double eps, double* y,
                   double* rstd) {
  rms_norm_forward(x, rows, C, w, eps, y, rstd);
}

}  // namespace

// y = xhat * w + b,  xhat = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps)
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const profile::Timer timer("layer_norm");
  if (x.dim() < 1) throw std::invalid_argument("layer_norm: input must have at least one dim");
  check_affine("layer_norm", "weight", weight, x);
  check_affine("layer_norm", "bias", bias, x);
  const int64_t C = x.shape().back();
  Tensor xc = x.detach().contiguous();
  const int64_t rows = C ? x.numel() / C : 0;
  Tensor out = empty(x.shape(), x.dtype());
  void* const y = out.raw_data();  // taken before the copy is attached, which it would retire
  const Tensor out16 = detail::attach_bf16_copy(out);  // for the linear reading out, if bf16
  Tensor mean = empty({rows}, x.dtype());
  Tensor rstd = empty({rows}, x.dtype());
  Tensor wc = affine_or(weight, C, x.dtype(), 1.0), bc = affine_or(bias, C, x.dtype(), 0.0);
  AG_DISPATCH_FLOAT(x.dtype(), "layer_norm", [&] {
    detail::parallel_for_items(
        rows, kRowGrain, static_cast<double>(C), [&](int64_t r0, int64_t r1) {
          const auto* xr = xc.const_data<scalar_t>() + r0 * C;
          auto* yr = static_cast<scalar_t*>(y) + r0 * C;
          auto *mr = mean.data<scalar_t>() + r0, *sr = rstd.data<scalar_t>() + r0;
          layer_norm_rows(xr, r1 - r0, C, wc.data<scalar_t>(), bc.data<scalar_t>(), eps, yr, mr,
                          sr);
          detail::fill_bf16_copy(out16, yr, r0 * C, (r1 - r0) * C);
        });
  });
  if (needs_recording({x, weight, bias}))
    attach_backward(
        out, "LayerNormBackward", {x, weight, bias},
        [xc, wc, mean, rstd, rows, C, has_weight = weight.defined(),
         has_bias = bias.defined()](const Tensor& g) -> std::vector<Tensor> {
          Tensor gc = g.contiguous();
          Tensor dx = empty(xc.shape(), xc.dtype());
          std::vector<Tensor> dwb = AG_DISPATCH_FLOAT(xc.dtype(), "layer_norm", [&] {
            return channel_sums_by_chunk<scalar_t>(
                rows, C, 2, [&](int64_t r0, int64_t r1, double* part) {
                  layer_norm_backward(dx.data<scalar_t>(), part, part + C, gc.data<scalar_t>(),
                                      xc.data<scalar_t>(), wc.data<scalar_t>(),
                                      mean.data<scalar_t>(), rstd.data<scalar_t>(), r0, r1, C);
                });
          });
          return {dx.view(g.shape()), has_weight ? dwb[0] : Tensor(), has_bias ? dwb[1] : Tensor()};
        });
  return out;
}

// y = x * rstd * w,  rstd = 1 / sqrt(mean(x^2) + eps)
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  const profile::Timer timer("rms_norm");
  if (x.dim() < 1) throw std::invalid_argument("rms_norm: input must have at least one dim");
  check_affine("rms_norm", "weight", weight, x);
  const int64_t C = x.shape().back();
  Tensor xc = x.detach().contiguous();
  const int64_t rows = C ? x.numel() / C : 0;
  Tensor out = empty(x.shape(), x.dtype());
  void* const y = out.raw_data();  // taken before the copy is attached, which it would retire
  const Tensor out16 = detail::attach_bf16_copy(out);  // for the linear reading out, if bf16
  Tensor rstd = empty({rows}, x.dtype());
  Tensor wc = affine_or(weight, C, x.dtype(), 1.0);
  AG_DISPATCH_FLOAT(x.dtype(), "rms_norm", [&] {
    detail::parallel_for_items(rows, kRowGrain, static_cast<double>(C),
                               [&](int64_t r0, int64_t r1) {
                                 const auto* xr = xc.const_data<scalar_t>() + r0 * C;
                                 auto* yr = static_cast<scalar_t*>(y) + r0 * C;
                                 auto* sr = rstd.data<scalar_t>() + r0;
                                 rms_norm_rows(xr, r1 - r0, C, wc.data<scalar_t>(), eps, yr, sr);
                                 detail::fill_bf16_copy(out16, yr, r0 * C, (r1 - r0) * C);
                               });
  });
  if (needs_recording({x, weight}))
    attach_backward(out, "RMSNormBackward", {x, weight},
                    [xc, wc, rstd, rows, C,
                     has_weight = weight.defined()](const Tensor& g) -> std::vector<Tensor> {
                      Tensor gc = g.contiguous();
                      Tensor dx = empty(xc.shape(), xc.dtype());
                      std::vector<Tensor> dw = AG_DISPATCH_FLOAT(xc.dtype(), "rms_norm", [&] {
                        return channel_sums_by_chunk<scalar_t>(
                            rows, C, 1, [&](int64_t r0, int64_t r1, double* part) {
                              rms_norm_backward(dx.data<scalar_t>(), part, gc.data<scalar_t>(),
                                                xc.data<scalar_t>(), wc.data<scalar_t>(),
                                                rstd.data<scalar_t>(), r0, r1, C);
                            });
                      });
                      return {dx.view(g.shape()), has_weight ? dw[0] : Tensor()};
                    });
  return out;
}

}  // namespace ag
