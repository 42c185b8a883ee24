// The attention chapter's classes as modules: Exercise 3.1 (v1 and v2 agree once weights
// are moved across), the wrapper and the efficient MultiHeadAttention agree, causality is
// exact (later tokens cannot change earlier outputs by a single bit), sequence-length and
// head-count errors, and dropout's train/eval behaviour.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <vector>

#include "autograd/autograd.h"
#include "nn/nn.h"
#include "support.h"

using ag::DType;
using ag::Tensor;
using ag_test::bit_equal;
using ag_test::max_abs_diff;
using Catch::Matchers::Contains;

namespace {

Tensor nn_chapter_inputs(DType dtype = DType::Float32) {
  return ag::tensor({{0.43, 0.15, 0.89},   // Your     (x^1)
                     {0.55, 0.87, 0.66},   // journey  (x^2)
                     {0.57, 0.85, 0.64},   // starts   (x^3)
                     {0.22, 0.58, 0.33},   // with     (x^4)
                     {0.77, 0.25, 0.10},   // one      (x^5)
                     {0.05, 0.80, 0.55}},  // step     (x^6)
                    dtype);
}

Tensor chapter_batch(DType dtype = DType::Float32) {
  return ag::stack({nn_chapter_inputs(dtype), nn_chapter_inputs(dtype)}, 0);  // [2, 6, 3]
}

// out and changed: [B, T, C] outputs for inputs that differ only at position t (in every
// batch row). Every output before t must be bit-for-bit the same; position t must move.
void require_causal_change(const Tensor& out, const Tensor& changed, int64_t t) {
  REQUIRE(out.shape() == changed.shape());
  const int64_t B = out.shape()[0], C = out.shape()[2];
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < t; ++i)
      for (int64_t c = 0; c < C; ++c) {
        INFO("batch " << b << " position " << i << " channel " << c << " after changing " << t);
        REQUIRE(out.at({b, i, c}) == changed.at({b, i, c}));
      }
    bool moved = false;
    for (int64_t c = 0; c < C; ++c) moved |= out.at({b, t, c}) != changed.at({b, t, c});
    INFO("batch " << b << " position " << t);
    REQUIRE(moved);
  }
}

// x with every batch row's token t replaced by fresh values.
Tensor change_position(const Tensor& x, int64_t t, ag::Generator& gen) {
  Tensor y = x.detach().clone();
  Tensor row = y.narrow(1, t, 1);
  ag::copy_(row, ag::randn(row.shape(), gen, x.dtype()));
  return y;
}

// Checks causality of f on a [B, T, d_in] input for every position t >= 1.
template <typename F>
void check_causality(F&& f, const Tensor& x, ag::Generator& gen) {
  Tensor out = f(x);
  for (int64_t t = 1; t < x.shape()[1]; ++t)
    require_causal_change(out, f(change_position(x, t, gen)), t);
}

nn::GPTConfig tiny_gpt_config(double dropout) {
  nn::GPTConfig cfg;
  cfg.vocab_size = 13;
  cfg.context_length = 6;
  cfg.d_model = 8;
  cfg.n_heads = 2;
  cfg.n_layers = 2;
  cfg.dropout = dropout;
  return cfg;
}

}  // namespace

// ------------------------------------------------------------------ Exercise 3.1

TEST_CASE("exercise 3.1: SelfAttention_v1 with v2's transposed weights gives v2's output",
          "[nn][attention]") {
  ag::Generator gen_v1(123), gen_v2(789);
  nn::SelfAttention_v1 v1(3, 2, gen_v1);
  nn::SelfAttention_v2 v2(3, 2, /*qkv_bias=*/false, gen_v2);
  Tensor x = nn_chapter_inputs();
  REQUIRE(max_abs_diff(v1.forward(x), v2.forward(x)) > 1e-3);  // different weights at first
  // nn.Linear stores [out, in]; v1 multiplies by a raw [in, out] matrix
  v1.load_state_dict({{"W_query", v2.W_query->weight.t()},
                      {"W_key", v2.W_key->weight.t()},
                      {"W_value", v2.W_value->weight.t()}});
  REQUIRE(v1.W_query.shape() == ag::Shape{3, 2});
  REQUIRE(v1.W_query.at({2, 1}) == v2.W_query->weight.at({1, 2}));
  Tensor out = v1.forward(x);
  REQUIRE(out.shape() == ag::Shape{6, 2});
  // Same arithmetic in float32, only BLAS's operand layout differs (x W vs x (W^T)^T):
  // outputs of size ~0.5 agree to a few float32 roundings (6e-8 each), so 1e-6.
  ag_test::require_values(out, v2.forward(x).to_vector(), 1e-6);
}

