#pragma once
// Models and token rows shared by the decoding and generation tests.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/nn.h"

namespace ag_test {

// docs/model.md's default model and docs/performance.md's base config (T 256, d 256,
// 8 heads, 6 layers), dropout 0, the built-in corpus's vocabulary size.
inline std::vector<std::pair<std::string, nn::GPTConfig>> decode_configs() {
  nn::GPTConfig def;
  def.vocab_size = 65;
  def.dropout = 0.0;
  nn::GPTConfig base = def;
  base.context_length = 256, base.d_model = 256, base.n_heads = 8, base.n_layers = 6;
  return {{"default", def}, {"base", base}};
}

// A randomly initialised model (eval mode) whose weights are scaled up by `gain`, so that
// its logits are far from flat and its greedy continuations wander instead of repeating
// one token: at GPT-2's initialisation every logit is within a few hundredths of the
// others, and a comparison of greedy paths would hinge on near-ties.
inline std::unique_ptr<nn::GPT> sharp_model(const nn::GPTConfig& cfg, uint64_t seed,
                                            double gain = 6.0) {
  auto model = std::make_unique<nn::GPT>(cfg, seed);
  model->eval();
  ag::NoGradGuard no_grad;
  for (auto& [name, p] : model->named_parameters())
    if (p.dim() == 2) ag::copy_(p, p * gain);
  return model;
}

inline std::vector<int64_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  ag::Generator g(seed);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<int64_t>(g.next_u64() % static_cast<uint64_t>(vocab));
  return v;
}

// GPT::forward's logits of one row, [T, V].
inline ag::Tensor forward_logits(const nn::GPT& model, const std::vector<int64_t>& row) {
  ag::NoGradGuard no_grad;
  const auto T = static_cast<int64_t>(row.size());
  return model.forward(ag::from_vector(row, {1, T})).logits.select(0, 0).contiguous();
}

}  // namespace ag_test
