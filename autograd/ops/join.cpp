// cat, stack and split. split returns narrow views; cat copies and its backward hands
// each input the slice of the gradient that it filled.
#include <fmt/format.h>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/profile.h"

namespace ag {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  const profile::Timer timer("cat");
  if (tensors.empty()) throw std::invalid_argument("cat: no tensors given");
  const Tensor& first = tensors[0];
  dim = normalize_dim(dim, first.dim(), "cat");
  Shape out_shape = first.shape();
  out_shape[dim] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    bool same = t.dim() == first.dim();
    for (int64_t d = 0; same && d < t.dim(); ++d)
      if (d != dim && t.shape()[d] != first.shape()[d]) same = false;
    if (!same)
      throw std::invalid_argument(fmt::format(
          "cat: tensor {} has shape {}, which does not match shape {} of tensor 0 outside dim {}",
          i, shape_str(t.shape()), shape_str(first.shape()), dim));
    if (t.dtype() != first.dtype())
      throw std::invalid_argument(fmt::format("cat: tensor {} is {}, tensor 0 is {}", i,
                                              dtype_name(t.dtype()), dtype_name(first.dtype())));
    out_shape[dim] += t.shape()[dim];
  }
  Tensor out = empty(out_shape, first.dtype());
  std::vector<int64_t> sizes;
  int64_t at = 0;
  for (const auto& t : tensors) {
    copy_(out.narrow(dim, at, t.shape()[dim]), t);
    at += t.shape()[dim];
    sizes.push_back(t.shape()[dim]);
  }
  if (needs_recording(tensors))
    attach_backward(out, "CatBackward", tensors,
                    [sizes, dim](const Tensor& g) -> std::vector<Tensor> {
                      std::vector<Tensor> grads;
                      int64_t start = 0;
                      for (int64_t s : sizes) {
                        grads.push_back(g.narrow(dim, start, s).contiguous());
                        start += s;
                      }
                      return grads;
                    });
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw std::invalid_argument("stack: no tensors given");
  for (size_t i = 1; i < tensors.size(); ++i)
    if (tensors[i].shape() != tensors[0].shape())
      throw std::invalid_argument(fmt::format("stack: tensor {} has shape {}, tensor 0 has {}", i,
                                              shape_str(tensors[i].shape()),
                                              shape_str(tensors[0].shape())));
  dim = normalize_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> expanded;
  for (const auto& t : tensors) expanded.push_back(t.unsqueeze(dim));
  return cat(expanded, dim);
}

std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim) {
  dim = normalize_dim(dim, a.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) throw std::invalid_argument(fmt::format("split: negative size {}", s));
    total += s;
  }
  if (total != a.shape()[dim])
    throw std::invalid_argument(
        fmt::format("split: sizes [{}] sum to {}, but dim {} of shape "
                    "{} has {}",
                    fmt::join(sizes, ", "), total, dim, shape_str(a.shape()), a.shape()[dim]));
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t s : sizes) {
    parts.push_back(a.narrow(dim, start, s));
    start += s;
  }
  return parts;
}

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  if (split_size <= 0)
    throw std::invalid_argument(
        fmt::format("split: split_size must be positive, got {}", split_size));
  dim = normalize_dim(dim, a.dim(), "split");
  std::vector<int64_t> sizes;
  for (int64_t left = a.shape()[dim]; left > 0; left -= split_size)
    sizes.push_back(std::min(split_size, left));
  return split(a, sizes, dim);
}

}  // namespace ag
