#pragma once
// Data-parallel gradients whose bits do not depend on the number of processes.
//
// A step takes M = processes x grad_accum_steps micro-batches; rank r computes the
// contiguous micro-batches [r A, r A + A). The step's gradient is the canonical tree sum
// of grad_accumulation.h over all M, exactly as one process accumulating M micro-batches
// computes it:
//  1. each rank sums its micro-batches into the maximal subtrees of that tree that lie
//     inside its range (tree_nodes_within: one node when A is a power of two and
//     aligned, a few otherwise), each by a GradAccumulator (the tree is the same shape
//     wherever a subtree starts);
//  2. the flat gradient is cut into one shard per rank; an all-to-all sends every rank
//     every node's values of its shard (data movement only, no arithmetic);
//  3. each rank combines its shard's node values by the upper part of the tree
//     (tree_combine), the same additions in the same order as the single process;
//  4. an all-gather gives every rank the whole sum, which goes back into the gradients.
// Every rank then holds the same bits, and clipping and AdamW see the same gradient.
//
//   GradReducer reducer(world, model.parameters(), accum_steps);
//   for (size_t k = 0; k < reducer.nodes().size(); ++k) {
//     ... accumulate node k's micro-batches into the gradients ...
//     reducer.keep_node(k);
//   }
//   reducer.reduce();   // every rank's gradients: the sum over all M micro-batches
#include <cstdint>
#include <vector>

#include "autograd/tensor.h"
#include "train/world.h"

namespace train {

struct TreeNode {
  int64_t begin = 0, size = 0;  // micro-batches [begin, begin + size)
  bool operator==(const TreeNode&) const = default;
};

// The maximal nodes of the canonical tree over [0, total) that lie inside [begin, end),
// left to right: together they cover [begin, end).
std::vector<TreeNode> tree_nodes_within(int64_t begin, int64_t end, int64_t total);

// The tree sum over [0, total) of n-element vectors, given the sums of `leaves` (nodes of
// the tree covering [0, total) in order; values[k] holds leaf k's n floats). Writes n
// floats to out; scratch is reused between calls.
void tree_combine(const std::vector<TreeNode>& leaves, const std::vector<const float*>& values,
                  int64_t total, int64_t n, float* out, std::vector<std::vector<float>>& scratch);

class GradReducer {
 public:
  GradReducer(const World& world, std::vector<ag::Tensor> params, int64_t accum_steps);

  const std::vector<TreeNode>& nodes() const { return mine_; }  // this rank's, in order
  // The gradients now hold the sum of this rank's node k: they are copied out.
  void keep_node(size_t k);
  // Every rank: the gradients become the sum over all micro-batches of the step.
  void reduce();

  // Floats held besides the gradients (for the memory plan).
  int64_t buffer_floats() const;

 private:
  int64_t shard_begin(int rank) const { return numel_ * rank / world_.size(); }
  int64_t shard_size(int rank) const { return shard_begin(rank + 1) - shard_begin(rank); }

  const World& world_;
  std::vector<ag::Tensor> params_;
  std::vector<int64_t> offsets_;
  int64_t numel_ = 0, total_ = 0;
  std::vector<TreeNode> mine_, all_;  // this rank's nodes; every rank's, in rank order
  std::vector<float> send_, recv_, reduced_, whole_;
  World::Pattern to_, from_, gather_;
  std::vector<std::vector<float>> scratch_;
};

}  // namespace train
