// MultiHeadAttention's fused projection: linear over stacked weights is cat-then-linear bit
// for bit, gradient-checks in float64, and the attention module computes the same graph
// with anomaly detection on as off, with the projection named attn.qkv.
#include <catch2/catch.hpp>

#include "autograd/autograd.h"
#include "gradcheck_helpers.h"
#include "nn/attention.h"
#include "support.h"

using ag::DType;
using ag::Tensor;
using Catch::Matchers::Contains;

namespace {

std::vector<Tensor> qkv_grads_of(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const auto& t : ts) {
    out.push_back(t.grad().defined() ? t.grad().clone() : Tensor());
    t.zero_grad();
  }
  return out;
}

}  // namespace

TEST_CASE("linear over stacked weights equals cat then linear bit for bit", "[linear][qkv]") {
  const bool with_bias = GENERATE(true, false);
  CAPTURE(with_bias);
  ag::Generator gen(43);
  Tensor x = ag::randn({2, 5, 6}, gen).requires_grad_();
  std::vector<Tensor> w, b;
  for (int64_t n : {4, 4, 3}) {
    w.push_back(ag::randn({n, 6}, gen).requires_grad_());
    b.push_back(ag::randn({n}, gen).requires_grad_());
  }
  if (!with_bias) b.clear();
  Tensor upstream = ag::randn({2, 5, 11}, gen);
  std::vector<Tensor> leaves{x};
  leaves.insert(leaves.end(), w.begin(), w.end());
  leaves.insert(leaves.end(), b.begin(), b.end());

  Tensor stacked = ag::linear(x, w, b);
  ag::sum(stacked * upstream).backward();
  std::vector<Tensor> stacked_grads = qkv_grads_of(leaves);
  Tensor composed = ag::linear(x, ag::cat(w, 0), with_bias ? ag::cat(b, 0) : Tensor());
  ag::sum(composed * upstream).backward();
  std::vector<Tensor> composed_grads = qkv_grads_of(leaves);

  REQUIRE(ag_test::bit_equal(stacked, composed));
  for (size_t i = 0; i < leaves.size(); ++i) {
    INFO("gradient of leaf " << i);
    REQUIRE(ag_test::bit_equal(stacked_grads[i], composed_grads[i]));
  }
}

TEST_CASE("gradcheck linear over stacked weights", "[gradcheck][linear][qkv]") {
  ag::Generator gen(44);
  const bool with_bias = GENERATE(true, false);
  CAPTURE(with_bias);
  std::vector<Tensor> in{ag_test::randn_leaf({2, 3, 4}, gen)};
  for (int64_t n : {2, 3}) in.push_back(ag_test::randn_leaf({n, 4}, gen));
  if (with_bias)
    for (int64_t n : {2, 3}) in.push_back(ag_test::randn_leaf({n}, gen));
  REQUIRE_GRADCHECK(
      [](const std::vector<Tensor>& t) {
        std::vector<Tensor> biases(t.begin() + 3, t.end());
        return ag::linear(t[0], {t[1], t[2]}, biases);
      },
      in);
}

TEST_CASE("linear over stacked weights refuses parts that do not fit", "[linear][qkv]") {
  ag::Generator gen(45);
  Tensor x = ag::randn({2, 4}, gen);
  Tensor w = ag::randn({3, 4}, gen), b = ag::randn({3}, gen);
  REQUIRE_THROWS_WITH(ag::linear(x, std::vector<Tensor>{}), Contains("no weights"));
  REQUIRE_THROWS_WITH(ag::linear(x, {w, w}, {b}), Contains("1 biases for 2 weights"));
  REQUIRE_THROWS_WITH(ag::linear(x, {w, ag::randn({3, 5}, gen)}), Contains("[3, 5]"));
  REQUIRE_THROWS_WITH(ag::linear(x, {w, w}, {b, ag::randn({2}, gen)}),
                      Contains("bias [2] for 3 outputs"));
}

TEST_CASE("MultiHeadAttention computes the same bits with anomaly detection on",
          "[nn][attention][anomaly][qkv]") {
  const bool qkv_bias = GENERATE(true, false);
  CAPTURE(qkv_bias);
  auto run = [&](bool detect) {
    ag::Generator gen(46);
    nn::MultiHeadAttention mha(4, 6, 5, 0.2, 2, qkv_bias, gen, std::make_shared<ag::Generator>(3));
    Tensor x = ag::randn({2, 5, 4}, gen);
    ag::set_detect_anomaly(detect);
    Tensor y = mha.forward(x);
    ag::sum(y * y).backward();
    ag::set_detect_anomaly(false);
    std::vector<Tensor> out{y};
    for (const auto& p : mha.parameters()) out.push_back(p.grad());
    return out;
  };
  std::vector<Tensor> off = run(false), on = run(true);
  REQUIRE(off.size() == on.size());
  for (size_t i = 0; i < off.size(); ++i) {
    INFO("tensor " << i);
    REQUIRE(ag_test::bit_equal(off[i], on[i]));
  }
}

TEST_CASE("the fused projection is the module attn.qkv and owns no parameters", "[nn][qkv]") {
  nn::GPT model(ag_test::gpt_config(11, 8, 8, 2, 1, 0.0), 1);
  const auto paths = model.module_paths();
  REQUIRE(std::find(paths.begin(), paths.end(), "blocks.0.attn.qkv") != paths.end());
  REQUIRE(model.blocks->operator[](0).attn->qkv->named_parameters().empty());
  for (const auto& [name, p] : model.named_parameters()) REQUIRE_THAT(name, !Contains("qkv"));
}