// ------------------------------------------------------------------ wrapper vs efficient MHA

TEST_CASE("MultiHeadAttentionWrapper and MultiHeadAttention agree after weight transfer",
          "[nn][attention]") {
  for (int64_t heads : {2, 3}) {
    for (bool bias : {false, true}) {
      INFO(heads << " heads, qkv_bias " << bias);
      const int64_t d_in = 3, head_out = 2, T = 6;
      ag::Generator gen(heads * 10 + bias);
      nn::MultiHeadAttentionWrapper wrapper(d_in, head_out, T, 0.0, heads, bias, gen, nullptr);
      nn::MultiHeadAttention mha(d_in, head_out * heads, T, 0.0, heads, bias, gen, nullptr);
      wrapper.to(DType::Float64);
      mha.to(DType::Float64);
      Tensor x = ag::randn({2, T, d_in}, gen, DType::Float64);
      REQUIRE(max_abs_diff(wrapper.forward(x), mha.forward(x)) > 1e-3);

      // head h's projection becomes rows [h*head_out, (h+1)*head_out) of MHA's
      auto gather = [&](auto member, bool want_bias) {
        std::vector<Tensor> parts;
        for (const auto& head : *wrapper.heads) {
          const nn::Linear& lin = *((*head).*member);
          parts.push_back(want_bias ? lin.bias : lin.weight);
        }
        return ag::cat(parts, 0);
      };
      const int64_t d_out = head_out * heads;
      nn::StateDict state{{"W_query.weight", gather(&nn::CausalAttention::W_query, false)}};
      if (bias) state.emplace_back("W_query.bias", gather(&nn::CausalAttention::W_query, true));
      state.emplace_back("W_key.weight", gather(&nn::CausalAttention::W_key, false));
      if (bias) state.emplace_back("W_key.bias", gather(&nn::CausalAttention::W_key, true));
      state.emplace_back("W_value.weight", gather(&nn::CausalAttention::W_value, false));
      if (bias) state.emplace_back("W_value.bias", gather(&nn::CausalAttention::W_value, true));
      Tensor eye = ag::zeros({d_out, d_out}, DType::Float64);
      for (int64_t i = 0; i < d_out; ++i) eye.set({i, i}, 1.0);
      state.emplace_back("out_proj.weight", eye);
      state.emplace_back("out_proj.bias", ag::zeros({d_out}, DType::Float64));
      mha.load_state_dict(state);

      Tensor a = wrapper.forward(x), b = mha.forward(x);
      REQUIRE(a.shape() == ag::Shape{2, T, d_out});
      REQUIRE(b.shape() == a.shape());
      // float64: composed ops vs the fused kernel differ only in summation order (~1e-16
      // relative on O(1) values); a head in the wrong place would be off by O(0.1)
      ag_test::require_values(b, a.to_vector(), 1e-12);
    }
  }
}

// ------------------------------------------------------------------ causality

TEST_CASE("CausalAttention outputs before a changed token are bit-for-bit unchanged",
          "[nn][attention][causal]") {
  ag::Generator gen(21);
  nn::CausalAttention attn(3, 4, 6, 0.0, /*qkv_bias=*/true, gen, nullptr);
  check_causality([&](const Tensor& x) { return attn.forward(x); }, ag::randn({2, 6, 3}, gen), gen);
  // with dropout in eval mode as well
  nn::CausalAttention dropped(3, 4, 6, 0.5, false, gen, std::make_shared<ag::Generator>(1));
  dropped.eval();
  check_causality([&](const Tensor& x) { return dropped.forward(x); }, ag::randn({2, 6, 3}, gen),
                  gen);
}

