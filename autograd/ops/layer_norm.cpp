// LayerNorm over the last dim, fused: one pass for the row statistics, one for the output.
// B*T rows of C channels; mean and rstd per row are saved for backward.
#include <fmt/format.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/ops.h"

namespace ag {

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
  Tensor wc = weight.defined() ? weight.detach().contiguous() : Tensor();
  Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  AG_DISPATCH_FLOAT(x.dtype(), "layer_norm", [&] {
    const scalar_t* xp = xc.data<scalar_t>();
    const scalar_t* w = wc.defined() ? wc.data<scalar_t>() : nullptr;
    const scalar_t* b = bc.defined() ? bc.data<scalar_t>() : nullptr;
    scalar_t* y = out.data<scalar_t>();
    for (int64_t r = 0; r < rows; ++r) {
      const scalar_t* row = xp + r * C;
      double m = 0;
      for (int64_t i = 0; i < C; ++i) m += row[i];
      m /= C;
      double v = 0;
      for (int64_t i = 0; i < C; ++i) v += (row[i] - m) * (row[i] - m);
      v /= C;
      const double rs = 1.0 / std::sqrt(v + eps);
      mean.data<scalar_t>()[r] = static_cast<scalar_t>(m);
      rstd.data<scalar_t>()[r] = static_cast<scalar_t>(rs);
      for (int64_t i = 0; i < C; ++i) {
        scalar_t xhat = static_cast<scalar_t>((row[i] - m) * rs);
        y[r * C + i] = xhat * (w ? w[i] : scalar_t(1)) + (b ? b[i] : scalar_t(0));
      }
    }
  });
  // dxhat = g w;  dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat))
  // dw = sum_rows g xhat;  db = sum_rows g
  if (needs_recording({x, weight, bias}))
    attach_backward(
        out, "LayerNormBackward", {x, weight, bias},
        [xc, wc, mean, rstd, rows, C,
         has_bias = bias.defined()](const Tensor& g) -> std::vector<Tensor> {
          Tensor gc = g.contiguous();
          Tensor dx = empty(xc.shape(), xc.dtype());
          Tensor dw = wc.defined() ? zeros({C}, xc.dtype()) : Tensor();
          Tensor db = has_bias ? zeros({C}, xc.dtype()) : Tensor();
          AG_DISPATCH_FLOAT(xc.dtype(), "layer_norm backward", [&] {
            const scalar_t* xp = xc.data<scalar_t>();
            const scalar_t* gp = gc.data<scalar_t>();
            const scalar_t* w = wc.defined() ? wc.data<scalar_t>() : nullptr;
            scalar_t* dxp = dx.data<scalar_t>();
            scalar_t* dwp = dw.defined() ? dw.data<scalar_t>() : nullptr;
            scalar_t* dbp = db.defined() ? db.data<scalar_t>() : nullptr;
            for (int64_t r = 0; r < rows; ++r) {
              const scalar_t m = mean.data<scalar_t>()[r], rs = rstd.data<scalar_t>()[r];
              const scalar_t* xr = xp + r * C;
              const scalar_t* gr = gp + r * C;
              double mean_dxhat = 0, mean_dxhat_xhat = 0;
              for (int64_t i = 0; i < C; ++i) {
                scalar_t xhat = (xr[i] - m) * rs;
                scalar_t dxhat = gr[i] * (w ? w[i] : scalar_t(1));
                mean_dxhat += dxhat;
                mean_dxhat_xhat += dxhat * xhat;
                if (dwp) dwp[i] += gr[i] * xhat;
                if (dbp) dbp[i] += gr[i];
              }
              mean_dxhat /= C;
              mean_dxhat_xhat /= C;
              for (int64_t i = 0; i < C; ++i) {
                scalar_t xhat = (xr[i] - m) * rs;
                scalar_t dxhat = gr[i] * (w ? w[i] : scalar_t(1));
                dxp[r * C + i] =
                    static_cast<scalar_t>(rs * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
              }
            }
          });
          return {dx.view(g.shape()), dw, db};
        });
  return out;
}

}  // namespace ag
