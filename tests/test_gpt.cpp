// The GPT of docs/model.md: names and shapes, initialisation, loss at
// initialisation, a float64 gradient check of the whole model, generation.
#include <catch2/catch.hpp>
#include <cmath>

#include "gradcheck_helpers.h"
#include "nn/nn.h"

using ag::DType;
using ag::Shape;
using ag::Tensor;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;

namespace {

nn::GPTConfig tiny_config() {
  nn::GPTConfig c;
  c.vocab_size = 7;
  c.context_length = 5;
  c.d_model = 8;
  c.n_heads = 2;
  c.n_layers = 2;
  c.dropout = 0.0;
  return c;
}

Tensor random_ids(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  ag::Generator g(seed);
  std::vector<int64_t> v(B * T);
  for (auto& x : v) x = static_cast<int64_t>(g.next_u64() % V);
  return ag::from_vector(v, {B, T});
}

std::vector<std::pair<std::string, Shape>> names_and_shapes(const nn::Module& m) {
  std::vector<std::pair<std::string, Shape>> out;
  for (auto& [name, t] : m.named_parameters()) out.emplace_back(name, t.shape());
  return out;
}

}  // namespace

TEST_CASE("GPT parameters carry docs/model.md's names and shapes in order", "[gpt]") {
  nn::GPTConfig c = tiny_config();
  c.n_layers = 1;
  nn::GPT model(c, 1);
  const int64_t C = 8, F = 32;
  std::vector<std::pair<std::string, Shape>> expected = {
      {"tok_emb.weight", {7, C}},
      {"pos_emb.weight", {5, C}},
      {"blocks.0.ln1.weight", {C}},
      {"blocks.0.ln1.bias", {C}},
      {"blocks.0.attn.W_query.weight", {C, C}},
      {"blocks.0.attn.W_key.weight", {C, C}},
      {"blocks.0.attn.W_value.weight", {C, C}},
      {"blocks.0.attn.out_proj.weight", {C, C}},
      {"blocks.0.attn.out_proj.bias", {C}},
      {"blocks.0.ln2.weight", {C}},
      {"blocks.0.ln2.bias", {C}},
      {"blocks.0.mlp.fc1.weight", {F, C}},
      {"blocks.0.mlp.fc1.bias", {F}},
      {"blocks.0.mlp.fc2.weight", {C, F}},
      {"blocks.0.mlp.fc2.bias", {C}},
      {"ln_f.weight", {C}},
      {"ln_f.bias", {C}},
  };
  REQUIRE(names_and_shapes(model) == expected);
  int64_t total = 0;
  for (auto& [n, s] : expected) total += ag::shape_numel(s);
  REQUIRE(model.num_parameters() == total);
}

TEST_CASE("an untied head adds lm_head.weight and qkv_bias adds the projection biases", "[gpt]") {
  nn::GPTConfig c = tiny_config();
  c.n_layers = 1;
  c.tie_weights = false;
  c.qkv_bias = true;
  c.d_ff = 12;
  nn::GPT model(c, 1);
  auto ns = names_and_shapes(model);
  REQUIRE(ns.back() == std::make_pair(std::string("lm_head.weight"), Shape{7, 8}));
  REQUIRE(ns[5] == std::make_pair(std::string("blocks.0.attn.W_query.bias"), Shape{8}));
  REQUIRE(ns[14] == std::make_pair(std::string("blocks.0.mlp.fc1.weight"), Shape{12, 8}));
}

TEST_CASE("the parameter count is known from the config before the model is built", "[gpt]") {
  nn::GPTConfig c = tiny_config();
  for (bool tie : {true, false})
    for (bool bias : {true, false})
      for (int64_t d_ff : {0, 12}) {
        c.tie_weights = tie, c.qkv_bias = bias, c.d_ff = d_ff;
        INFO("tie " << tie << " qkv_bias " << bias << " d_ff " << d_ff);
        REQUIRE(c.num_parameters() == nn::GPT(c, 1).num_parameters());
      }
  nn::GPTConfig spec;  // docs/model.md's default with a 65-character vocabulary
  spec.vocab_size = 65;
  REQUIRE(spec.num_parameters() ==
          65 * 128 + 64 * 128 + 4 * (4 * 128 + 4 * 128 * 128 + 128 + 2 * 128 * 512 + 512 + 128) +
              2 * 128);
}

TEST_CASE("absurd model sizes are refused by name before any arithmetic overflows", "[gpt]") {
  nn::GPTConfig c = tiny_config();
  c.d_model = int64_t{1} << 40;
  REQUIRE_THROWS_WITH(c.validate(), Contains("d_model") && Contains("larger than the supported"));
  c = tiny_config();
  c.vocab_size = int64_t{1} << 30;
  REQUIRE_THROWS_WITH(c.validate(), Contains("vocab_size"));
}

