// Embedding lookup: out[..., :] = weight[ids[...], :]. Backward scatter-adds each output
// row's gradient into the row it came from, so repeated ids sum their gradients; into the
// weight's gradient itself when it already has one (a tied head's), row by row.
#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include "autograd/anomaly.h"
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/profile.h"
#include "autograd/quant/packed_weight.h"

namespace ag {

namespace {

// Adds the embedding's gradient into `acc`, the weight's gradient so far, touching only the
// rows the ids use: each row's gradients are summed from zero in the order of the ids, as
// the dense [V, C] gradient sums them, and then added once, as the engine adds that dense
// gradient (acc += dw): the same bits (a row no id uses gains +0 there, nothing here), without
// the V x C zeros written, read and added (GPT-2's tied 50257 x 768: 154 MB, three passes).
void add_rows_into(Tensor& acc, const Tensor& g, const int64_t* id, int64_t n_ids, int64_t C) {
  std::unordered_map<int64_t, int64_t> slot_of;  // row -> its slot in `sums`
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < n_ids; ++i)
    if (slot_of.try_emplace(id[i], static_cast<int64_t>(rows.size())).second) rows.push_back(id[i]);
  // n_ids rows, not one per row used: the same size every step (the embedding's output's),
  // so the allocator hands out a cached block (a size that varied would come from the system)
  Tensor sums = zeros({n_ids, C}, g.dtype());
  AG_DISPATCH_FLOAT(g.dtype(), "embedding backward", [&] {
    const scalar_t* src = g.const_data<scalar_t>();
    scalar_t* sum = sums.data<scalar_t>();
    for (int64_t i = 0; i < n_ids; ++i) {
      scalar_t* row = sum + slot_of[id[i]] * C;
      for (int64_t c = 0; c < C; ++c) row[c] += src[i * C + c];
    }
    scalar_t* dst = acc.data<scalar_t>();
    for (size_t r = 0; r < rows.size(); ++r)
      for (int64_t c = 0; c < C; ++c) dst[rows[r] * C + c] += sum[r * C + c];
  });
}

// A frozen weight held packed (quant/packed_weight.h): each id's row unpacked into the
// output, as float32; nothing recorded (a packed weight takes no gradient).
Tensor packed_lookup(const Tensor& weight, const int64_t* id, int64_t n_ids, const Shape& shape) {
  Tensor out = empty(shape, DType::Float32);
  float* dst = out.data<float>();
  const int64_t C = weight.shape()[1];
  for (int64_t i = 0; i < n_ids; ++i)
    quant::unpack_rows(weight, id[i], id[i] + 1, DType::Float32, dst + i * C);
  return out;
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  const profile::Timer timer("embedding");
  if (weight.dim() != 2)
    throw std::invalid_argument(
        fmt::format("embedding: weight must be [num_embeddings, dim], got shape {}",
                    shape_str(weight.shape())));
  if (ids.dtype() != DType::Int64)
    throw std::invalid_argument(
        fmt::format("embedding: ids must be int64, got {}", dtype_name(ids.dtype())));
  const int64_t V = weight.shape()[0], C = weight.shape()[1];
  Tensor idc = ids.contiguous();
  const int64_t* id = idc.const_data<int64_t>();
  const int64_t n_ids = idc.numel();
  for (int64_t i = 0; i < n_ids; ++i)
    if (id[i] < 0 || id[i] >= V)
      throw std::out_of_range(
          fmt::format("embedding: id {} at position {} is out of range for "
                      "{} embeddings",
                      id[i], i, V));
  Shape out_shape = ids.shape();
  out_shape.push_back(C);
  if (weight.packing()) return packed_lookup(weight, id, n_ids, out_shape);
  Tensor out = empty(out_shape, weight.dtype());
  Tensor w = weight.detach().contiguous();
  AG_DISPATCH_FLOAT(weight.dtype(), "embedding", [&] {
    const scalar_t* src = w.const_data<scalar_t>();
    scalar_t* dst = out.data<scalar_t>();
    for (int64_t i = 0; i < n_ids; ++i)
      std::memcpy(dst + i * C, src + id[i] * C, C * sizeof(scalar_t));
  });
  if (needs_recording({weight})) {
    // a leaf weight (a parameter): its gradient may already hold another use's (the tied
    // head's), which this one's rows are then added into (add_rows_into)
    std::weak_ptr<TensorImpl> leaf;
    if (weight.is_leaf()) leaf = weight.impl_ptr();
    attach_backward(
        out, "EmbeddingBackward", {weight},
        [idc = idc.detach(), n_ids, V, C, leaf](const Tensor& g) -> std::vector<Tensor> {
          Tensor gc = g.contiguous();
          const int64_t* id = idc.const_data<int64_t>();
          const auto w = leaf.lock();
          if (w && w->grad && !tracking_modules()) {
            Tensor acc(w->grad);
            if (acc.is_contiguous() && acc.shape() == Shape{V, C} && acc.dtype() == gc.dtype()) {
              add_rows_into(acc, gc, id, n_ids, C);
              return {Tensor()};
            }
          }
          Tensor dw = zeros({V, C}, g.dtype());
          AG_DISPATCH_FLOAT(g.dtype(), "embedding backward", [&] {
            const scalar_t* src = gc.const_data<scalar_t>();
            scalar_t* dst = dw.data<scalar_t>();
            for (int64_t i = 0; i < n_ids; ++i)
              for (int64_t c = 0; c < C; ++c) dst[id[i] * C + c] += src[i * C + c];
          });
          return {dw};
        });
  }
  return out;
}

}  // namespace ag
