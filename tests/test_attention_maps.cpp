// nn::attention_maps: the weights every head puts on every key, as the chapter prints them,
// held against the fused attention they must reproduce.
#include <catch2/catch.hpp>
#include <cmath>

#include "nn/nn.h"
#include "support.h"

using ag::Tensor;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;

namespace {

// Weights drawn far from the GPT-2 init, where attention is nearly uniform and a wrong
// scale or mask would pass unnoticed.
void perturb(nn::GPT& model, uint64_t seed) {
  ag::NoGradGuard no_grad;
  ag::Generator gen(seed);
  for (auto& [name, p] : model.named_parameters())
    ag::add_(p, ag::normal(p.shape(), 0.0, 0.4, gen));
}

std::unique_ptr<nn::GPT> perturbed_gpt(double dropout) {
  auto model = std::make_unique<nn::GPT>(ag_test::gpt_config(13, 12, 16, 4, 3, dropout), 7);
  perturb(*model, 99);
  return model;
}

const std::vector<int64_t> kIds{3, 1, 4, 1, 5, 9, 2, 6, 5, 3};

}  // namespace

TEST_CASE("attention weights: every row sums to 1 and the future is exactly 0",
          "[attention_maps]") {
  const auto model = perturbed_gpt(0.0);
  const nn::AttentionMaps maps = nn::attention_maps(*model, kIds);
  REQUIRE(maps.weights.size() == 3);
  const int64_t T = static_cast<int64_t>(kIds.size());
  double largest = 0;
  for (const Tensor& w : maps.weights) {
    REQUIRE(w.shape() == ag::Shape{4, T, T});
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t i = 0; i < T; ++i) {
        double row = 0;
        for (int64_t j = 0; j < T; ++j) {
          const double v = w.at({h, i, j});
          if (j > i) REQUIRE(v == 0.0);  // exactly: exp(-inf) is 0
          REQUIRE(v >= 0.0);
          row += v;
          if (j < i) largest = std::max(largest, v);
        }
        REQUIRE_THAT(row, WithinAbs(1.0, 1e-6));
      }
  }
  REQUIRE(largest > 0.5);  // the perturbed heads are far from uniform
}

TEST_CASE("attention weights times V reproduce the fused causal attention", "[attention_maps]") {
  ag::Generator gen(5);
  auto dropout_gen = std::make_shared<ag::Generator>(1);
  nn::MultiHeadAttention mha(8, 12, 9, 0.0, 3, true, gen, dropout_gen);
  const Tensor x = ag::randn({2, 9, 8}, gen) * 2.0;
  const Tensor w = nn::attention_weights(mha, x);  // [2, 3, 9, 9]
  REQUIRE(w.shape() == ag::Shape{2, 3, 9, 9});
  REQUIRE_FALSE(w.requires_grad());
  ag::NoGradGuard no_grad;
  const Tensor v = mha.W_value->forward(x).reshape({2, 9, 3, 4}).transpose(1, 2);
  const Tensor context = ag::matmul(w, v).transpose(1, 2).reshape({2, 9, 12});
  const Tensor fused = ag::causal_self_attention(mha.qkv->forward(x), 3, 0.0, nullptr);
  ag_test::require_values(context, fused.to_vector(), 2e-6);
}

TEST_CASE("attention maps' logits equal GPT::forward's", "[attention_maps]") {
  const auto model = perturbed_gpt(0.0);
  model->eval();
  const nn::AttentionMaps maps = nn::attention_maps(*model, kIds);
  ag::NoGradGuard no_grad;
  const int64_t T = static_cast<int64_t>(kIds.size());
  const Tensor logits = model->forward(ag::from_vector(kIds, {1, T})).logits.select(0, 0);
  REQUIRE(maps.logits.shape() == ag::Shape{T, 13});
  ag_test::require_values(maps.logits, logits.to_vector(), 2e-5);
}

TEST_CASE("attention maps ignore dropout and train mode", "[attention_maps]") {
  const auto model = perturbed_gpt(0.5);
  model->train();
  const nn::AttentionMaps in_training = nn::attention_maps(*model, kIds);
  model->eval();
  const nn::AttentionMaps in_eval = nn::attention_maps(*model, kIds);
  for (size_t l = 0; l < in_eval.weights.size(); ++l)
    REQUIRE(ag_test::bit_equal(in_training.weights[l], in_eval.weights[l]));
  REQUIRE(ag_test::bit_equal(in_training.logits, in_eval.logits));
}

TEST_CASE("attention maps of a prefix are the top-left corner of the longer sequence's",
          "[attention_maps]") {
  const auto model = perturbed_gpt(0.0);
  const nn::AttentionMaps full = nn::attention_maps(*model, kIds);
  const std::vector<int64_t> prefix(kIds.begin(), kIds.begin() + 4);
  const nn::AttentionMaps part = nn::attention_maps(*model, prefix);
  for (size_t l = 0; l < full.weights.size(); ++l)
    ag_test::require_values(part.weights[l],
                            full.weights[l].narrow(1, 0, 4).narrow(2, 0, 4).to_vector(), 1e-6);
}

TEST_CASE("attention maps refuse an empty, too long or out-of-vocabulary sequence",
          "[attention_maps]") {
  const auto model = perturbed_gpt(0.0);
  REQUIRE_THROWS_WITH(nn::attention_maps(*model, {}),
                      Contains("0 tokens") && Contains("context_length 12"));
  REQUIRE_THROWS_WITH(nn::attention_maps(*model, std::vector<int64_t>(13, 1)),
                      Contains("13 tokens"));
  REQUIRE_THROWS_WITH(nn::attention_maps(*model, {1, 2, 13}),
                      Contains("token 2 has id 13") && Contains("vocabulary of 13"));
  REQUIRE_THROWS_WITH(nn::attention_maps(*model, {-1}), Contains("id -1"));
}
