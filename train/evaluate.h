#pragma once
// The spec's evaluation loss: windows at 0, T, 2T, ... with T+1 ids, mean cross-entropy
// over every target, dropout off.
#include <functional>
#include <span>
#include <string>
#include <utility>

#include "nn/gpt.h"

namespace train {

// max_windows 0 means all. Returns {loss, tokens}. cancelled, asked between batches,
// abandons the evaluation ({NaN, 0}).
std::pair<double, int64_t> evaluate(nn::GPT& model, std::span<const int64_t> ids,
                                    int64_t max_windows = 0,
                                    const std::function<bool()>& cancelled = {});

struct EvalResult {
  double loss = 0;
  int64_t tokens = 0, windows = 0;
};
// The same loss with windows of T tokens (0: the model's context_length); with
// grads_path, d loss / d parameter for every parameter is written there as an HDF5 file
// whose /model/<name> datasets hold the gradients, named as the checkpoint's weights.
EvalResult evaluate_with_grads(nn::GPT& model, std::span<const int64_t> ids, int64_t T,
                               const std::string* grads_path,
                               const std::function<bool()>& cancelled = {});

}  // namespace train
