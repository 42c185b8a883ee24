// nn::Module and the basic layers: hierarchical parameter names, counting, zero_grad,
// train/eval propagation, state_dict save/load (and its errors), seeding, dtype conversion,
// and Linear / Embedding / LayerNorm / Dropout / MLP layouts and values.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/nn.h"
#include "support.h"

using ag::DType;
using ag::Tensor;
using ag_test::bit_equal;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;

namespace {

std::vector<std::string> module_names_of(const nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& [name, t] : m.named_parameters()) out.push_back(name);
  return out;
}

// Every parameter's values, in registration order (a snapshot for before/after checks).
std::vector<std::vector<double>> values_of(const nn::Module& m) {
  std::vector<std::vector<double>> out;
  for (const auto& t : m.parameters()) out.push_back(t.to_vector());
  return out;
}

nn::MultiHeadAttention make_mha(uint64_t seed, bool qkv_bias = false, double dropout = 0.0) {
  ag::Generator gen(seed);
  return nn::MultiHeadAttention(/*d_in=*/3, /*d_out=*/4, /*context_length=*/6, dropout,
                                /*num_heads=*/2, qkv_bias, gen, std::make_shared<ag::Generator>(0));
}

nn::GPTConfig module_tiny_config(bool tie) {
  nn::GPTConfig cfg;
  cfg.vocab_size = 11;
  cfg.context_length = 6;
  cfg.d_model = 8;
  cfg.n_heads = 2;
  cfg.n_layers = 2;
  cfg.dropout = 0.1;
  cfg.tie_weights = tie;
  return cfg;
}

// A Dropout two levels below the module that is switched: Outer -> middle -> drop.
class Middle : public nn::Module {
 public:
  explicit Middle(std::shared_ptr<ag::Generator> gen) {
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.5, std::move(gen)));
  }
  std::shared_ptr<nn::Dropout> drop;
};

class Outer : public nn::Module {
 public:
  explicit Outer(std::shared_ptr<ag::Generator> gen) {
    middle = register_module("middle", std::make_shared<Middle>(std::move(gen)));
  }
  std::shared_ptr<Middle> middle;
};

}  // namespace

// ------------------------------------------------------------------ names and counts

TEST_CASE("named_parameters of MultiHeadAttention are dotted names in registration order",
          "[nn][module]") {
  auto mha = make_mha(1);
  REQUIRE(module_names_of(mha) == std::vector<std::string>{"W_query.weight", "W_key.weight",
                                                           "W_value.weight", "out_proj.weight",
                                                           "out_proj.bias"});
  auto named = mha.named_parameters();
  REQUIRE(named[0].second.shares_storage_with(mha.W_query->weight));
  REQUIRE(named[3].second.shares_storage_with(mha.out_proj->weight));
  REQUIRE(named[4].second.shares_storage_with(mha.out_proj->bias));
}

TEST_CASE("with qkv_bias each projection's bias follows its weight", "[nn][module]") {
  auto mha = make_mha(1, /*qkv_bias=*/true);
  REQUIRE(module_names_of(mha) == std::vector<std::string>{"W_query.weight", "W_query.bias",
                                                           "W_key.weight", "W_key.bias",
                                                           "W_value.weight", "W_value.bias",
                                                           "out_proj.weight", "out_proj.bias"});
  ag::Generator gen(2);
  nn::SelfAttention_v2 v2(3, 2, /*qkv_bias=*/true, gen);
  REQUIRE(module_names_of(v2) == std::vector<std::string>{"W_query.weight", "W_query.bias",
                                                          "W_key.weight", "W_key.bias",
                                                          "W_value.weight", "W_value.bias"});
  nn::SelfAttention_v1 v1(3, 2, gen);
  REQUIRE(module_names_of(v1) == std::vector<std::string>{"W_query", "W_key", "W_value"});
}

TEST_CASE("MultiHeadAttentionWrapper names its heads by index like a ModuleList", "[nn][module]") {
  ag::Generator gen(3);
  nn::MultiHeadAttentionWrapper wrapper(3, 2, 6, 0.0, /*num_heads=*/2, false, gen, nullptr);
  REQUIRE(module_names_of(wrapper) ==
          std::vector<std::string>{"heads.0.W_query.weight", "heads.0.W_key.weight",
                                   "heads.0.W_value.weight", "heads.1.W_query.weight",
                                   "heads.1.W_key.weight", "heads.1.W_value.weight"});
  REQUIRE(wrapper.named_parameters()[3].second.shares_storage_with(
      (*wrapper.heads)[1].W_query->weight));
}