TEST_CASE("GPT initialisation follows GPT-2", "[gpt][init]") {
  nn::GPTConfig c;
  c.vocab_size = 65;
  c.n_layers = 4;
  nn::GPT model(c, 7);
  auto std_of = [](const Tensor& t) {
    auto v = t.to_vector();
    double m = 0, s = 0;
    for (double x : v) m += x;
    m /= v.size();
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / v.size());
  };
  for (auto& [name, p] : model.named_parameters()) {
    INFO(name);
    if (name.find("ln") != std::string::npos) {
      bool is_weight = name.size() > 6 && name.compare(name.size() - 6, 6, "weight") == 0;
      REQUIRE(p.to_vector() == std::vector<double>(p.numel(), is_weight ? 1.0 : 0.0));
    } else if (name.find(".bias") != std::string::npos) {
      REQUIRE(p.to_vector() == std::vector<double>(p.numel(), 0.0));
    } else if (name.find("out_proj.weight") != std::string::npos ||
               name.find("fc2.weight") != std::string::npos) {
      // 16384+ samples: the sample std is within a few percent of 0.02/sqrt(8)
      REQUIRE_THAT(std_of(p), WithinAbs(0.02 / std::sqrt(8.0), 0.0005));
    } else {
      REQUIRE_THAT(std_of(p), WithinAbs(0.02, 0.001));
    }
  }
}

TEST_CASE("the block marks its residual projections, and only those", "[gpt][init]") {
  nn::GPTConfig c = tiny_config();
  c.tie_weights = false;
  nn::GPT model(c, 7);
  for (const auto& block : *model.blocks) {
    REQUIRE(block->attn->out_proj->residual_projection);
    REQUIRE(block->mlp->output_projection().residual_projection);
    REQUIRE_FALSE(block->attn->W_query->residual_projection);
    REQUIRE_FALSE(static_cast<nn::MLP&>(*block->mlp).fc1->residual_projection);
  }
  // the untied head is no Linear of the blocks: drawn with the unscaled std (init test)
  REQUIRE_FALSE(dynamic_cast<nn::LMHead&>(model.head()).tied());
  // a standalone layer is not one: the flag is the model's to set
  ag::Generator gen(1);
  REQUIRE_FALSE(nn::MLP(4, 8, gen).fc2->residual_projection);
}

TEST_CASE("the loss at initialisation is close to ln vocab_size", "[gpt]") {
  nn::GPTConfig c;
  c.vocab_size = 65;
  c.d_model = 32;
  c.n_layers = 2;
  c.context_length = 16;
  nn::GPT model(c, 3);
  model.eval();
  auto ids = random_ids(4, 16, 65, 1), targets = random_ids(4, 16, 65, 2);
  // logits start within ~0.1 of zero, so the predicted distribution is nearly uniform
  REQUIRE_THAT(model.forward(ids, targets).loss.item(), WithinAbs(std::log(65.0), 0.05));
}

TEST_CASE("gradcheck the whole GPT on a tiny config", "[gpt][gradcheck]") {
  nn::GPTConfig c = tiny_config();
  c.tie_weights = GENERATE(true, false);
  c.dropout = GENERATE(0.0, 0.2);
  CAPTURE(c.tie_weights, c.dropout);
  nn::GPT model(c, 11);
  model.to(DType::Float64);
  auto ids = random_ids(2, 4, 7, 5), targets = random_ids(2, 4, 7, 6);
  const auto start = model.dropout_generator().state();
  REQUIRE_GRADCHECK(
      [&](const std::vector<Tensor>&) {
        model.dropout_generator().set_state(start);  // the same masks at every evaluation
        return model.forward(ids, targets).loss;
      },
      model.parameters());
}

TEST_CASE("GPT rejects sequences longer than context_length and malformed batches",
          "[gpt][errors]") {
  nn::GPT model(tiny_config(), 1);
  REQUIRE_THROWS_WITH(model.forward(random_ids(1, 6, 7, 1)),
                      Contains("6") && Contains("context_length 5"));
  REQUIRE_THROWS_WITH(model.forward(ag::zeros({1, 3})), Contains("int64"));
  REQUIRE_THROWS_WITH(model.forward(random_ids(1, 3, 7, 1), random_ids(1, 2, 7, 1)),
                      Contains("[1, 2]") && Contains("[1, 3]"));
  REQUIRE_THROWS_WITH(model.forward(ag::from_vector(std::vector<int64_t>{3, 9}, {1, 2})),
                      Contains("id 9"));
  nn::GPTConfig bad = tiny_config();
  bad.n_heads = 3;
  REQUIRE_THROWS_WITH(nn::GPT(bad, 1), Contains("d_model (8)") && Contains("n_heads (3)"));
}

TEST_CASE("generate appends tokens and crops its context to context_length", "[gpt][generate]") {
  nn::GPT model(tiny_config(), 2);
  model.eval();
  Tensor prompt = random_ids(2, 5, 7, 3);  // already a full context
  ag::Generator g1(9), g2(9);
  Tensor a = model.generate(prompt, 6, 1.0, 0, g1);
  Tensor b = model.generate(prompt, 6, 1.0, 0, g2);
  REQUIRE(a.shape() == Shape{2, 11});
  REQUIRE(a.to_vector() == b.to_vector());  // same seed, same sample
  REQUIRE(a.narrow(1, 0, 5).to_vector() == prompt.to_vector());
  for (double id : a.to_vector()) REQUIRE((id >= 0 && id < 7));
}

TEST_CASE("greedy generation equals top_k 1 and follows the argmax", "[gpt][generate]") {
  nn::GPT model(tiny_config(), 4);
  model.eval();
  Tensor prompt = random_ids(1, 2, 7, 8);
  ag::Generator g(1);
  Tensor greedy = model.generate(prompt, 4, 0.0, 0, g);
  Tensor top1 = model.generate(prompt, 4, 0.8, 1, g);
  REQUIRE(greedy.to_vector() == top1.to_vector());
  Tensor logits = model.forward(prompt).logits.select(1, 1);
  REQUIRE(greedy.at({0, 2}) == ag::argmax(logits, -1).at({0}));
}
