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
//   GradReducer reducer(world, model.parameters(), accum_steps, 25 << 20);
//   for each node k but the last: accumulate its micro-batches; reducer.keep_node(k);
//   the last node: accumulate all but its last micro-batch, then
//     { auto overlap = reducer.overlap_last_backward(&acc);  loss.backward(); }
//     reducer.last_backward_done(&acc);
//   reducer.reduce();   // every rank's gradients: the sum over all M micro-batches
#include <cstdint>
#include <memory>
#include <vector>

#include "autograd/engine.h"
#include "autograd/tensor.h"
#include "train/grad_accumulation.h"
#include "train/reduction.h"
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

// The gradients are cut into buckets of about bucket_bytes, in reverse order of the
// parameters (the order backward finishes them); each bucket is exchanged on its own, and
// during the step's last backward a bucket's exchange starts (non-blocking) as soon as its
// last gradient is final, so communication overlaps the rest of backward, as in PyTorch's
// DDP. Buckets start in bucket order on every rank (MPI matches collectives by order).
//
// Reduction::mpi_allreduce trades that guarantee for MPI's own MPI_Iallreduce per bucket
// (each rank's nodes summed in order first): MPI's summation order depends on its
// algorithm and the process count, so results agree with one process only to rounding.
class GradReducer {
 public:
  GradReducer(const World& world, std::vector<ag::Tensor> params, int64_t accum_steps,
              int64_t bucket_bytes, Reduction reduction = Reduction::tree);

  const std::vector<TreeNode>& nodes() const { return mine_; }  // this rank's, in order
  // The gradients hold the sum of this rank's node k, which is not the last: copied out.
  void keep_node(size_t k);
  // The backward of the last node's last micro-batch runs while this lives: each bucket is
  // finished in `accumulator` (when the node spans several micro-batches), copied out and
  // sent as soon as its gradients are final.
  class Overlap {
   public:
    explicit Overlap(ag::LeafGradReadyHook::Fn fn) : hook_(std::move(fn)) {}

   private:
    ag::LeafGradReadyHook hook_;
  };
  std::unique_ptr<Overlap> overlap_last_backward(GradAccumulator* accumulator);
  // After that backward: sends what was not sent yet (parameters backward never reached).
  void last_backward_done(GradAccumulator* accumulator);
  // Every rank: waits for the exchanges, combines, gathers; the gradients become the sum
  // over all micro-batches of the step. With use = false (a loss was not finite) the
  // exchanges are only completed and the gradients left alone.
  void reduce(bool use = true);

  int64_t buffer_floats() const;  // held besides the gradients (for the memory plan)
  double wait_seconds() const { return wait_seconds_; }  // after backward, in reduce()
  size_t bucket_count() const { return buckets_.size(); }

 private:
  struct Bucket {
    size_t first_param = 0, end_param = 0;  // parameters [first, end)
    int64_t lo = 0, hi = 0;                 // their elements in the flat gradient
    int64_t send_at = 0, recv_at = 0, reduced_at = 0;
    World::Pattern to, from, gather;
    size_t waiting = 0;  // parameters of the last backward not final yet
    bool started = false;
    std::shared_ptr<World::Request> exchange, gathering;
  };
  void make_buckets(int64_t bucket_bytes);
  void lay_out(Bucket& b);
  int64_t shard_begin(const Bucket& b, int rank) const {
    return b.lo + (b.hi - b.lo) * rank / world_.size();
  }
  int64_t shard_size(const Bucket& b, int rank) const {
    return shard_begin(b, rank + 1) - shard_begin(b, rank);
  }
  void copy_out(const Bucket& b, size_t k);
  void add_out(const Bucket& b, size_t k);
  void param_ready(size_t param, GradAccumulator* accumulator);
  void start_ready_buckets();
  void combine_and_gather(Bucket& b);

  const World& world_;
  std::vector<ag::Tensor> params_;
  Reduction reduction_;
  std::vector<int64_t> offsets_;
  std::vector<size_t> bucket_of_;  // per parameter
  int64_t numel_ = 0, total_ = 0;
  std::vector<TreeNode> mine_, all_;  // this rank's nodes; every rank's, in rank order
  std::vector<size_t> nodes_of_;      // per rank
  std::vector<Bucket> buckets_;
  size_t next_start_ = 0;  // buckets start in order
  std::vector<float> send_, recv_, reduced_, whole_;
  std::vector<std::vector<float>> scratch_;
  double wait_seconds_ = 0;
};

}  // namespace train
