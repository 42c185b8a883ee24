// Views share storage with their input; their backward maps the gradient back onto the
// input's shape. contiguous/clone/to copy.
#include <fmt/format.h>

#include <numeric>
#include <stdexcept>

#include "autograd/engine.h"
#include "autograd/ops.h"

namespace ag {

namespace {

Shape infer_shape(const Shape& requested, int64_t numel, const Shape& from) {
  Shape s = requested;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer_at >= 0) throw std::invalid_argument("view: only one dimension can be -1");
      infer_at = static_cast<int64_t>(i);
    } else if (s[i] < 0) {
      throw std::invalid_argument(
          fmt::format("view: invalid size {} in shape {}", s[i], shape_str(requested)));
    } else {
      known *= s[i];
    }
  }
  if (infer_at >= 0 && known != 0 && numel % known == 0) s[infer_at] = numel / known;
  if ((infer_at >= 0 && known == 0) || shape_numel(s) != numel)
    throw std::invalid_argument(
        fmt::format("view: shape {} is invalid for a tensor of shape "
                    "{} ({} elements)",
                    shape_str(requested), shape_str(from), numel));
  return s;
}

// Strides for viewing (shape, strides) as new_shape without copying, if they exist
// (PyTorch's computeStride: split or merge runs of dims that are contiguous together).
bool view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape, Shape& out) {
  out.assign(new_shape.size(), 0);
  if (shape.empty() || shape_numel(shape) == 0) {
    out = contiguous_strides(new_shape);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

// Records a view whose gradient is mapped back by `back`.
Tensor recorded(Tensor out, const Tensor& in, const char* name, BackwardFn back) {
  if (needs_recording({in})) attach_backward(out, name, {in}, std::move(back));
  return out;
}

}  // namespace

Tensor Tensor::view(const Shape& requested) const {
  Shape s = infer_shape(requested, numel(), shape());
  Shape st;
  if (!view_strides(shape(), strides(), s, st))
    throw std::invalid_argument(fmt::format(
        "view: shape {} is not compatible with the strides {} of a tensor of shape {}; use "
        "reshape() (which copies) or contiguous() first",
        shape_str(s), shape_str(strides()), shape_str(shape())));
  Shape in_shape = shape();
  return recorded(
      make_view(*this, s, st, offset()), *this, "ViewBackward",
      [in_shape](const Tensor& g) -> std::vector<Tensor> { return {g.reshape(in_shape)}; });
}

Tensor Tensor::reshape(const Shape& requested) const {
  Shape s = infer_shape(requested, numel(), shape());
  Shape st;
  if (view_strides(shape(), strides(), s, st)) return view(s);
  return contiguous().view(s);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  if (static_cast<int64_t>(dims.size()) != dim())
    throw std::invalid_argument(fmt::format("permute: {} dims given for a tensor of shape {}",
                                            dims.size(), shape_str(shape())));
  Shape s(dim()), st(dim());
  std::vector<int64_t> inverse(dim(), -1);
  for (int64_t i = 0; i < dim(); ++i) {
    int64_t d = normalize_dim(dims[i], dim(), "permute");
    if (inverse[d] != -1)
      throw std::invalid_argument(
          fmt::format("permute: dim {} repeated in [{}]", d, fmt::join(dims, ", ")));
    inverse[d] = i;
    s[i] = shape()[d];
    st[i] = strides()[d];
  }
  return recorded(
      make_view(*this, s, st, offset()), *this, "PermuteBackward",
      [inverse](const Tensor& g) -> std::vector<Tensor> { return {g.permute(inverse)}; });
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  std::vector<int64_t> dims(dim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[normalize_dim(d0, dim(), "transpose")],
            dims[normalize_dim(d1, dim(), "transpose")]);
  return permute(dims);
}

Tensor Tensor::t() const {
  if (dim() != 2)
    throw std::invalid_argument(
        fmt::format("t(): expects a 2-D tensor, got shape {}", shape_str(shape())));
  return transpose(0, 1);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = normalize_dim(d, dim(), "narrow");
  if (start < 0) start += shape()[d];
  if (start < 0 || length < 0 || start > shape()[d] || length > shape()[d] - start)
    throw std::out_of_range(
        fmt::format("narrow: {} is out of range for dim {} of shape {}",
                    length >= 0 && start <= INT64_MAX - length  // the end could overflow
                        ? fmt::format("[{}, {})", start, start + length)
                        : fmt::format("start {} with length {}", start, length),
                    d, shape_str(shape())));
  Shape s = shape();
  s[d] = length;
  Shape in_shape = shape();
  return recorded(make_view(*this, s, strides(), offset() + start * strides()[d]), *this,
                  "NarrowBackward",
                  [in_shape, d, start, length](const Tensor& g) -> std::vector<Tensor> {
                    Tensor full = zeros(in_shape, g.dtype());
                    copy_(full.narrow(d, start, length), g);
                    return {full};
                  });
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = normalize_dim(d, dim(), "select");
  if (index < -shape()[d] || index >= shape()[d])
    throw std::out_of_range(fmt::format("select: index {} is out of range for dim {} of shape {}",
                                        index, d, shape_str(shape())));
  if (index < 0) index += shape()[d];
  return narrow(d, index, 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& requested) const {
  if (requested.size() < shape().size())
    throw std::invalid_argument(fmt::format("expand: target {} has fewer dims than shape {}",
                                            shape_str(requested), shape_str(shape())));
  size_t lead = requested.size() - shape().size();
  Shape s(requested.size()), st(requested.size(), 0);
  for (size_t i = 0; i < requested.size(); ++i) {
    int64_t have = i < lead ? 1 : shape()[i - lead];
    int64_t want = requested[i] == -1 && i >= lead ? have : requested[i];
    if (want < 0 || (have != want && have != 1))
      throw std::invalid_argument(fmt::format("expand: shape {} cannot be expanded to {}",
                                              shape_str(shape()), shape_str(requested)));
    s[i] = want;
    if (i >= lead && have == want) st[i] = strides()[i - lead];
  }
  Shape in_shape = shape();
  return recorded(
      make_view(*this, s, st, offset()), *this, "ExpandBackward",
      [in_shape](const Tensor& g) -> std::vector<Tensor> { return {sum_to(g, in_shape)}; });
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = normalize_dim(d, dim() + 1, "unsqueeze");
  Shape s = shape();
  s.insert(s.begin() + d, 1);
  return view(s);
}

Tensor Tensor::squeeze(int64_t d) const {
  d = normalize_dim(d, dim(), "squeeze");
  if (shape()[d] != 1) return *this;
  Shape s = shape();
  s.erase(s.begin() + d);
  return view(s);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype());
  copy_(out, *this);
  return recorded(out, *this, "CloneBackward",
                  [](const Tensor& g) -> std::vector<Tensor> { return {g}; });
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = empty(shape(), target);
  const DType from = dtype();
  if (from == DType::Float32 && target == DType::BFloat16 && is_contiguous())
    to_bfloat16(const_data<float>(), out.data<bfloat16>(), numel());  // the bulk, vectorised path
  else if (from == DType::BFloat16 && target == DType::Float32 && is_contiguous())
    from_bfloat16(const_data<bfloat16>(), out.data<float>(), numel());
  else
    copy_(out, *this);
  if (!is_floating(target)) return out;
  DType source = dtype();
  return recorded(out, *this, "ToBackward",
                  [source](const Tensor& g) -> std::vector<Tensor> { return {g.to(source)}; });
}

}  // namespace ag
