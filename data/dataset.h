#pragma once
// Token ids as training material: the train/validation split, random-window batches, the
// evaluation windows (all three as docs/model.md defines them), and the unigram/bigram
// baselines a model must beat.
#include <cstdint>
#include <utility>
#include <vector>

#include "autograd/autograd.h"
#include "data/token_store.h"

namespace data {

struct Split {
  std::vector<int64_t> train, val;
};
// The last val_fraction of the ids is validation, everything before it training.
Split split_tokens(const std::vector<int64_t>& ids, double val_fraction);
Split split_tokens(std::vector<int64_t>&& ids, double val_fraction);  // reuses ids' storage

// B windows of T+1 consecutive ids, each starting uniformly in [0, n - T - 1].
class BatchSampler {
 public:
  BatchSampler(const std::vector<int64_t>* ids, int64_t batch_size, int64_t context_length);
  // The same windows from a store (mapped or owned): for one generator state, the batches
  // equal those of the vector constructor over the same ids. The store must outlive this.
  BatchSampler(const TokenStore* ids, int64_t batch_size, int64_t context_length);
  // inputs [B, T] and targets [B, T] (inputs shifted by one), int64
  std::pair<ag::Tensor, ag::Tensor> next(ag::Generator& gen) const;
  // Advances gen past one batch (what next() would draw) without reading any ids.
  void skip(ag::Generator& gen) const;

 private:
  size_t size() const { return store_ ? store_->size() : ids_->size(); }
  const std::vector<int64_t>* ids_ = nullptr;
  const TokenStore* store_ = nullptr;
  int64_t batch_, T_;
};

// docs/model.md's evaluation windows over n ids: starts 0, T, 2T, ..., each used only when
// it has T + 1 ids (inputs ids[s, s+T), targets ids[s+1, s+T+1)). Returns {start, T} pairs.
std::vector<std::pair<int64_t, int64_t>> eval_windows(size_t n_ids, int64_t T);

// The same windows, computed when asked: nothing is allocated per window, so a validation
// set of 1e9 tokens costs nothing to walk.
//
//   data::EvalWindows windows(val.size(), T);
//   for (int64_t w = 0; w < windows.count(); w += 16) {
//     auto [x, y] = windows.batch(val, w, std::min<int64_t>(16, windows.count() - w));
//     ...
//   }
class EvalWindows {
 public:
  EvalWindows(size_t n_ids, int64_t T);  // T <= 0 gives no windows, as eval_windows does
  int64_t count() const { return count_; }
  int64_t context_length() const { return T_; }
  // Window w as eval_windows() gives it: {start, T}.
  std::pair<int64_t, int64_t> operator[](int64_t w) const { return {w * T_, T_}; }
  // Windows [first, first + n) of ids: inputs into x and targets into y, [n, T] each.
  void copy(const TokenStore& ids, int64_t first, int64_t n, int64_t* x, int64_t* y) const;
  std::pair<ag::Tensor, ag::Tensor> batch(const TokenStore& ids, int64_t first, int64_t n) const;

 private:
  int64_t T_ = 0, count_ = 0;
};

// Cross-entropy (nats) of predicting `ids` from their own frequencies (unigram), and of
// predicting val from train's add-one-smoothed bigram counts.
double unigram_loss(const std::vector<int64_t>& ids, int64_t vocab);
double bigram_loss(const std::vector<int64_t>& train, const std::vector<int64_t>& val,
                   int64_t vocab);

}  // namespace data
