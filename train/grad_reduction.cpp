#include "train/grad_reduction.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <functional>
#include <stdexcept>

#include "autograd/parallel.h"
#include "train/grad_accumulation.h"

namespace train {

std::vector<TreeNode> tree_nodes_within(int64_t begin, int64_t end, int64_t total) {
  std::vector<TreeNode> out;
  std::function<void(int64_t, int64_t)> visit = [&](int64_t b, int64_t n) {
    if (b >= end || b + n <= begin) return;
    if (begin <= b && b + n <= end) {
      out.push_back({b, n});
      return;
    }
    const int64_t half = tree_split(n);  // n >= 2: a node only partly inside has two parts
    visit(b, half);
    visit(b + half, n - half);
  };
  visit(0, total);
  return out;
}

namespace {

// left + right elementwise: the additions the single process's accumulator makes
void add_vectors(const float* left, const float* right, float* out, int64_t n) {
  ag::detail::parallel_for(n, ag::detail::kElementwiseGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) out[i] = left[i] + right[i];
  });
}

}  // namespace

void tree_combine(const std::vector<TreeNode>& leaves, const std::vector<const float*>& values,
                  int64_t total, int64_t n, float* out, std::vector<std::vector<float>>& scratch) {
  size_t next_leaf = 0, next_scratch = 0;
  // the sum of node (b, size), written to `into` when it is computed here
  std::function<const float*(int64_t, int64_t, float*)> sum = [&](int64_t b, int64_t size,
                                                                  float* into) -> const float* {
    if (next_leaf < leaves.size() && leaves[next_leaf] == TreeNode{b, size})
      return values[next_leaf++];
    if (size < 2 || next_leaf >= leaves.size())
      throw std::logic_error("tree_combine: the leaves do not cover the tree");
    const int64_t half = tree_split(size);
    auto buffer = [&]() {
      if (next_scratch == scratch.size()) scratch.emplace_back();
      scratch[next_scratch].resize(static_cast<size_t>(n));
      return scratch[next_scratch++].data();
    };
    const float* left = sum(b, half, nullptr);
    const float* right = sum(b + half, size - half, nullptr);
    if (!into) into = buffer();
    add_vectors(left, right, into, n);
    return into;
  };
  const float* root = sum(0, total, out);
  if (root != out) std::copy(root, root + n, out);
  if (next_leaf != leaves.size())
    throw std::logic_error("tree_combine: leaves left over after the tree");
}

GradReducer::GradReducer(const World& world, std::vector<ag::Tensor> params, int64_t accum_steps)
    : world_(world), params_(std::move(params)) {
  for (const ag::Tensor& p : params_) {
    offsets_.push_back(numel_);
    numel_ += p.numel();
  }
  const int size = world_.size(), me = world_.rank();
  total_ = accum_steps * size;
  mine_ = tree_nodes_within(me * accum_steps, (me + 1) * accum_steps, total_);
  std::vector<size_t> nodes_of(size);
  for (int r = 0; r < size; ++r) {
    auto theirs = tree_nodes_within(r * accum_steps, (r + 1) * accum_steps, total_);
    nodes_of[r] = theirs.size();
    all_.insert(all_.end(), theirs.begin(), theirs.end());
  }
  auto add_block = [](World::Pattern& p, int64_t floats) {
    if (floats > INT_MAX)
      throw std::invalid_argument(fmt::format(
          "the gradient exchange would send {} floats in one message, more than MPI's int "
          "counts allow; use more processes",
          floats));
    p.displs.push_back(p.counts.empty() ? 0 : p.displs.back() + p.counts.back());
    p.counts.push_back(static_cast<int>(floats));
  };
  for (int r = 0; r < size; ++r) {
    add_block(to_, static_cast<int64_t>(mine_.size()) * shard_size(r));
    add_block(from_, static_cast<int64_t>(nodes_of[r]) * shard_size(me));
    add_block(gather_, shard_size(r));
  }
  send_.resize(static_cast<size_t>(mine_.size() * numel_));
  recv_.resize(static_cast<size_t>(all_.size() * shard_size(me)));
  reduced_.resize(static_cast<size_t>(shard_size(me)));
  whole_.resize(static_cast<size_t>(numel_));
}

int64_t GradReducer::buffer_floats() const {
  return static_cast<int64_t>(send_.size() + recv_.size() + reduced_.size() + whole_.size());
}

// Node k's values for shard s go to send_[to_.displs[s] + k * shard_size(s) + offset in s].
void GradReducer::keep_node(size_t k) {
  for (size_t i = 0; i < params_.size(); ++i) {
    const ag::Tensor g = params_[i].grad();
    const float* values = g.defined() ? g.data<float>() : nullptr;
    const int64_t begin = offsets_[i], end = begin + params_[i].numel();
    for (int s = 0; s < world_.size(); ++s) {
      const int64_t lo = std::max(begin, shard_begin(s)), hi = std::min(end, shard_begin(s + 1));
      if (lo >= hi) continue;
      float* out = send_.data() + to_.displs[s] + static_cast<int64_t>(k) * shard_size(s) +
                   (lo - shard_begin(s));
      if (values)
        std::copy(values + (lo - begin), values + (hi - begin), out);
      else
        std::fill(out, out + (hi - lo), 0.0f);
    }
  }
}

void GradReducer::reduce() {
  world_.wait(world_.start_all_to_all(send_.data(), to_, recv_.data(), from_));
  const int64_t n = shard_size(world_.rank());
  std::vector<const float*> leaves;
  for (size_t j = 0; j < all_.size(); ++j) leaves.push_back(recv_.data() + j * n);
  tree_combine(all_, leaves, total_, n, reduced_.data(), scratch_);
  world_.wait(
      world_.start_all_gather(reduced_.data(), static_cast<int>(n), whole_.data(), gather_));
  for (size_t i = 0; i < params_.size(); ++i) {
    ag::Tensor g = params_[i].grad();
    if (!g.defined()) {
      g = ag::zeros(params_[i].shape());
      params_[i].set_grad(g);
    }
    const float* from = whole_.data() + offsets_[i];
    std::copy(from, from + g.numel(), g.data<float>());
  }
}

}  // namespace train