TEST_CASE("GPT parameter names follow docs/model.md from tok_emb to ln_f", "[nn][module]") {
  nn::GPTConfig cfg = module_tiny_config(/*tie=*/false);
  cfg.n_layers = 1;
  nn::GPT model(cfg, 1);
  REQUIRE(module_names_of(model) ==
          std::vector<std::string>{
              "tok_emb.weight", "pos_emb.weight", "blocks.0.ln1.weight", "blocks.0.ln1.bias",
              "blocks.0.attn.W_query.weight", "blocks.0.attn.W_key.weight",
              "blocks.0.attn.W_value.weight", "blocks.0.attn.out_proj.weight",
              "blocks.0.attn.out_proj.bias", "blocks.0.ln2.weight", "blocks.0.ln2.bias",
              "blocks.0.mlp.fc1.weight", "blocks.0.mlp.fc1.bias", "blocks.0.mlp.fc2.weight",
              "blocks.0.mlp.fc2.bias", "ln_f.weight", "ln_f.bias", "lm_head.weight"});
}

TEST_CASE("parameters are leaves that require grad", "[nn][module]") {
  auto mha = make_mha(1, true);
  nn::GPT model(module_tiny_config(true), 1);
  for (const nn::Module* m :
       {static_cast<const nn::Module*>(&mha), static_cast<const nn::Module*>(&model)}) {
    auto params = m->parameters();
    REQUIRE(params.size() == m->named_parameters().size());
    for (const auto& p : params) {
      REQUIRE(p.requires_grad());
      REQUIRE(p.is_leaf());
      REQUIRE(p.dtype() == DType::Float32);
    }
  }
}

TEST_CASE("num_parameters counts every element exactly", "[nn][module]") {
  ag::Generator gen(4);
  // 3 projections 3->4 without bias (36) + out_proj 4x4 + 4 (20)
  REQUIRE(make_mha(1).num_parameters() == 56);
  REQUIRE(make_mha(1, true).num_parameters() == 68);  // + 3 biases of 4
  // 2 heads x 3 projections 3->2 without bias
  REQUIRE(nn::MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2, false, gen, nullptr).num_parameters() ==
          36);
  REQUIRE(nn::MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2, true, gen, nullptr).num_parameters() ==
          48);
  REQUIRE(nn::SelfAttention_v1(3, 2, gen).num_parameters() == 18);
  REQUIRE(nn::Linear(3, 2, false, gen).num_parameters() == 6);
  REQUIRE(nn::Linear(3, 2, true, gen).num_parameters() == 8);
  REQUIRE(nn::Embedding(7, 3, gen).num_parameters() == 21);
  REQUIRE(nn::LayerNorm(5).num_parameters() == 10);
  REQUIRE(nn::MLP(4, 16, gen).num_parameters() == 4 * 16 + 16 + 16 * 4 + 4);  // 148
  REQUIRE(nn::Dropout(0.5, nullptr).num_parameters() == 0);
  // tied GPT: tok 11*8 + pos 6*8 + 2 blocks x (ln 16 + attn 3*64 + 64 + 8 + ln 16
  //           + fc1 8*32 + 32 + fc2 32*8 + 8) + ln_f 16 = 88 + 48 + 2*848 + 16
  nn::GPT tied(module_tiny_config(true), 1);
  REQUIRE(tied.num_parameters() == 1848);
  nn::GPT untied(module_tiny_config(false), 1);
  REQUIRE(untied.num_parameters() == 1848 + 11 * 8);  // + lm_head
  int64_t sum = 0;
  for (const auto& p : untied.parameters()) sum += p.numel();
  REQUIRE(untied.num_parameters() == sum);
}

// ------------------------------------------------------------------ gradients and modes

