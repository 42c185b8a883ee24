#pragma once
// What the tests of interop/'s formats share: small random models and exact comparisons.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/bfloat16.h"
#include "cli/cli.h"
#include "decode_support.h"
#include "interop/model_files.h"

namespace interop_test {

// GPT-2's shape in miniature: qkv biases, a tied head, LayerNorm, d_ff = 4 d.
inline nn::GPTConfig gpt2_like(int64_t vocab, int64_t context, int64_t d_model, int64_t heads,
                               int64_t layers) {
  nn::GPTConfig c;
  c.vocab_size = vocab, c.context_length = context, c.d_model = d_model;
  c.n_heads = heads, c.n_layers = layers;
  c.qkv_bias = true, c.tie_weights = true;
  return c;
}

// Llama-, Qwen2- and Qwen3-shaped configs in miniature, named by llama.cpp's architecture for
// them: grouped heads, a llama3-scaled rope and an untied head (llama), qkv biases (qwen2), q/k
// norms and a head_dim of their own (qwen3); at the dropout an import gives.
inline std::vector<std::pair<std::string, nn::GPTConfig>> llama_family_like() {
  auto configs = ag_test::llama_family_configs();
  for (auto& [name, cfg] : configs) cfg.dropout = nn::GPTConfig().dropout;
  return configs;
}

// attograd's command line run in the test's process, as `attograd ARGS...`: its exit status.
inline int run_cli(std::vector<std::string> args) {
  std::vector<char*> argv = {const_cast<char*>("attograd")};
  for (auto& a : args) argv.push_back(a.data());
  return cli::cli_main(static_cast<int>(argv.size()), argv.data());
}

// Every parameter of the config, random (gains and biases too, so that no mapping error
// hides behind ones and zeros), in GPT(config)'s order.
inline interop::ModelFiles random_model(const nn::GPTConfig& config, unsigned seed) {
  interop::ModelFiles m;
  m.config = config;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  for (const auto& [name, shape] : config.parameter_shapes()) {
    ag::Tensor t = ag::empty(shape);
    float* v = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = normal(rng);
    m.weights.emplace_back(name, t);
  }
  return m;
}

// The model with every weight rounded to the nearest bfloat16 (ties to even).
inline interop::ModelFiles bf16_rounded(interop::ModelFiles m) {
  for (auto& [name, t] : m.weights) {
    ag::Tensor r = t.clone();
    float* v = r.data<float>();
    for (int64_t i = 0; i < r.numel(); ++i) v[i] = ag::bf16_rounded(v[i]);
    t = r;
  }
  return m;
}

inline bool same_bits(const ag::Tensor& a, const ag::Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const ag::Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data<float>(), y.data<float>(), static_cast<size_t>(x.numel()) * 4) == 0;
}

// Every key of config_fields() equal.
inline void require_same_config(const nn::GPTConfig& a, const nn::GPTConfig& b) {
  for (const auto& f : nn::config_fields()) {
    INFO("config key " << f.key);
    std::visit([&](auto member) { REQUIRE(a.*member == b.*member); }, f.member);
  }
}

// The same parameters, in the same order, bit for bit.
inline void require_same_weights(const interop::ModelFiles& a, const interop::ModelFiles& b) {
  REQUIRE(a.weights.size() == b.weights.size());
  for (size_t i = 0; i < a.weights.size(); ++i) {
    INFO("tensor " << a.weights[i].first);
    REQUIRE(a.weights[i].first == b.weights[i].first);
    REQUIRE(same_bits(a.weights[i].second, b.weights[i].second));
  }
}

}  // namespace interop_test
