#pragma once
// Token ids as training material: the spec's split, random-window batches, the spec's
// evaluation windows, and the unigram/bigram baselines a model must beat.
#include <cstdint>
#include <utility>
#include <vector>

#include "autograd/autograd.h"

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
  // inputs [B, T] and targets [B, T] (inputs shifted by one), int64
  std::pair<ag::Tensor, ag::Tensor> next(ag::Generator& gen) const;

 private:
  const std::vector<int64_t>* ids_;
  int64_t batch_, T_;
};

// The spec's evaluation windows over n ids: starts 0, T, 2T, ..., each used only when it
// has T + 1 ids (inputs ids[s, s+T), targets ids[s+1, s+T+1)). Returns {start, T} pairs.
std::vector<std::pair<int64_t, int64_t>> eval_windows(size_t n_ids, int64_t T);

// Cross-entropy (nats) of predicting `ids` from their own frequencies (unigram), and of
// predicting val from train's add-one-smoothed bigram counts.
double unigram_loss(const std::vector<int64_t>& ids, int64_t vocab);
double bigram_loss(const std::vector<int64_t>& train, const std::vector<int64_t>& val,
                   int64_t vocab);

}  // namespace data