TEST_CASE("zero_grad clears every gradient so the next backward does not accumulate",
          "[nn][module]") {
  auto mha = make_mha(5, true);
  ag::Generator gen(6);
  Tensor x = ag::randn({2, 4, 3}, gen);
  auto loss = [&] { return ag::sum(ag::pow(mha.forward(x), 2.0)); };
  loss().backward();
  std::vector<std::vector<double>> first;
  for (const auto& p : mha.parameters()) {
    REQUIRE(p.grad().defined());
    first.push_back(p.grad().to_vector());
  }
  loss().backward();  // without zero_grad: accumulates to twice the first gradient
  auto params = mha.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    auto g = params[i].grad().to_vector();
    for (size_t k = 0; k < g.size(); ++k)
      REQUIRE_THAT(g[k], WithinAbs(2 * first[i][k], 1e-5 * (1 + std::fabs(first[i][k]))));
  }
  mha.zero_grad();
  for (const auto& p : mha.parameters()) REQUIRE_FALSE(p.grad().defined());
  loss().backward();
  for (size_t i = 0; i < params.size(); ++i) REQUIRE(params[i].grad().to_vector() == first[i]);
}

TEST_CASE("train and eval reach a Dropout nested two levels down", "[nn][module]") {
  Outer outer(std::make_shared<ag::Generator>(7));
  Tensor x = ag::ones({200});
  REQUIRE(outer.middle->drop->is_training());
  // train: inverted dropout with p = 0.5 keeps each element as 2 or zeroes it; the chance
  // that none of 200 is zeroed is 2^-200
  Tensor y = outer.middle->drop->forward(x);
  int zeros = 0;
  for (double v : y.to_vector()) {
    REQUIRE((v == 0.0 || v == 2.0));
    zeros += v == 0.0;
  }
  REQUIRE(zeros > 0);
  REQUIRE(zeros < 200);

  outer.eval();
  REQUIRE_FALSE(outer.is_training());
  REQUIRE_FALSE(outer.middle->is_training());
  REQUIRE_FALSE(outer.middle->drop->is_training());
  REQUIRE(bit_equal(outer.middle->drop->forward(x), x));

  outer.train();
  REQUIRE(outer.middle->is_training());
  REQUIRE(outer.middle->drop->is_training());
  REQUIRE_FALSE(bit_equal(outer.middle->drop->forward(x), x));
}

TEST_CASE("eval reaches every dropout of a GPT", "[nn][module]") {
  nn::GPT model(module_tiny_config(true), 1);
  model.eval();
  REQUIRE_FALSE(model.drop_emb->is_training());
  for (const auto& block : *model.blocks) {
    REQUIRE_FALSE(block->is_training());
    REQUIRE_FALSE(block->attn->is_training());
    REQUIRE_FALSE(block->drop_resid->is_training());
    REQUIRE_FALSE(static_cast<nn::MLP&>(*block->mlp).fc1->is_training());
  }
  model.train();
  for (const auto& block : *model.blocks) REQUIRE(block->attn->is_training());
}

// ------------------------------------------------------------------ state_dict

TEST_CASE("state_dict shares storage with the module's parameters", "[nn][module]") {
  auto mha = make_mha(1);
  auto state = mha.state_dict();
  REQUIRE(state.size() == 5);
  REQUIRE(state[1].first == "W_key.weight");
  REQUIRE(state[1].second.shares_storage_with(mha.W_key->weight));
}

TEST_CASE("loading one module's state_dict into another makes their outputs identical",
          "[nn][module]") {
  auto a = make_mha(1, true);
  auto b = make_mha(2, true);
  ag::Generator gen(8);
  Tensor x = ag::randn({2, 5, 3}, gen);
  REQUIRE_FALSE(bit_equal(a.forward(x), b.forward(x)));
  b.load_state_dict(a.state_dict());
  REQUIRE(bit_equal(a.forward(x), b.forward(x)));
  // a copy, not an alias: b's parameters are still its own leaves
  auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    REQUIRE_FALSE(pb[i].shares_storage_with(pa[i]));
    REQUIRE(pb[i].requires_grad());
    REQUIRE(pb[i].is_leaf());
  }
  ag::fill_(a.W_query->weight, 0.5);
  REQUIRE_FALSE(bit_equal(a.forward(x), b.forward(x)));
}

TEST_CASE("load_state_dict matches entries by name in any order", "[nn][module]") {
  auto a = make_mha(1, true);
  auto b = make_mha(2, true);
  auto state = a.state_dict();
  std::reverse(state.begin(), state.end());
  b.load_state_dict(state);
  REQUIRE(values_of(b) == values_of(a));
}

TEST_CASE("load_state_dict converts a float64 state into a float32 module", "[nn][module]") {
  auto a = make_mha(1);
  a.to(DType::Float64);
  auto b = make_mha(2);
  b.load_state_dict(a.state_dict());
  auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    REQUIRE(pb[i].dtype() == DType::Float32);
    // a's values were float32 to begin with, so the round trip is exact
    REQUIRE(pb[i].to_vector() == pa[i].to_vector());
  }
}

