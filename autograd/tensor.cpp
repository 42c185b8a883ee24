// Tensor handles, storage, creation and element access. Views live in ops/views.cpp
// because they are differentiable; printing lives in print.cpp.
#include "autograd/tensor.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "autograd/allocator.h"
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/profile.h"
#include "autograd/quant/packed_weight.h"
#include "autograd/strided_loop.h"

namespace ag {

namespace {
[[noreturn]] void refuse_packed_elements(const Tensor& t) {
  throw std::logic_error(
      fmt::format("a frozen weight of shape {} is held as {} blocks: its elements are read only by "
                  "linear and embedding",
                  shape_str(t.shape()), t.packing()->name));
}
}  // namespace

Storage::Storage(size_t n) : data(allocate_block(n)), nbytes(n) {}
Storage::~Storage() {
  free_block(data, nbytes);
}

const TensorImpl& Tensor::checked() const {
  if (!impl_) throw std::logic_error("use of an undefined (empty) Tensor");
  return *impl_;
}

int64_t Tensor::size(int64_t d) const {
  return shape()[normalize_dim(d, dim(), "size")];
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (shape()[d] != 1 && strides()[d] != expected) return false;
    expected *= shape()[d];
  }
  return true;
}

bool Tensor::shares_storage_with(const Tensor& other) const {
  return defined() && other.defined() && impl_->storage == other.impl_->storage;
}

void* Tensor::raw_data() const {
  checked().storage->written();
  return const_cast<void*>(const_raw_data());
}

const void* Tensor::const_raw_data() const {
  const auto& t = checked();
  if (t.storage->packed) refuse_packed_elements(*this);
  return static_cast<const char*>(t.storage->data) + t.offset * dtype_size(t.dtype);
}

namespace {
int64_t element_offset(const Tensor& t, const std::vector<int64_t>& index) {
  if (static_cast<int64_t>(index.size()) != t.dim())
    throw std::out_of_range(fmt::format("index [{}] has {} entries for a tensor of shape {}",
                                        fmt::join(index, ", "), index.size(),
                                        shape_str(t.shape())));
  int64_t off = 0;
  for (size_t d = 0; d < index.size(); ++d) {
    if (index[d] < 0 || index[d] >= t.shape()[d])
      throw std::out_of_range(fmt::format("index [{}] is out of range for shape {} (dim {})",
                                          fmt::join(index, ", "), shape_str(t.shape()), d));
    off += index[d] * t.strides()[d];
  }
  return off;
}
}  // namespace

double Tensor::at(const std::vector<int64_t>& index) const {
  int64_t off = element_offset(*this, index);
  return AG_DISPATCH_ALL(dtype(), "at", [&]() -> double {
    return static_cast<double>(static_cast<const scalar_t*>(const_raw_data())[off]);
  });
}
double Tensor::at(std::initializer_list<int64_t> index) const {
  return at(std::vector<int64_t>(index));
}

void Tensor::set(const std::vector<int64_t>& index, double value) const {
  int64_t off = element_offset(*this, index);
  AG_DISPATCH_ALL(dtype(), "set",
                  [&] { static_cast<scalar_t*>(raw_data())[off] = static_cast<scalar_t>(value); });
}

double Tensor::item() const {
  if (numel() != 1)
    throw std::invalid_argument(
        fmt::format("item(): only a one-element tensor converts to a number, this one has shape {}",
                    shape_str(shape())));
  return at(std::vector<int64_t>(dim(), 0));
}

