// Inverted dropout: survivors are scaled by 1/(1-p) at training time so evaluation needs
// no rescaling. The mask is drawn from an explicit generator, so a fixed seed gives the
// same mask (gradient checks rely on that).
#include <fmt/format.h>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/ops/map.h"

namespace ag {

// out = a * mask, mask in {0, 1/(1-p)};  da = g * mask
Tensor dropout(const Tensor& a, double p, bool training, Generator& gen) {
  if (!(p >= 0.0 && p <= 1.0))
    throw std::invalid_argument(fmt::format("dropout: p must be in [0, 1], got {}", p));
  if (!training || p == 0.0) return a;
  Tensor mask = empty(a.shape(), a.dtype());
  AG_DISPATCH_FLOAT(a.dtype(), "dropout", [&] {
    scalar_t* m = mask.data<scalar_t>();
    const scalar_t keep = p == 1.0 ? scalar_t(0) : static_cast<scalar_t>(1.0 / (1.0 - p));
    const int64_t n = mask.numel();
    for (int64_t i = 0; i < n; ++i) m[i] = gen.uniform() < p ? scalar_t(0) : keep;
  });
  Tensor out = detail::map2(a, mask, "dropout", [](auto x, auto m) { return x * m; });
  if (needs_recording({a}))
    attach_backward(out, "DropoutBackward", {a}, [mask](const Tensor& g) -> std::vector<Tensor> {
      return {detail::map2(g, mask, "dropout backward", [](auto gv, auto m) { return gv * m; })};
    });
  return out;
}

}  // namespace ag