TEST_CASE("load_state_dict names the first missing entry and changes nothing", "[nn][module]") {
  auto target = make_mha(1);
  auto before = values_of(target);
  auto state = make_mha(2).state_dict();  // different values
  // drop W_key.weight and out_proj.bias: the first in registration order is named
  state.erase(state.begin() + 4);
  state.erase(state.begin() + 1);
  REQUIRE_THROWS_WITH(target.load_state_dict(state),
                      Contains("missing") && Contains("'W_key.weight'") && Contains("[4, 3]") &&
                          !Contains("out_proj.bias"));
  REQUIRE(values_of(target) == before);
}

TEST_CASE("load_state_dict names the first unexpected entry and changes nothing", "[nn][module]") {
  auto target = make_mha(1);
  auto before = values_of(target);
  auto state = make_mha(2).state_dict();
  state.emplace_back("zeta.weight", ag::zeros({2, 2}));
  state.emplace_back("alpha.weight", ag::zeros({3}));
  REQUIRE_THROWS_WITH(target.load_state_dict(state), Contains("unexpected") &&
                                                         Contains("'zeta.weight'") &&
                                                         !Contains("alpha.weight"));
  REQUIRE(values_of(target) == before);
}

TEST_CASE("load_state_dict names the first mis-shaped entry with both shapes and changes nothing",
          "[nn][module]") {
  auto target = make_mha(1);
  auto before = values_of(target);
  auto state = make_mha(2).state_dict();
  state[2].second = ag::zeros({3, 4});  // W_value.weight is [4, 3]; same numel, wrong shape
  state[4].second = ag::zeros({5});     // out_proj.bias is [4]
  REQUIRE_THROWS_WITH(target.load_state_dict(state), Contains("'W_value.weight'") &&
                                                         Contains("[3, 4]") && Contains("[4, 3]") &&
                                                         !Contains("out_proj.bias"));
  REQUIRE(values_of(target) == before);
}

TEST_CASE("load_state_dict rejects a name given twice and a non-float tensor", "[nn][module]") {
  auto target = make_mha(1);
  auto before = values_of(target);
  auto state = make_mha(2).state_dict();
  auto twice = state;
  twice.push_back(state[0]);
  REQUIRE_THROWS_WITH(target.load_state_dict(twice),
                      Contains("'W_query.weight'") && Contains("twice"));
  auto ints = state;
  ints[4].second = ag::zeros({4}, DType::Int64);
  REQUIRE_THROWS_WITH(target.load_state_dict(ints),
                      Contains("'out_proj.bias'") && Contains("int64"));
  REQUIRE(values_of(target) == before);
}

// ------------------------------------------------------------------ seeding and dtype

TEST_CASE("the same seed gives the same initialisation and different seeds differ",
          "[nn][module]") {
  REQUIRE(values_of(make_mha(11, true)) == values_of(make_mha(11, true)));
  auto a = values_of(make_mha(11, true)), b = values_of(make_mha(12, true));
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] != b[i]);  // every tensor differs

  nn::GPT g1(module_tiny_config(true), 42), g2(module_tiny_config(true), 42),
      g3(module_tiny_config(true), 43);
  REQUIRE(values_of(g1) == values_of(g2));
  REQUIRE(values_of(g1) != values_of(g3));
  REQUIRE(g1.tok_emb->weight.to_vector() != g3.tok_emb->weight.to_vector());
}

TEST_CASE("module.to Float64 converts every parameter in place", "[nn][module]") {
  nn::GPT model(module_tiny_config(false), 3);
  auto before = values_of(model);
  model.to(DType::Float64);
  for (const auto& [name, p] : model.named_parameters()) {
    INFO(name);
    REQUIRE(p.dtype() == DType::Float64);
    REQUIRE(p.requires_grad());
    REQUIRE(p.is_leaf());
  }
  REQUIRE(values_of(model) == before);  // float32 values are exact in float64
  // the layers' own handles see the conversion
  REQUIRE(model.tok_emb->weight.dtype() == DType::Float64);
  REQUIRE((*model.blocks)[1].attn->W_query->weight.dtype() == DType::Float64);
  REQUIRE(dynamic_cast<nn::LMHead&>(model.head()).weight.dtype() == DType::Float64);
  model.eval();
  auto out = model.forward(ag::from_vector(std::vector<int64_t>{1, 2, 3, 4}, {1, 4}));
  REQUIRE(out.logits.dtype() == DType::Float64);
  REQUIRE(out.logits.shape() == ag::Shape{1, 4, 11});
}

