#pragma once
// Tensor: a handle on shared storage with a shape, strides and an offset, so views
// (view/reshape, transpose/permute, narrow, expand) share memory with their base.
// A tensor that requires grad remembers the graph Node that produced it.
//
//   ag::Generator gen(123);
//   auto w = ag::randn({3, 2}, gen, ag::DType::Float64).requires_grad_();
//   auto loss = ag::sum(ag::matmul(x, w));
//   loss.backward();          // w.grad() now holds d loss / d w
#include <atomic>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/generator.h"
#include "autograd/shape.h"

namespace ag {

struct Node;
namespace quant {
struct PackedFormat;
}

// One allocation, 64-byte aligned so inner loops vectorise cleanly.
struct Storage {
  explicit Storage(size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data = nullptr;
  size_t nbytes = 0;

  // Element i of this storage rounded to bfloat16, element i of bf16_copy: written by the
  // op that produced the elements under a bf16 autocast scope, in the same pass, so that
  // the GEMMs reading them next need no rounding pass (autograd/autocast.h,
  // detail::attach_bf16_copy). It holds only while nothing has been written since it was
  // attached, and that is kept by construction rather than by the writers' care: every way
  // of writing counts a version (Tensor::data and raw_data hand out a writable pointer,
  // and copy_, fill_, Tensor::set and add_ write), the copy remembers the version it was
  // made at, and current_bf16_copy() gives it only while the two still match. Reading
  // goes through Tensor::const_data, which counts nothing. A producer takes the writable
  // pointer to its output first and attaches the copy after it.
  std::shared_ptr<Storage> bf16_copy;
  uint64_t bf16_copy_version = 0;
  std::atomic<uint64_t> version{0};  // writable accesses so far
  // Set when the storage holds a frozen weight's rows packed (quant/packed_weight.h): its
  // bytes are blocks, not elements, and only that header's functions read them.
  const quant::PackedFormat* packed = nullptr;

  void written() { version.fetch_add(1, std::memory_order_relaxed); }
  void attach_bf16_copy(std::shared_ptr<Storage> copy) {
    bf16_copy = std::move(copy);
    bf16_copy_version = version.load(std::memory_order_relaxed);
  }
  // The bfloat16 copy while it still holds these elements rounded; null otherwise.
  std::shared_ptr<Storage> current_bf16_copy() const {
    if (bf16_copy && version.load(std::memory_order_relaxed) == bf16_copy_version) return bf16_copy;
    return nullptr;
  }
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;  // accumulated on leaves by backward()
  std::shared_ptr<Node> grad_fn;     // null on leaves
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // --- metadata
  const Shape& shape() const { return checked().shape; }
  const Shape& strides() const { return checked().strides; }
  int64_t offset() const { return checked().offset; }
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t d) const;
  int64_t numel() const { return shape_numel(shape()); }
  DType dtype() const { return checked().dtype; }
  bool is_contiguous() const;
  bool shares_storage_with(const Tensor& other) const;
  // The format of a frozen weight held packed (quant/packed_weight.h); null for elements.
  const quant::PackedFormat* packing() const { return checked().storage->packed; }

  // --- raw access: a pointer to element 0 of this view; T must match dtype()
  // data and raw_data give a writable pointer and count as a write into the storage (which
  // retires its bfloat16 copy, Storage::bf16_copy); take it before writing, not keep it
  // from before another op ran. Code that only reads takes const_data or const_raw_data.
  template <typename T>
  T* data() const;
  void* raw_data() const;
  template <typename T>
  const T* const_data() const;
  const void* const_raw_data() const;

  // --- element access (bounds-checked, converted to double)
  double item() const;
  double at(std::initializer_list<int64_t> index) const;
  double at(const std::vector<int64_t>& index) const;
  void set(const std::vector<int64_t>& index, double value) const;  // writes through views
  std::vector<double> to_vector() const;                            // logical row-major order

  // --- autograd
  bool requires_grad() const { return checked().requires_grad; }
  Tensor& requires_grad_(bool on = true);
  bool is_leaf() const { return checked().grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return checked().grad_fn; }
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  void zero_grad() const;  // drops the accumulated gradient
  // Seeds backpropagation; `gradient` defaults to 1 for a one-element tensor.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  // Same data, no history: the result is a leaf that does not require grad.
  Tensor detach() const;

  // --- views and layout (differentiable)
  Tensor view(const Shape& shape) const;     // needs compatible strides; -1 infers one size
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a copy
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;  // transpose of a 2-D tensor
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;  // narrow then drop the dim
  Tensor expand(const Shape& shape) const;          // size-1 dims to any size, -1 keeps
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  Tensor contiguous() const;
  Tensor clone() const;          // a contiguous copy, differentiable
  Tensor to(DType dtype) const;  // conversion; differentiable between float types

  std::string str() const;  // PyTorch-style printing

 private:
  const TensorImpl& checked() const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// --- creation (contiguous, no grad)
Tensor empty(const Shape& shape, DType dtype = DType::Float32);
Tensor zeros(const Shape& shape, DType dtype = DType::Float32);
Tensor ones(const Shape& shape, DType dtype = DType::Float32);
Tensor full(const Shape& shape, double value, DType dtype = DType::Float32);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor arange(double end, DType dtype = DType::Int64);
Tensor arange(double start, double end, double step = 1, DType dtype = DType::Int64);
// Bool [rows, cols], true where col - row >= diagonal: with diagonal 1, the future
// positions that causal attention hides.
Tensor triu_mask(int64_t rows, int64_t cols, int64_t diagonal = 1);
Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                   DType dtype = DType::Float32);
Tensor from_vector(const std::vector<float>& values, const Shape& shape);
Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape);
Tensor tensor(std::initializer_list<double> values, DType dtype = DType::Float32);
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows,
              DType dtype = DType::Float32);
Tensor rand(const Shape& shape, Generator& gen, DType dtype = DType::Float32);  // U[0,1)
Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::Float32);
Tensor uniform(const Shape& shape, double low, double high, Generator& gen,
               DType dtype = DType::Float32);
Tensor normal(const Shape& shape, double mean, double std, Generator& gen,
              DType dtype = DType::Float32);

// Copies src into dst elementwise (src broadcast to dst's shape, dtype converted);
// not recorded by autograd.
void copy_(const Tensor& dst, const Tensor& src);
void fill_(const Tensor& dst, double value);

// Shared-memory views without autograd bookkeeping (used inside ops and backward).
Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset);

// ---------------------------------------------------------------- template bodies
// T must be the element type of t: an invalid_argument naming `accessor` otherwise.
template <typename T>
void check_element_type(const Tensor& t, const char* accessor) {
  if (dtype_of<T>() != t.dtype())
    throw std::invalid_argument(std::string(accessor) + "<" + dtype_name(dtype_of<T>()) +
                                ">() called on a " + dtype_name(t.dtype()) + " tensor");
}

template <typename T>
T* Tensor::data() const {
  check_element_type<T>(*this, "data");
  return static_cast<T*>(raw_data());
}

template <typename T>
const T* Tensor::const_data() const {
  check_element_type<T>(*this, "const_data");
  return static_cast<const T*>(const_raw_data());
}

}  // namespace ag
