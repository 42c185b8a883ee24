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

// Small models of the Llama family's shapes (docs/models.md), dropout 0: Llama's (RoPE
// with Llama 3's scaling, 8 query heads over 2 key/value heads, SwiGLU, no biases, an
// untied head), Qwen2's (biases on q, k and v, 6 heads over 3) and Qwen3's (per-head q/k
// norms, heads 16 wide where d_model / n_heads is 12).
inline std::vector<std::pair<std::string, nn::GPTConfig>> llama_family_configs() {
  nn::GPTConfig llama;
  llama.vocab_size = 97, llama.context_length = 48, llama.d_model = 64, llama.n_heads = 8;
  llama.n_layers = 2, llama.d_ff = 96, llama.dropout = 0.0, llama.tie_weights = false;
  llama.norm = nn::NormKind::rms_norm, llama.mlp = nn::MlpKind::swiglu;
  llama.position = nn::PositionKind::rope, llama.n_kv_heads = 2, llama.linear_bias = false;
  llama.rope_theta = 500000, llama.rope_scaling = nn::RopeScaling::llama3;
  llama.rope_factor = 32, llama.rope_original_context = 16;
  nn::GPTConfig qwen2 = llama;
  qwen2.rope_scaling = nn::RopeScaling::none, qwen2.rope_factor = 8;  // the scaling's defaults
  qwen2.rope_original_context = 8192, qwen2.rope_theta = 1e6, qwen2.norm_eps = 1e-6;
  qwen2.n_heads = 6, qwen2.d_model = 48, qwen2.n_kv_heads = 3, qwen2.qkv_bias = true;
  qwen2.tie_weights = true;
  nn::GPTConfig qwen3 = qwen2;
  qwen3.qkv_bias = false, qwen3.qk_norm = true, qwen3.n_heads = 4, qwen3.n_kv_heads = 2;
  qwen3.head_dim = 16;
  return {{"llama", llama}, {"qwen2", qwen2}, {"qwen3", qwen3}};
}

// Every 1-d parameter (gains, biases) of the model drawn around 1, so that none is the
// identity its initialisation makes it.
inline void vary_gains_and_biases(nn::GPT& model, uint64_t seed) {
  ag::NoGradGuard no_grad;
  ag::Generator g(seed);
  for (auto& [name, p] : model.named_parameters())
    if (p.dim() == 1) ag::copy_(p, ag::randn(p.shape(), g) * 0.5 + 1.0);
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
