#pragma once
// Gradients of several micro-batches summed in one fixed order, so that the sum depends
// only on the micro-batch indices, never on how the micro-batches were computed (one
// process after another now; spread over processes with MPI later).
//
// The order is the canonical binary tree over indices 0..M-1:
//   sum(b, 1) = g[b]
//   sum(b, n) = sum(b, P) + sum(b + P, n - P),  P the largest power of two below n
// so M = 4 gives (g0 + g1) + (g2 + g3) and M = 3 gives (g0 + g1) + g2. A stack of partial
// sums, like a binary counter, follows that tree while the gradients arrive in order:
// at most floor(log2 M) partial sums are held besides the parameters' own gradients.
//
//   GradAccumulator acc(model.parameters());
//   acc.start();
//   for (int64_t i = 0; i < M; ++i) {
//     forward and backward of micro-batch i;   // each param.grad() holds g[i]
//     if (i + 1 < M) acc.add();                // takes g[i] (the gradients are dropped)
//   }
//   acc.finish();                              // param.grad() holds the tree's sum
#include <cstdint>
#include <vector>

#include "autograd/tensor.h"

namespace train {

// Where the tree splits n >= 2 micro-batches: the largest power of two below n.
int64_t tree_split(int64_t n);

// Partial sums held at once while M micro-batches are summed: floor(log2 M) (0 for M = 1).
int64_t partial_sums_held(int64_t micro_batches);

class GradAccumulator {
 public:
  // float32 parameters; their gradients must be float32 and contiguous (leaf gradients are).
  explicit GradAccumulator(std::vector<ag::Tensor> params);

  void start();   // a new sum: forgets what was added
  void add();     // the gradients now held are the next micro-batch's; they are dropped
  void finish();  // the gradients now held are the last micro-batch's; they become the sum
  // finish() for parameters [begin, end) alone (the sum is final for them; call it once per
  // parameter, then start() before the next sum): a bucket of gradients can be sent while
  // backward still computes the others.
  void finish_params(size_t begin, size_t end);

  int64_t partial_sums_allocated() const { return static_cast<int64_t>(buffers_.size()); }

 private:
  struct Partial {
    int64_t buffer;  // index into buffers_
    int64_t size;    // micro-batches summed: a power of two
  };
  int64_t acquire();
  void add_grads_into(std::vector<float>& sum) const;  // sum = sum + grads
  void copy_grads_to(std::vector<float>& sum) const;
  // grads = left + grads, for parameters [begin, end)
  void add_into_grads(const std::vector<float>& left, size_t begin, size_t end) const;
  static void add_into(std::vector<float>& left, const std::vector<float>& right);

  std::vector<ag::Tensor> params_;
  std::vector<int64_t> offsets_;  // parameter i's elements start at offsets_[i]
  int64_t numel_ = 0;
  std::vector<std::vector<float>> buffers_;  // made once, reused every step
  std::vector<int64_t> free_;
  std::vector<Partial> stack_;  // sizes strictly decreasing from the bottom
};

}  // namespace train