TEST_CASE("MultiHeadAttention outputs before a changed token are bit-for-bit unchanged",
          "[nn][attention][causal]") {
  ag::Generator gen(22);
  nn::MultiHeadAttention attn(3, 4, 6, 0.0, 2, /*qkv_bias=*/true, gen, nullptr);
  check_causality([&](const Tensor& x) { return attn.forward(x); }, ag::randn({2, 6, 3}, gen), gen);
  nn::MultiHeadAttention dropped(3, 6, 6, 0.3, 3, false, gen, std::make_shared<ag::Generator>(1));
  dropped.eval();
  check_causality([&](const Tensor& x) { return dropped.forward(x); }, ag::randn({2, 6, 3}, gen),
                  gen);
  // float64 too
  attn.to(DType::Float64);
  check_causality([&](const Tensor& x) { return attn.forward(x); },
                  ag::randn({2, 6, 3}, gen, DType::Float64), gen);
}

TEST_CASE("MultiHeadAttentionWrapper outputs before a changed token are unchanged",
          "[nn][attention][causal]") {
  ag::Generator gen(23);
  nn::MultiHeadAttentionWrapper attn(3, 2, 6, 0.0, 2, false, gen, nullptr);
  check_causality([&](const Tensor& x) { return attn.forward(x); }, ag::randn({2, 6, 3}, gen), gen);
}

TEST_CASE("GPT logits before a changed token are bit-for-bit unchanged",
          "[nn][attention][causal][gpt]") {
  // dropout 0 in train mode, and dropout 0.2 in eval mode
  for (double p : {0.0, 0.2}) {
    INFO("dropout " << p);
    nn::GPT model(tiny_gpt_config(p), 5);
    if (p > 0) model.eval();
    const int64_t V = model.config().vocab_size;
    std::vector<int64_t> ids{3, 7, 1, 12, 0, 5, 9, 2, 2, 4, 11, 6};
    Tensor base = ag::from_vector(ids, {2, 6});
    Tensor logits = model.forward(base).logits;
    REQUIRE(logits.shape() == ag::Shape{2, 6, V});
    for (int64_t t = 1; t < 6; ++t) {
      std::vector<int64_t> changed = ids;
      changed[t] = (changed[t] + 1) % V;
      changed[6 + t] = (changed[6 + t] + 5) % V;
      require_causal_change(logits, model.forward(ag::from_vector(changed, {2, 6})).logits, t);
    }
  }
}

// ------------------------------------------------------------------ errors

TEST_CASE("d_out not divisible by num_heads is an error naming both numbers",
          "[nn][attention][errors]") {
  ag::Generator gen(31);
  REQUIRE_THROWS_WITH(nn::MultiHeadAttention(3, 5, 6, 0.0, 2, false, gen, nullptr),
                      Contains("d_out (5)") && Contains("num_heads (2)"));
  REQUIRE_THROWS_WITH(nn::MultiHeadAttention(3, 4, 6, 0.0, 0, false, gen, nullptr),
                      Contains("num_heads (0)"));
  nn::GPTConfig cfg = tiny_gpt_config(0.0);
  cfg.d_model = 10;
  cfg.n_heads = 4;
  REQUIRE_THROWS_WITH(cfg.validate(), Contains("d_model (10)") && Contains("n_heads (4)"));
  REQUIRE_THROWS_WITH(nn::GPT(cfg, 1), Contains("d_model (10)") && Contains("n_heads (4)"));
}

TEST_CASE("a sequence longer than context_length is an error naming both lengths",
          "[nn][attention][errors]") {
  ag::Generator gen(32);
  Tensor x = ag::randn({1, 6, 3}, gen);
  nn::CausalAttention ca(3, 2, 4, 0.0, false, gen, nullptr);
  REQUIRE_THROWS_WITH(ca.forward(x), Contains("6 tokens") && Contains("context_length 4"));
  nn::MultiHeadAttention mha(3, 4, 5, 0.0, 2, false, gen, nullptr);
  REQUIRE_THROWS_WITH(mha.forward(x), Contains("6 tokens") && Contains("context_length 5"));
  nn::MultiHeadAttentionWrapper wrapper(3, 2, 4, 0.0, 2, false, gen, nullptr);
  REQUIRE_THROWS_WITH(wrapper.forward(x), Contains("6 tokens") && Contains("context_length 4"));
  nn::GPT model(tiny_gpt_config(0.0), 1);
  Tensor ids = ag::from_vector(std::vector<int64_t>(7, 1), {1, 7});
  REQUIRE_THROWS_WITH(model.forward(ids), Contains("7 tokens") && Contains("context_length 6"));
}

