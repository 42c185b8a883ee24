// Inverted dropout: survivors are scaled by 1/(1-p) at training time so evaluation needs
// no rescaling. The op takes one draw from the explicit generator and derives the mask of
// each fixed chunk of elements from that draw and the chunk's index, so chunks can be
// drawn in parallel, in any order, with the same result on any number of threads; a
// fixed seed gives the same mask (gradient checks rely on that).
#include <fmt/format.h>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/ops/map.h"
#include "autograd/parallel.h"

namespace ag {

namespace {

constexpr int64_t kMaskChunk = 4096;  // elements drawn from one stream
// an element's draw costs about as much as streaming this many (detail::team_pays)
constexpr double kDrawWork = 4;

}  // namespace

// out = a * keep / (1 - p) with keep ~ Bernoulli(1 - p);  da = g * keep / (1 - p)
Tensor dropout(const Tensor& a, double p, bool training, Generator& gen) {
  if (!(p >= 0.0 && p <= 1.0))
    throw std::invalid_argument(fmt::format("dropout: p must be in [0, 1], got {}", p));
  if (!training || p == 0.0) return a;
  Tensor x = a.detach().contiguous();
  Tensor keep = empty(a.shape(), DType::Bool);  // one byte per element, not a float mask
  Tensor out = empty(a.shape(), a.dtype());
  const uint64_t draw = gen.next_u64();
  const uint64_t cutoff = Generator::uniform_cutoff(p);  // dropped where uniform() < p
  const double scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
  AG_DISPATCH_FLOAT(a.dtype(), "dropout", [&] {
    const scalar_t* xp = x.data<scalar_t>();
    scalar_t* o = out.data<scalar_t>();
    bool* k = keep.data<bool>();
    const scalar_t s = static_cast<scalar_t>(scale);
    detail::parallel_for_items(a.numel(), kMaskChunk, kDrawWork, [&](int64_t begin, int64_t end) {
      Generator stream = Generator::substream(draw, static_cast<uint64_t>(begin / kMaskChunk));
      for (int64_t i = begin; i < end; ++i) k[i] = (stream.next_u64() >> 11) >= cutoff;
      AG_SIMD
      for (int64_t i = begin; i < end; ++i) o[i] = k[i] ? xp[i] * s : scalar_t(0);
    });
  });
  if (needs_recording({a}))
    attach_backward(out, "DropoutBackward", {a},
                    [keep, scale](const Tensor& g) -> std::vector<Tensor> {
                      Tensor gc = g.contiguous();
                      Tensor dx = empty(gc.shape(), gc.dtype());
                      AG_DISPATCH_FLOAT(gc.dtype(), "dropout backward", [&] {
                        const scalar_t* gp = gc.data<scalar_t>();
                        const bool* k = keep.data<bool>();
                        scalar_t* d = dx.data<scalar_t>();
                        const scalar_t s = static_cast<scalar_t>(scale);
                        detail::parallel_for(gc.numel(), detail::kElementwiseGrain,
                                             [&](int64_t begin, int64_t end) {
                                               AG_SIMD
                                               for (int64_t i = begin; i < end; ++i)
                                                 d[i] = k[i] ? gp[i] * s : scalar_t(0);
                                             });
                      });
                      return {dx};
                    });
  return out;
}

}  // namespace ag