// ------------------------------------------------------------------ layers

TEST_CASE("Linear stores weight out by in and computes x W^T plus b", "[nn][module][linear]") {
  ag::Generator gen(9);
  nn::Linear lin(3, 2, true, gen);
  REQUIRE(lin.weight.shape() == ag::Shape{2, 3});
  REQUIRE(lin.bias.shape() == ag::Shape{2});
  ag::copy_(lin.weight, ag::tensor({{1, 2, 3}, {4, 5, 6}}));
  ag::copy_(lin.bias, ag::tensor({0.5, -1}));
  // rows: (1, 0, -1) . (1, 2, 3) + 0.5 = -1.5;  (1, 0, -1) . (4, 5, 6) - 1 = -3
  //       (2, 1, 0)  . (1, 2, 3) + 0.5 = 4.5;   (2, 1, 0)  . (4, 5, 6) - 1 = 12
  // Small integers and halves: every product and partial sum is exact in float32, so the
  // tolerance is 0.
  Tensor x = ag::tensor({{1, 0, -1}, {2, 1, 0}});
  Tensor y = lin.forward(x);
  REQUIRE(y.shape() == ag::Shape{2, 2});
  ag_test::require_values(y, {-1.5, -3, 4.5, 12}, 0.0);
  // a leading batch dim broadcasts
  Tensor y3 = lin.forward(x.unsqueeze(1));
  REQUIRE(y3.shape() == ag::Shape{2, 1, 2});
  ag_test::require_values(y3, {-1.5, -3, 4.5, 12}, 0.0);

  nn::Linear no_bias(3, 2, false, gen);
  REQUIRE_FALSE(no_bias.bias.defined());
  REQUIRE(module_names_of(no_bias) == std::vector<std::string>{"weight"});
  ag::copy_(no_bias.weight, ag::tensor({{1, 2, 3}, {4, 5, 6}}));
  ag_test::require_values(no_bias.forward(x), {-2, -2, 4, 13}, 0.0);
}

TEST_CASE("Linear rejects an input whose last dim is not in_features", "[nn][module][linear]") {
  ag::Generator gen(9);
  nn::Linear lin(3, 2, true, gen);
  REQUIRE_THROWS_WITH(lin.forward(ag::zeros({2, 4})),
                      Contains("[2, 4]") && Contains("in_features = 3"));
}

TEST_CASE("Linear draws weight and bias from U of plus or minus 1 over sqrt of in_features",
          "[nn][module][linear]") {
  ag::Generator gen(10);
  for (int64_t in : {4, 16}) {
    nn::Linear lin(in, 64, true, gen);
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    INFO("in_features " << in << " bound " << bound);
    auto w = lin.weight.to_vector(), b = lin.bias.to_vector();
    double max_abs = 0, mean_abs = 0;
    for (double v : w) {
      REQUIRE(std::fabs(v) <= bound);
      max_abs = std::max(max_abs, std::fabs(v));
      mean_abs += std::fabs(v) / w.size();
    }
    // n = 64 * in >= 256 draws: P(all |w| < 0.96 bound) = 0.96^256 < 3e-5
    REQUIRE(max_abs > 0.96 * bound);
    // |w| ~ U(0, bound): mean bound/2, sd bound/sqrt(12) ~ 0.29 bound; the standard error
    // over >= 256 draws is <= 0.018 bound, so 0.08 bound is > 4 standard errors
    REQUIRE_THAT(mean_abs, WithinAbs(bound / 2, 0.08 * bound));
    double bias_max = 0;
    for (double v : b) {
      REQUIRE(std::fabs(v) <= bound);
      bias_max = std::max(bias_max, std::fabs(v));
    }
    REQUIRE(bias_max > 0.8 * bound);  // P(all 64 below) = 0.8^64 < 1e-6
  }
}

