// LayerNorm over the last dim, fused: one pass for the row statistics, one for the output.
// B*T rows of C channels; mean and rstd per row are saved for backward.
#include <fmt/format.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"

namespace ag {

namespace {

constexpr int64_t kRowGrain = 32;  // rows per parallel chunk

// Rows [r0, r1) of x [rows, C]: y = xhat w + b, saving mean and rstd per row.
// Statistics accumulate in double: float sums over thousands of channels lose digits.
template <typename T>
void layer_norm_forward(T* y, T* mean, T* rstd, const T* x, const T* w, const T* b, int64_t r0,
                        int64_t r1, int64_t C, double eps) {
  for (int64_t r = r0; r < r1; ++r) {
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
    mean[r] = mt;
    rstd[r] = rs;
    T* yr = y + r * C;
    AG_SIMD
    for (int64_t i = 0; i < C; ++i) yr[i] = (row[i] - mt) * rs * w[i] + b[i];
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

}  // namespace

// y = xhat * w + b,  xhat = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps)
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  if (x.dim() < 1) throw std::invalid_argument("layer_norm: input must have at least one dim");
  const int64_t C = x.shape().back();
  for (const Tensor* p : {&weight, &bias})
    if (p->defined() && (p->shape() != Shape{C} || p->dtype() != x.dtype()))
      throw std::invalid_argument(
          fmt::format("layer_norm: {} of shape {} ({}) does not match the normalised dim [{}] ({})",
                      p == &weight ? "weight" : "bias", shape_str(p->shape()),
                      dtype_name(p->dtype()), C, dtype_name(x.dtype())));
  Tensor xc = x.detach().contiguous();
  const int64_t rows = C ? x.numel() / C : 0;
  Tensor out = empty(x.shape(), x.dtype());
  Tensor mean = empty({rows}, x.dtype());
  Tensor rstd = empty({rows}, x.dtype());
  // absent affine parameters act as weight 1 and bias 0, so the kernels have one form
  Tensor wc = weight.defined() ? weight.detach().contiguous() : ones({C}, x.dtype());
  Tensor bc = bias.defined() ? bias.detach().contiguous() : zeros({C}, x.dtype());
  AG_DISPATCH_FLOAT(x.dtype(), "layer_norm", [&] {
    detail::parallel_for_items(rows, kRowGrain, C, [&](int64_t r0, int64_t r1) {
      layer_norm_forward(out.data<scalar_t>(), mean.data<scalar_t>(), rstd.data<scalar_t>(),
                         xc.data<scalar_t>(), wc.data<scalar_t>(), bc.data<scalar_t>(), r0, r1, C,
                         eps);
    });
  });
  if (needs_recording({x, weight, bias}))
    attach_backward(
        out, "LayerNormBackward", {x, weight, bias},
        [xc, wc, mean, rstd, rows, C, has_weight = weight.defined(),
         has_bias = bias.defined()](const Tensor& g) -> std::vector<Tensor> {
          Tensor gc = g.contiguous();
          Tensor dx = empty(xc.shape(), xc.dtype());
          Tensor dw = empty({C}, xc.dtype()), db = empty({C}, xc.dtype());
          // dw and db are sums over rows: partial sums per fixed chunk of rows, added in
          // chunk order, so the result does not depend on the thread count
          const int64_t chunks = std::max<int64_t>((rows + kRowGrain - 1) / kRowGrain, 1);
          std::vector<double> part_w(chunks * C, 0.0), part_b(chunks * C, 0.0);
          AG_DISPATCH_FLOAT(xc.dtype(), "layer_norm backward", [&] {
            detail::parallel_for_items(rows, kRowGrain, C, [&](int64_t r0, int64_t r1) {
              const int64_t chunk = r0 / kRowGrain;
              layer_norm_backward(dx.data<scalar_t>(), part_w.data() + chunk * C,
                                  part_b.data() + chunk * C, gc.data<scalar_t>(),
                                  xc.data<scalar_t>(), wc.data<scalar_t>(), mean.data<scalar_t>(),
                                  rstd.data<scalar_t>(), r0, r1, C);
            });
            scalar_t* dwp = dw.data<scalar_t>();
            scalar_t* dbp = db.data<scalar_t>();
            for (int64_t i = 0; i < C; ++i) {
              double tw = 0, tb = 0;
              for (int64_t c = 0; c < chunks; ++c) tw += part_w[c * C + i], tb += part_b[c * C + i];
              dwp[i] = static_cast<scalar_t>(tw);
              dbp[i] = static_cast<scalar_t>(tb);
            }
          });
          return {dx.view(g.shape()), has_weight ? dw : Tensor(), has_bias ? db : Tensor()};
        });
  return out;
}

}  // namespace ag