TEST_CASE("attention input of the wrong rank or width is an error naming the shape",
          "[nn][attention][errors]") {
  ag::Generator gen(33);
  nn::CausalAttention ca(3, 2, 6, 0.0, false, gen, nullptr);
  REQUIRE_THROWS_WITH(ca.forward(ag::zeros({6, 3})), Contains("[6, 3]"));
  nn::MultiHeadAttention mha(3, 4, 6, 0.0, 2, false, gen, nullptr);
  REQUIRE_THROWS_WITH(mha.forward(ag::zeros({1, 6, 4})), Contains("[1, 6, 4]"));
}

TEST_CASE("sequences shorter than context_length work and match the longer prefix",
          "[nn][attention]") {
  ag::Generator gen(34);
  Tensor full = ag::randn({2, 6, 3}, gen);
  Tensor shorter = full.narrow(1, 0, 3).contiguous();
  // float32: the two calls use different GEMM shapes, so rounding may differ by a few ulps
  // of O(1) values; 1e-6 is far below a masking error (O(0.1))
  auto check = [&](auto& module, int64_t d_out) {
    Tensor out = module.forward(shorter);
    REQUIRE(out.shape() == ag::Shape{2, 3, d_out});
    ag_test::require_values(out, module.forward(full).narrow(1, 0, 3).to_vector(), 1e-6);
  };
  nn::CausalAttention ca(3, 2, 6, 0.0, false, gen, nullptr);
  check(ca, 2);
  nn::MultiHeadAttention mha(3, 4, 6, 0.0, 2, false, gen, nullptr);
  check(mha, 4);
  nn::MultiHeadAttentionWrapper wrapper(3, 2, 6, 0.0, 2, false, gen, nullptr);
  check(wrapper, 4);
  nn::GPT model(tiny_gpt_config(0.0), 2);
  std::vector<int64_t> ids{3, 7, 1, 12, 0, 5, 9, 2, 2, 4, 11, 6};
  Tensor logits = model.forward(ag::from_vector(ids, {2, 6})).logits;
  Tensor short_logits =
      model.forward(ag::from_vector(std::vector<int64_t>{3, 7, 1, 9, 2, 2}, {2, 3})).logits;
  REQUIRE(short_logits.shape() == ag::Shape{2, 3, 13});
  ag_test::require_values(short_logits, logits.narrow(1, 0, 3).to_vector(), 1e-5);
}

// ------------------------------------------------------------------ dropout modes

TEST_CASE("attention dropout changes train output while eval is deterministic and dropout-free",
          "[nn][attention][dropout]") {
  ag::Generator x_gen(41);
  Tensor x = ag::randn({2, 6, 3}, x_gen);
  auto check = [&](auto& dropped, auto& plain) {
    // eval: deterministic, and equal to the same weights without dropout
    dropped.eval();
    Tensor e1 = dropped.forward(x), e2 = dropped.forward(x);
    REQUIRE(bit_equal(e1, e2));
    REQUIRE(bit_equal(e1, plain.forward(x)));
    // train: differs from eval, and two calls draw different masks
    dropped.train();
    Tensor t1 = dropped.forward(x), t2 = dropped.forward(x);
    REQUIRE_FALSE(bit_equal(t1, e1));
    REQUIRE_FALSE(bit_equal(t1, t2));
  };
  SECTION("CausalAttention") {
    ag::Generator g1(1), g2(1);  // same seed: same weights (dropout draws nothing at init)
    nn::CausalAttention dropped(3, 2, 6, 0.5, false, g1, std::make_shared<ag::Generator>(3));
    nn::CausalAttention plain(3, 2, 6, 0.0, false, g2, nullptr);
    check(dropped, plain);
  }
  SECTION("MultiHeadAttentionWrapper") {
    ag::Generator g1(1), g2(1);
    nn::MultiHeadAttentionWrapper dropped(3, 2, 6, 0.5, 2, false, g1,
                                          std::make_shared<ag::Generator>(3));
    nn::MultiHeadAttentionWrapper plain(3, 2, 6, 0.0, 2, false, g2, nullptr);
    check(dropped, plain);
  }
  SECTION("MultiHeadAttention") {
    ag::Generator g1(1), g2(1);
    nn::MultiHeadAttention dropped(3, 4, 6, 0.5, 2, false, g1, std::make_shared<ag::Generator>(3));
    nn::MultiHeadAttention plain(3, 4, 6, 0.0, 2, false, g2, nullptr);
    check(dropped, plain);
  }
}