TEST_CASE("Embedding is a V by C table of standard normals that picks rows by id", "[nn][module]") {
  ag::Generator gen(11);
  nn::Embedding emb(64, 64, gen);
  REQUIRE(emb.weight.shape() == ag::Shape{64, 64});
  auto w = emb.weight.to_vector();
  double mean = 0, sq = 0;
  for (double v : w) mean += v / w.size();
  for (double v : w) sq += (v - mean) * (v - mean) / w.size();
  // 4096 draws of N(0, 1): standard errors 0.016 (mean) and 0.011 (sd); bounds are > 4 of them
  REQUIRE_THAT(mean, WithinAbs(0.0, 0.07));
  REQUIRE_THAT(std::sqrt(sq), WithinAbs(1.0, 0.05));

  Tensor ids = ag::from_vector(std::vector<int64_t>{5, 0, 5, 63}, {2, 2});
  Tensor out = emb.forward(ids);
  REQUIRE(out.shape() == ag::Shape{2, 2, 64});
  REQUIRE(out.select(0, 0).select(0, 0).to_vector() == emb.weight.select(0, 5).to_vector());
  REQUIRE(out.select(0, 1).select(0, 0).to_vector() == emb.weight.select(0, 5).to_vector());
  REQUIRE(out.select(0, 1).select(0, 1).to_vector() == emb.weight.select(0, 63).to_vector());
}

TEST_CASE("LayerNorm starts with weight ones and bias zeros and normalises the last dim",
          "[nn][module]") {
  nn::LayerNorm ln(4);
  REQUIRE(module_names_of(ln) == std::vector<std::string>{"weight", "bias"});
  ag_test::require_values(ln.weight, {1, 1, 1, 1}, 0.0);
  ag_test::require_values(ln.bias, {0, 0, 0, 0}, 0.0);
  REQUIRE(ln.eps() == 1e-5);
  // (1, 2, 3, 4): mean 2.5, biased variance 1.25; out = (x - 2.5) / sqrt(1.25 + 1e-5).
  // float32 rounding of values ~1.3 is ~1e-7; 1e-6 allows a few roundings
  Tensor y = ln.forward(ag::tensor({{1, 2, 3, 4}}));
  const double s = std::sqrt(1.25 + 1e-5);
  ag_test::require_values(y, {-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s}, 1e-6);
}

TEST_CASE("MLP maps d_model to d_ff and back", "[nn][module]") {
  ag::Generator gen(12);
  nn::MLP mlp(4, 16, gen);
  REQUIRE(module_names_of(mlp) ==
          std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
  REQUIRE(mlp.fc1->weight.shape() == ag::Shape{16, 4});
  REQUIRE(mlp.fc1->bias.shape() == ag::Shape{16});
  REQUIRE(mlp.fc2->weight.shape() == ag::Shape{4, 16});
  REQUIRE(mlp.fc2->bias.shape() == ag::Shape{4});
  Tensor x = ag::randn({2, 3, 4}, gen);
  Tensor y = mlp.forward(x);
  REQUIRE(y.shape() == ag::Shape{2, 3, 4});
  // fc2(gelu(fc1(x))) composed by hand gives the same bits
  Tensor by_hand = mlp.fc2->forward(ag::gelu(mlp.fc1->forward(x)));
  REQUIRE(bit_equal(y, by_hand));
}

TEST_CASE("Dropout in eval mode is the identity and p 0 keeps everything", "[nn][module]") {
  ag::Generator gen(13);
  Tensor x = ag::randn({5, 7}, gen);
  nn::Dropout drop(0.5, std::make_shared<ag::Generator>(1));
  drop.eval();
  REQUIRE(bit_equal(drop.forward(x), x));
  nn::Dropout keep(0.0, std::make_shared<ag::Generator>(1));
  REQUIRE(keep.is_training());
  REQUIRE(bit_equal(keep.forward(x), x));
  drop.train();
  Tensor y = drop.forward(x);
  auto xv = x.to_vector(), yv = y.to_vector();
  int dropped = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    // survivors are scaled by 1/(1 - p) = 2: exact in float32
    REQUIRE((yv[i] == 0.0 || yv[i] == static_cast<double>(static_cast<float>(2 * xv[i]))));
    dropped += yv[i] == 0.0;
  }
  REQUIRE(dropped > 0);
  REQUIRE(dropped < 35);  // P(all 35 dropped) = 2^-35
}

TEST_CASE("Dropout rejects p outside 0 to 1", "[nn][module]") {
  REQUIRE_THROWS_WITH(nn::Dropout(1.5, nullptr), Contains("1.5"));
  REQUIRE_THROWS_WITH(nn::Dropout(-0.1, nullptr), Contains("-0.1"));
}
