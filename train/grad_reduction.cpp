#include "train/grad_reduction.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <functional>
#include <stdexcept>
#include <unordered_map>

#include "autograd/engine.h"
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

GradReducer::GradReducer(const World& world, std::vector<ag::Tensor> params, int64_t accum_steps,
                         int64_t bucket_bytes, Reduction reduction)
    : world_(world), params_(std::move(params)), reduction_(reduction) {
  for (const ag::Tensor& p : params_) {
    offsets_.push_back(numel_);
    numel_ += p.numel();
  }
  const int size = world_.size(), me = world_.rank();
  total_ = accum_steps * size;
  mine_ = tree_nodes_within(me * accum_steps, (me + 1) * accum_steps, total_);
  for (int r = 0; r < size; ++r) {
    auto theirs = tree_nodes_within(r * accum_steps, (r + 1) * accum_steps, total_);
    nodes_of_.push_back(theirs.size());
    all_.insert(all_.end(), theirs.begin(), theirs.end());
  }
  make_buckets(bucket_bytes);
  int64_t send = 0, recv = 0, reduced = 0;
  for (Bucket& b : buckets_) {
    b.send_at = send, b.recv_at = recv, b.reduced_at = reduced;
    if (reduction_ == Reduction::mpi_allreduce) {  // this rank's nodes summed, then MPI's sum
      send += b.hi - b.lo;
      continue;
    }
    lay_out(b);
    send += static_cast<int64_t>(mine_.size()) * (b.hi - b.lo);
    recv += static_cast<int64_t>(all_.size()) * shard_size(b, me);
    reduced += shard_size(b, me);
  }
  send_.resize(send), recv_.resize(recv), reduced_.resize(reduced), whole_.resize(numel_);
}

// Parameters from the last to the first, cut when a bucket holds bucket_bytes.
void GradReducer::make_buckets(int64_t bucket_bytes) {
  bucket_of_.assign(params_.size(), 0);
  size_t end = params_.size();
  while (end > 0) {
    Bucket b;
    b.end_param = end;
    b.first_param = end;
    int64_t bytes = 0;
    while (b.first_param > 0 && (bytes == 0 || bytes < bucket_bytes))
      bytes += 4 * params_[--b.first_param].numel();
    b.lo = offsets_[b.first_param];
    b.hi = offsets_[end - 1] + params_[end - 1].numel();
    for (size_t i = b.first_param; i < end; ++i) bucket_of_[i] = buckets_.size();
    buckets_.push_back(std::move(b));
    end = buckets_.back().first_param;
  }
}

// What goes where: rank s gets every node's values of its shard, node after node; rank r
// sends its nodes, and the all-gather returns each rank's combined shard.
void GradReducer::lay_out(Bucket& b) {
  auto add_block = [](World::Pattern& p, int64_t floats) {
    if (floats > INT_MAX)
      throw std::invalid_argument(fmt::format(
          "a gradient bucket would send {} floats in one message, more than MPI's int counts "
          "allow; use a smaller --bucket-mb",
          floats));
    p.displs.push_back(p.counts.empty() ? 0 : p.displs.back() + p.counts.back());
    p.counts.push_back(static_cast<int>(floats));
  };
  const int me = world_.rank();
  for (int r = 0; r < world_.size(); ++r) {
    add_block(b.to, static_cast<int64_t>(mine_.size()) * shard_size(b, r));
    add_block(b.from, static_cast<int64_t>(nodes_of_[r]) * shard_size(b, me));
    add_block(b.gather, shard_size(b, r));
  }
}

int64_t GradReducer::buffer_floats() const {
  return static_cast<int64_t>(send_.size() + recv_.size() + reduced_.size() + whole_.size());
}

// Node k's values of shard s: send_[b.send_at + b.to.displs[s] + k * shard + offset in it].
void GradReducer::copy_out(const Bucket& b, size_t k) {
  if (reduction_ == Reduction::mpi_allreduce) return add_out(b, k);
  for (size_t i = b.first_param; i < b.end_param; ++i) {
    const ag::Tensor g = params_[i].grad();
    const float* values = g.defined() ? g.data<float>() : nullptr;
    const int64_t begin = offsets_[i], end = begin + params_[i].numel();
    for (int s = 0; s < world_.size(); ++s) {
      const int64_t lo = std::max(begin, shard_begin(b, s));
      const int64_t hi = std::min(end, shard_begin(b, s + 1));
      if (lo >= hi) continue;
      float* out = send_.data() + b.send_at + b.to.displs[s] +
                   static_cast<int64_t>(k) * shard_size(b, s) + (lo - shard_begin(b, s));
      if (values)
        std::copy(values + (lo - begin), values + (hi - begin), out);
      else
        std::fill(out, out + (hi - lo), 0.0f);
    }
  }
}