TEST_CASE("attention dropout masks replay when the dropout generator is re-seeded",
          "[nn][attention][dropout]") {
  ag::Generator gen(42);
  Tensor x = ag::randn({2, 6, 3}, gen);
  auto dg = std::make_shared<ag::Generator>(0);
  nn::CausalAttention ca(3, 2, 6, 0.5, false, gen, dg);
  nn::MultiHeadAttention mha(3, 4, 6, 0.5, 2, false, gen, dg);
  dg->manual_seed(9);
  Tensor a1 = ca.forward(x), m1 = mha.forward(x);
  dg->manual_seed(9);
  Tensor a2 = ca.forward(x), m2 = mha.forward(x);
  REQUIRE(bit_equal(a1, a2));
  REQUIRE(bit_equal(m1, m2));
  Tensor a3 = ca.forward(x);  // the generator moved on
  REQUIRE_FALSE(bit_equal(a1, a3));
}

TEST_CASE("GPT with dropout differs between train and eval and eval is deterministic",
          "[nn][attention][dropout][gpt]") {
  nn::GPT model(tiny_gpt_config(0.2), 7);
  Tensor ids = ag::from_vector(std::vector<int64_t>{3, 7, 1, 12, 0, 5, 9, 2, 2, 4, 11, 6}, {2, 6});
  model.eval();
  Tensor e1 = model.forward(ids).logits, e2 = model.forward(ids).logits;
  REQUIRE(bit_equal(e1, e2));
  nn::GPT plain(tiny_gpt_config(0.0), 7);  // same seed, same weights
  REQUIRE(bit_equal(e1, plain.forward(ids).logits));
  model.train();
  Tensor t1 = model.forward(ids).logits;
  REQUIRE_FALSE(bit_equal(t1, e1));
}

// ------------------------------------------------------------------ the chapter's examples

TEST_CASE("chapter 3.5.3: CausalAttention on a batch of two copies gives 2 by 6 by 2",
          "[nn][attention][chapter]") {
  Tensor batch = chapter_batch();
  REQUIRE(batch.shape() == ag::Shape{2, 6, 3});
  ag::Generator gen(123);
  nn::CausalAttention ca(3, 2, /*context_length=*/6, 0.0, false, gen, nullptr);
  Tensor context = ca.forward(batch);
  REQUIRE(context.shape() == ag::Shape{2, 6, 2});
  // both copies give the same context vectors, bit for bit
  REQUIRE(bit_equal(context.select(0, 0), context.select(0, 1)));
  // the first token attends only to itself: its context is its value vector.
  // float32 weight 1 times value, within rounding of O(1) values
  Tensor value_0 = ca.W_value->forward(nn_chapter_inputs()).select(0, 0);
  ag_test::require_values(context.select(0, 0).select(0, 0), value_0.to_vector(), 1e-6);
  // the last token sees every token, as unmasked attention does
  nn::SelfAttention_v2 v2(3, 2, false, gen);
  v2.load_state_dict(ca.state_dict());
  ag_test::require_values(context.select(0, 0).select(0, 5),
                          v2.forward(nn_chapter_inputs()).select(0, 5).to_vector(), 1e-6);
}

TEST_CASE("chapter 3.6: the wrapper and MultiHeadAttention on the chapter batch",
          "[nn][attention][chapter]") {
  Tensor batch = chapter_batch();
  ag::Generator gen(123);
  nn::MultiHeadAttentionWrapper wrapper(3, 2, 6, 0.0, /*num_heads=*/2, false, gen, nullptr);
  REQUIRE(wrapper.forward(batch).shape() == ag::Shape{2, 6, 4});
  nn::MultiHeadAttention mha(3, 2, 6, 0.0, /*num_heads=*/2, false, gen, nullptr);
  REQUIRE(mha.head_dim() == 1);
  Tensor out = mha.forward(batch);
  REQUIRE(out.shape() == ag::Shape{2, 6, 2});
  REQUIRE(bit_equal(out.select(0, 0), out.select(0, 1)));
}