std::vector<double> Tensor::to_vector() const {
  Tensor c = contiguous();
  std::vector<double> out(numel());
  AG_DISPATCH_ALL(dtype(), "to_vector", [&] {
    const scalar_t* p = static_cast<const scalar_t*>(c.const_raw_data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(p[i]);
  });
  return out;
}

// ---------------------------------------------------------------- autograd handles
Tensor& Tensor::requires_grad_(bool on) {
  if (on && !is_floating(dtype()))
    throw std::invalid_argument(
        fmt::format("requires_grad_(): only float tensors can require grad, this one is {}",
                    dtype_name(dtype())));
  if (on && packing())
    throw std::invalid_argument(
        fmt::format("requires_grad_(): a weight held as {} blocks is frozen: it takes no gradient",
                    packing()->name));
  if (!on && !is_leaf())
    throw std::logic_error("requires_grad_(false) on a non-leaf tensor: use detach()");
  impl_->requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const {
  return checked().grad ? Tensor(impl_->grad) : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  checked();
  if (g.defined() && (g.shape() != shape() || g.dtype() != dtype()))
    throw std::invalid_argument(fmt::format(
        "set_grad(): gradient of shape {} ({}) for a tensor of shape {} ({})", shape_str(g.shape()),
        dtype_name(g.dtype()), shape_str(shape()), dtype_name(dtype())));
  impl_->grad = g.defined() ? g.impl_ptr() : nullptr;
}

void Tensor::zero_grad() const {
  checked(), impl_->grad.reset();
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  run_backward(*this, gradient, retain_graph);
}

Tensor Tensor::detach() const {
  const auto& t = checked();
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage;
  impl->shape = t.shape;
  impl->strides = t.strides;
  impl->offset = t.offset;
  impl->dtype = t.dtype;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset) {
  Tensor v = base.detach();
  v.impl()->shape = shape;
  v.impl()->strides = strides;
  v.impl()->offset = offset;
  return v;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  return os << t.str();
}

// ---------------------------------------------------------------- copy and fill
void copy_(const Tensor& dst, const Tensor& src) {
  const profile::Timer timer("copy");
  Shape target = broadcast_shapes(src.shape(), dst.shape(), "copy_");
  if (target != dst.shape())
    throw std::invalid_argument(
        fmt::format("copy_: source of shape {} does not broadcast to "
                    "destination shape {}",
                    shape_str(src.shape()), shape_str(dst.shape())));
  Shape sst = broadcast_strides(src.shape(), src.strides(), dst.shape());
  AG_DISPATCH_ALL(dst.dtype(), "copy_", [&] {
    using dst_t = scalar_t;
    dst_t* d = static_cast<dst_t*>(dst.raw_data());
    AG_DISPATCH_ALL(src.dtype(), "copy_", [&] {
      const scalar_t* s = static_cast<const scalar_t*>(src.const_raw_data());
      detail::for_each_run<2>(dst.shape(), {dst.strides(), sst}, [&](auto off, int64_t n, auto st) {
        dst_t* dp = d + off[0];
        const scalar_t* sp = s + off[1];
        if (st[0] == 1 && st[1] == 1) {
          for (int64_t i = 0; i < n; ++i) dp[i] = static_cast<dst_t>(sp[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) dp[i * st[0]] = static_cast<dst_t>(sp[i * st[1]]);
        }
      });
    });
  });
}

void fill_(const Tensor& dst, double value) {
  AG_DISPATCH_ALL(dst.dtype(), "fill_", [&] {
    scalar_t* d = static_cast<scalar_t*>(dst.raw_data());
    const scalar_t v = static_cast<scalar_t>(value);
    detail::for_each_run<1>(dst.shape(), {dst.strides()}, [&](auto off, int64_t n, auto st) {
      for (int64_t i = 0; i < n; ++i) d[off[0] + i * st[0]] = v;
    });
  });
}

// ---------------------------------------------------------------- creation
Tensor empty(const Shape& shape, DType dtype) {
  int64_t bytes = static_cast<int64_t>(dtype_size(dtype));
  for (int64_t d : shape) {
    if (d < 0)
      throw std::invalid_argument(fmt::format("negative size in shape {}", shape_str(shape)));
    if (__builtin_mul_overflow(bytes, d, &bytes))
      throw std::length_error(
          fmt::format("shape {} holds more elements than memory can address", shape_str(shape)));
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(shape_numel(shape) * dtype_size(dtype));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  fill_(t, value);
  return t;
}
Tensor zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.raw_data(), 0, t.numel() * dtype_size(dtype));
  return t;
}
Tensor ones(const Shape& shape, DType dtype) {
  return full(shape, 1.0, dtype);
}
Tensor zeros_like(const Tensor& t) {
  return zeros(t.shape(), t.dtype());
}
Tensor ones_like(const Tensor& t) {
  return ones(t.shape(), t.dtype());
}

Tensor arange(double end, DType dtype) {
  return arange(0, end, 1, dtype);
}
Tensor arange(double start, double end, double step, DType dtype) {
  if (!std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    throw std::invalid_argument(
        fmt::format("arange: start {}, end {} and step {} must be finite", start, end, step));
  if (step == 0) throw std::invalid_argument("arange: step must be nonzero");
  double span = (end - start) / step;
  int64_t n = span > 0 ? static_cast<int64_t>(std::ceil(span)) : 0;
  Tensor t = empty({n}, dtype);
  AG_DISPATCH_ALL(dtype, "arange", [&] {
    scalar_t* p = t.data<scalar_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<scalar_t>(start + i * step);
  });
  return t;
}

Tensor triu_mask(int64_t rows, int64_t cols, int64_t diagonal) {
  Tensor m = empty({rows, cols}, DType::Bool);
  bool* p = m.data<bool>();
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) p[i * cols + j] = j - i >= diagonal;
  return m;
}

namespace {
template <typename T>
Tensor from_values(const std::vector<T>& values, const Shape& shape, DType dtype) {
  if (static_cast<int64_t>(values.size()) != shape_numel(shape))
    throw std::invalid_argument(
        fmt::format("from_vector: {} values do not fill shape {} ({} "
                    "elements)",
                    values.size(), shape_str(shape), shape_numel(shape)));
  Tensor t = empty(shape, dtype);
  AG_DISPATCH_ALL(dtype, "from_vector", [&] {
    scalar_t* p = t.data<scalar_t>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<scalar_t>(values[i]);
  });
  return t;
}
}  // namespace

Tensor from_vector(const std::vector<double>& v, const Shape& s, DType d) {
  return from_values(v, s, d);
}
Tensor from_vector(const std::vector<float>& v, const Shape& s) {
  return from_values(v, s, DType::Float32);
}
Tensor from_vector(const std::vector<int64_t>& v, const Shape& s) {
  return from_values(v, s, DType::Int64);
}

Tensor tensor(std::initializer_list<double> values, DType dtype) {
  return from_vector(std::vector<double>(values), {static_cast<int64_t>(values.size())}, dtype);
}

Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, DType dtype) {
  std::vector<double> flat;
  size_t cols = rows.size() ? rows.begin()->size() : 0;
  for (const auto& r : rows) {
    if (r.size() != cols)
      throw std::invalid_argument(
          fmt::format("tensor(): ragged rows ({} and {} values)", cols, r.size()));
    flat.insert(flat.end(), r.begin(), r.end());
  }
  return from_vector(flat, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols)}, dtype);
}

namespace {
template <typename Draw>
Tensor random_tensor(const Shape& shape, DType dtype, Draw&& draw) {
  Tensor t = empty(shape, dtype);
  AG_DISPATCH_FLOAT(dtype, "random tensor", [&] {
    scalar_t* p = t.data<scalar_t>();
    const int64_t n = t.numel();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<scalar_t>(draw());
  });
  return t;
}
}  // namespace

Tensor rand(const Shape& shape, Generator& gen, DType dtype) {
  return random_tensor(shape, dtype, [&] { return gen.uniform(); });
}
Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype) {
  return random_tensor(shape, dtype, [&] { return low + (high - low) * gen.uniform(); });
}
Tensor randn(const Shape& shape, Generator& gen, DType dtype) {
  return random_tensor(shape, dtype, [&] { return gen.normal(); });
}
Tensor normal(const Shape& shape, double mean, double std, Generator& gen, DType dtype) {
  return random_tensor(shape, dtype, [&] { return mean + std * gen.normal(); });
}

}  // namespace ag