// MPI's all-reduce: node 0 is copied, later nodes added (earlier + later) in order.
void GradReducer::add_out(const Bucket& b, size_t k) {
  for (size_t i = b.first_param; i < b.end_param; ++i) {
    const ag::Tensor g = params_[i].grad();
    float* out = send_.data() + b.send_at + (offsets_[i] - b.lo);
    const int64_t n = params_[i].numel();
    if (!g.defined()) {
      if (k == 0) std::fill(out, out + n, 0.0f);
      continue;
    }
    const float* values = g.data<float>();
    if (k == 0)
      std::copy(values, values + n, out);
    else
      add_vectors(out, values, out, n);
  }
}

void GradReducer::keep_node(size_t k) {
  for (const Bucket& b : buckets_) copy_out(b, k);
}

std::unique_ptr<GradReducer::Overlap> GradReducer::overlap_last_backward(
    GradAccumulator* accumulator) {
  next_start_ = 0;
  for (Bucket& b : buckets_) {
    b.waiting = b.end_param - b.first_param;
    b.started = false;
  }
  std::unordered_map<const ag::TensorImpl*, size_t> index;
  for (size_t i = 0; i < params_.size(); ++i) index[params_[i].impl()] = i;
  return std::make_unique<Overlap>([this, accumulator, index](const ag::TensorImpl* leaf) {
    const auto it = index.find(leaf);
    if (it != index.end()) param_ready(it->second, accumulator);
  });
}

void GradReducer::param_ready(size_t param, GradAccumulator* accumulator) {
  for (size_t i = 0; i < next_start_; ++i) world_.poke(buckets_[i].exchange);
  Bucket& b = buckets_[bucket_of_[param]];
  if (b.waiting == 0 || --b.waiting > 0) return;
  if (accumulator) accumulator->finish_params(b.first_param, b.end_param);
  copy_out(b, mine_.size() - 1);
  start_ready_buckets();
}

// Buckets start in index order, so every rank initiates the same collectives in the same
// order whatever order its backward finished them in.
void GradReducer::start_ready_buckets() {
  while (next_start_ < buckets_.size() && buckets_[next_start_].waiting == 0) {
    Bucket& b = buckets_[next_start_++];
    b.started = true;
    if (reduction_ == Reduction::mpi_allreduce) {
      b.exchange = world_.start_all_reduce(send_.data() + b.send_at, whole_.data() + b.lo,
                                           static_cast<int>(b.hi - b.lo));
      continue;
    }
    b.exchange =
        world_.start_all_to_all(send_.data() + b.send_at, b.to, recv_.data() + b.recv_at, b.from);
    b.started = true;
  }
}

void GradReducer::last_backward_done(GradAccumulator* accumulator) {
  for (Bucket& b : buckets_) {
    if (b.waiting == 0) continue;
    b.waiting = 0;
    if (accumulator) accumulator->finish_params(b.first_param, b.end_param);
    copy_out(b, mine_.size() - 1);
  }
  start_ready_buckets();
}

void GradReducer::combine_and_gather(Bucket& b) {
  const int me = world_.rank();
  const int64_t n = shard_size(b, me);
  std::vector<const float*> leaves;
  for (size_t j = 0; j < all_.size(); ++j) leaves.push_back(recv_.data() + b.recv_at + j * n);
  float* reduced = reduced_.data() + b.reduced_at;
  tree_combine(all_, leaves, total_, n, reduced, scratch_);
  b.gathering =
      world_.start_all_gather(reduced, static_cast<int>(n), whole_.data() + b.lo, b.gather);
}

void GradReducer::reduce(bool use) {
  const auto start = std::chrono::steady_clock::now();
  for (Bucket& b : buckets_) {
    world_.wait(b.exchange);
    if (use && reduction_ == Reduction::tree) combine_and_gather(b);
  }
  if (use) {
    if (reduction_ == Reduction::tree)
      for (Bucket& b : buckets_) world_.wait(b.gathering);
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
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace train
