#include "train/grad_accumulation.h"

#include <algorithm>
#include <stdexcept>

#include "autograd/parallel.h"

namespace train {

namespace {

// Float addition is commutative bit for bit (x + y == y + x), so "left + right" may be
// stored in either operand; only the grouping matters, and the tree fixes it.
void add_span(float* into, const float* other, int64_t n) {
  ag::detail::parallel_for(n, ag::detail::kElementwiseGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) into[i] += other[i];
  });
}

}  // namespace

int64_t tree_split(int64_t n) {
  int64_t half = 1;
  while (half * 2 < n) half *= 2;
  return half;
}

int64_t partial_sums_held(int64_t micro_batches) {
  int64_t held = 0;
  while ((int64_t{2} << held) <= micro_batches) ++held;
  return micro_batches <= 1 ? 0 : held;
}

GradAccumulator::GradAccumulator(std::vector<ag::Tensor> params) : params_(std::move(params)) {
  for (const ag::Tensor& p : params_) {
    if (p.dtype() != ag::DType::Float32)
      throw std::invalid_argument("GradAccumulator: parameters must be float32");
    offsets_.push_back(numel_);
    numel_ += p.numel();
  }
}

void GradAccumulator::start() {
  stack_.clear();
  free_.clear();
  for (int64_t i = 0; i < static_cast<int64_t>(buffers_.size()); ++i) free_.push_back(i);
}

int64_t GradAccumulator::acquire() {
  if (!free_.empty()) {
    const int64_t b = free_.back();
    free_.pop_back();
    return b;
  }
  buffers_.emplace_back(static_cast<size_t>(numel_));
  return static_cast<int64_t>(buffers_.size()) - 1;
}

// The incoming gradient is a sum of size 1; equal sizes merge (earlier + later), as a
// binary counter carries.
void GradAccumulator::add() {
  int64_t size = 1, carry = -1;  // carry -1: it is still in the parameters' gradients
  while (!stack_.empty() && stack_.back().size == size) {
    const Partial left = stack_.back();
    stack_.pop_back();
    if (carry < 0) {
      add_grads_into(buffers_[left.buffer]);
    } else {
      add_into(buffers_[left.buffer], buffers_[carry]);
      free_.push_back(carry);
    }
    carry = left.buffer;
    size *= 2;
  }
  if (carry < 0) {
    carry = acquire();
    copy_grads_to(buffers_[carry]);
  }
  stack_.push_back({carry, size});
  for (const ag::Tensor& p : params_) p.zero_grad();
}

// sum(0, M) for the tree above is the right-nested sum of the stack's parts and the last
// gradient: s_0 + (s_1 + (... + (s_k + g_last))).
void GradAccumulator::finish() {
  finish_params(0, params_.size());
  for (const Partial& p : stack_) free_.push_back(p.buffer);
  stack_.clear();
}

void GradAccumulator::finish_params(size_t begin, size_t end) {
  for (auto it = stack_.rbegin(); it != stack_.rend(); ++it)
    add_into_grads(buffers_[it->buffer], begin, end);
}

void GradAccumulator::add_into(std::vector<float>& left, const std::vector<float>& right) {
  add_span(left.data(), right.data(), static_cast<int64_t>(left.size()));
}

void GradAccumulator::add_grads_into(std::vector<float>& sum) const {
  for (size_t i = 0; i < params_.size(); ++i) {
    const ag::Tensor g = params_[i].grad();
    if (g.defined()) add_span(sum.data() + offsets_[i], g.data<float>(), g.numel());
  }
}

void GradAccumulator::copy_grads_to(std::vector<float>& sum) const {
  for (size_t i = 0; i < params_.size(); ++i) {
    const ag::Tensor g = params_[i].grad();
    float* out = sum.data() + offsets_[i];
    const int64_t n = params_[i].numel();
    if (!g.defined()) {
      std::fill(out, out + n, 0.0f);
      continue;
    }
    const float* in = g.data<float>();
    std::copy(in, in + n, out);
  }
}

void GradAccumulator::add_into_grads(const std::vector<float>& left, size_t begin,
                                     size_t end) const {
  for (size_t i = begin; i < end; ++i) {
    ag::Tensor g = params_[i].grad();
    if (!g.defined()) {
      g = ag::zeros(params_[i].shape());
      params_[i].set_grad(g);
    }
    add_span(g.data<float>(), left.data() + offsets_[i], g.numel());
  }
}

}  // namespace train
