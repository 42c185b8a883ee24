// Embedding lookup: out[..., :] = weight[ids[...], :]. Backward scatter-adds each output
// row's gradient into the row it came from, so repeated ids sum their gradients.
#include <fmt/format.h>

#include <cstring>

#include "autograd/engine.h"
#include "autograd/ops.h"

namespace ag {

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  if (weight.dim() != 2)
    throw std::invalid_argument(
        fmt::format("embedding: weight must be [num_embeddings, dim], "
                    "got shape {}",
                    shape_str(weight.shape())));
  if (ids.dtype() != DType::Int64)
    throw std::invalid_argument(
        fmt::format("embedding: ids must be int64, got {}", dtype_name(ids.dtype())));
  const int64_t V = weight.shape()[0], C = weight.shape()[1];
  Tensor idc = ids.contiguous();
  const int64_t* id = idc.data<int64_t>();
  const int64_t n_ids = idc.numel();
  for (int64_t i = 0; i < n_ids; ++i)
    if (id[i] < 0 || id[i] >= V)
      throw std::out_of_range(
          fmt::format("embedding: id {} at position {} is out of range for "
                      "{} embeddings",
                      id[i], i, V));
  Shape out_shape = ids.shape();
  out_shape.push_back(C);
  Tensor out = empty(out_shape, weight.dtype());
  Tensor w = weight.detach().contiguous();
  AG_DISPATCH_FLOAT(weight.dtype(), "embedding", [&] {
    const scalar_t* src = w.data<scalar_t>();
    scalar_t* dst = out.data<scalar_t>();
    for (int64_t i = 0; i < n_ids; ++i)
      std::memcpy(dst + i * C, src + id[i] * C, C * sizeof(scalar_t));
  });
  if (needs_recording({weight}))
    attach_backward(out, "EmbeddingBackward", {weight},
                    [idc = idc.detach(), n_ids, V, C](const Tensor& g) -> std::vector<Tensor> {
                      Tensor dw = zeros({V, C}, g.dtype());
                      Tensor gc = g.contiguous();
                      const int64_t* id = idc.data<int64_t>();
                      AG_DISPATCH_FLOAT(g.dtype(), "embedding backward", [&] {
                        const scalar_t* src = gc.data<scalar_t>();
                        scalar_t* dst = dw.data<scalar_t>();
                        for (int64_t i = 0; i < n_ids; ++i)
                          for (int64_t c = 0; c < C; ++c) dst[id[i] * C + c] += src[i * C + c];
                      });
                      return {dw};
                    });
  return out;
}

}  // namespace ag
