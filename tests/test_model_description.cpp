// The GPT as one description: what is read off it without building a model (parameter
// names, shapes and count, FLOPs, the memory plan's terms), the architecture variants its
// config carries, and the extension points (adapters, frozen weights, a replaced head, an
// observer).
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/allocator.h"
#include "autograd/autograd.h"
#include "nn/nn.h"
#include "support.h"

using ag::Tensor;
using Catch::Matchers::Contains;

namespace {

nn::GPTConfig description_small_config() {
  nn::GPTConfig c;
  c.vocab_size = 11, c.context_length = 6, c.d_model = 8, c.n_heads = 2, c.n_layers = 2;
  c.dropout = 0.0;
  return c;
}

std::vector<nn::GPTConfig> variants() {
  std::vector<nn::GPTConfig> out;
  for (const char* norm : {"layernorm", "rmsnorm"})
    for (bool tie : {true, false})
      for (bool bias : {false, true}) {
        nn::GPTConfig c = description_small_config();
        c.norm = base::parse_choice<nn::NormKind>(norm), c.tie_weights = tie, c.qkv_bias = bias,
        c.d_ff = 12;
        out.push_back(c);
      }
  return out;
}

ag::Shape shape_of(const Tensor& t) {
  return t.shape();
}

}  // namespace

TEST_CASE("a shape-only description lists the built model's parameters", "[description]") {
  for (const auto& cfg : variants()) {
    INFO(fmt::format("{}", cfg.norm) << " tie " << cfg.tie_weights << " qkv_bias " << cfg.qkv_bias);
    const nn::GPT model(cfg, 1);
    const auto built = model.named_parameters();
    const auto described = cfg.parameter_shapes();
    REQUIRE(described.size() == built.size());
    for (size_t i = 0; i < built.size(); ++i) {
      CHECK(described[i].first == built[i].first);
      CHECK(described[i].second == shape_of(built[i].second));
    }
    CHECK(cfg.num_parameters() == model.num_parameters());
    nn::GPTConfig deep = cfg;  // counted from one block and two: the same as all five
    deep.n_layers = 5;
    int64_t listed = 0;
    for (const auto& [name, shape] : deep.parameter_shapes()) listed += ag::shape_numel(shape);
    CHECK(deep.num_parameters() == listed);
  }
}

TEST_CASE("a shape-only description allocates nothing and draws nothing", "[description]") {
  nn::GPTConfig huge = description_small_config();
  huge.vocab_size = 1 << 24, huge.d_model = 1 << 14, huge.n_heads = 16, huge.n_layers = 64;
  // about 2e11 parameters: would need 800 GB if anything were allocated
  CHECK(huge.num_parameters() > int64_t{200'000'000'000});
  nn::ShapeOnlyScope description;
  const nn::GPT model(huge, 1);
  for (const auto& [name, t] : model.named_parameters()) CHECK_FALSE(t.defined());
}

TEST_CASE("the RMSNorm variant has gains only, and the config names its choices", "[description]") {
  nn::GPTConfig cfg = description_small_config();
  cfg.norm = nn::NormKind::rms_norm;
  const auto shapes = cfg.parameter_shapes();
  for (const auto& [name, shape] : shapes) CHECK(name.find("ln1.bias") == std::string::npos);
  CHECK(cfg.num_parameters() == description_small_config().num_parameters() - 5 * cfg.d_model);
  REQUIRE_THROWS_WITH(base::parse_choice<nn::NormKind>("batchnorm"),
                      Contains("norm must be 'layernorm' or 'rmsnorm'") && Contains("'batchnorm'"));
}

TEST_CASE("FLOPs per token are read off the layers", "[description]") {
  const nn::GPTConfig c = description_small_config();
  nn::Footprint f(c.context_length, true);
  {
    nn::ShapeOnlyScope description;
    nn::GPT(c, 0).footprint(f);
  }
  // nanoGPT's count: 2 (12 L C^2 + V C) for d_ff = 4C, plus 2 L (2 C T) for the attention
  const double L = c.n_layers, C = c.d_model, V = c.vocab_size, T = c.context_length;
  CHECK(f.forward_flops_per_token == 2 * (12 * L * C * C + V * C) + 4 * L * C * T);
}

TEST_CASE("the activations kept per token are named by layer", "[description]") {
  const nn::GPTConfig c = description_small_config();
  nn::Footprint train(c.context_length, true), eval(c.context_length, false);
  nn::GPTConfig with_dropout = c;
  with_dropout.dropout = 0.1;
  {
    nn::ShapeOnlyScope description;
    nn::GPT(with_dropout, 0).footprint(train);
    nn::GPT(c, 0).footprint(eval);
  }
  auto term = [](const nn::Footprint& f, const std::string& name) {
    for (const auto& t : f.saved)
      if (t.name == name) return t.bytes;
    FAIL("no term " << name);
    return 0.0;
  };
  const double L = c.n_layers, C = c.d_model, H = c.n_heads;
  CHECK(term(eval, "blocks.*.attn: q, k, v and output by head, log-sum-exp") ==
        4 * L * (4 * C + H));
  CHECK(term(eval, "blocks.*.mlp: GELU derivative and output") == 4 * L * 2 * 4 * C);
  CHECK(term(eval, "blocks.*.ln1: output, mean and rstd") == 4 * L * (C + 2));
  CHECK(term(train, "blocks.*.drop_resid: mask") == L * 2 * C);  // a byte per element
  for (const auto& t : eval.saved) CHECK(t.name.find("mask") == std::string::npos);
  CHECK(eval.backward_peak.name == "blocks.*.attn: gradients of q, k, v, output and qkv");
  REQUIRE(eval.per_step.size() == 1);
  CHECK(eval.per_step[0].name == "blocks.*.attn.qkv: the three weights stacked");
  CHECK(eval.per_step[0].bytes == L * 4 * 3 * C * C);
}

TEST_CASE("the declared activations are what a training step holds", "[description]") {
  nn::GPTConfig c = description_small_config();
  c.vocab_size = 65, c.context_length = 32, c.d_model = 64, c.n_heads = 4, c.dropout = 0.1;
  const int64_t B = 8, T = c.context_length;
  nn::GPT model(c, 6);
  std::vector<int64_t> ids(static_cast<size_t>(B * T));
  ag::Generator gen(6);
  for (auto& id : ids) id = static_cast<int64_t>(gen.next_u64() % 65);
  const Tensor x = ag::from_vector(ids, {B, T});
  nn::Footprint f(T, true);
  {
    nn::ShapeOnlyScope description;
    nn::GPT(c, 0).footprint(f);
  }
  const double declared =
      static_cast<double>(B * T) * f.saved_bytes_per_token() + f.per_step_bytes();
  const auto before = ag::allocator_stats();
  const auto out = model.forward(x, x);
  const auto after = ag::allocator_stats();
  // the loss (a scalar) and the op's own bookkeeping aside, within 2%
  const double held = static_cast<double>(after.live_bytes - before.live_bytes);
  CHECK(held >= 0.98 * declared);
  CHECK(held <= 1.02 * declared);
  out.loss.backward();
}

TEST_CASE("an adapter starts as the plain layer, trains alone and merges back", "[adapter]") {
  nn::GPT model(description_small_config(), 3);
  ag::Generator gen(3);
  const Tensor ids = ag::from_vector(std::vector<int64_t>{1, 4, 2, 9, 3, 0}, {2, 3});
  const Tensor before = model.forward(ids).logits;
  model.freeze();
  for (const auto& block : *model.blocks) {
    block->attn->W_query->add_adapter(2, 4.0, gen);
    block->attn->W_value->add_adapter(2, 4.0, gen);
  }
  REQUIRE(ag_test::bit_equal(model.forward(ids).logits, before));  // B starts at zero
  const auto trainable = model.trainable_parameters();
  CHECK(trainable.size() == 2 * 2 * 2);  // 2 layers x 2 projections x (A, B)
  const auto names = model.named_parameters();
  CHECK(std::any_of(names.begin(), names.end(), [](const auto& e) {
    return e.first == "blocks.1.attn.W_value.lora_B.weight";
  }));
  {
    ag::NoGradGuard no_grad;
    for (const auto& p : trainable) ag::copy_(p, ag::randn(p.shape(), gen) * 0.3);
  }
  const Tensor adapted = model.forward(ids).logits;
  CHECK_FALSE(ag_test::bit_equal(adapted, before));
  model.forward(ids, ag::from_vector(std::vector<int64_t>{4, 2, 9, 3, 0, 1}, {2, 3}))
      .loss.backward();
  for (const auto& [name, p] : model.named_parameters())
    CHECK(p.grad().defined() == (name.find("lora_") != std::string::npos));
  for (const auto& block : *model.blocks) {
    block->attn->W_query->merge_adapter();
    block->attn->W_value->merge_adapter();
  }
  CHECK(model.named_parameters().size() == names.size() - trainable.size());
  ag_test::require_values(model.forward(ids).logits, adapted.to_vector(), 1e-5);
}

TEST_CASE("a classification head replaces the LM head", "[head]") {
  nn::GPTConfig cfg = description_small_config();
  cfg.tie_weights = false;
  nn::GPT model(cfg, 4);
  ag::Generator gen(4);
  model.replace_head(std::make_shared<nn::ClassificationHead>(cfg.d_model, 3, gen), "classifier");
  const auto names = model.named_parameters();
  CHECK(names[names.size() - 2].first == "classifier.weight");
  CHECK(names.back().first == "classifier.bias");
  for (const auto& [name, p] : names) CHECK(name.find("lm_head") == std::string::npos);
  const Tensor ids = ag::from_vector(std::vector<int64_t>{1, 4, 2, 9, 3, 0}, {2, 3});
  const auto out = model.forward(ids, ag::from_vector(std::vector<int64_t>{2, 0}, {2}));
  CHECK(out.logits.shape() == ag::Shape{2, 3});
  CHECK(std::isfinite(out.loss.item()));
  REQUIRE_THROWS_WITH(model.forward(ids, ids), Contains("one label per sequence"));
}

TEST_CASE("an observer sees every attention layer of a forward, as an inference", "[description]") {
  struct Count : nn::Observer {
    std::vector<std::string> layers;
    void attention(const nn::Module& m, const Tensor& w) override {
      layers.push_back(m.path());
      CHECK(w.shape() == ag::Shape{1, 2, 3, 3});
    }
  } seen;
  nn::GPTConfig cfg = description_small_config();
  cfg.dropout = 0.5;
  nn::GPT model(cfg, 5);
  model.train();
  const Tensor ids = ag::from_vector(std::vector<int64_t>{1, 4, 2}, {1, 3});
  Tensor observed;
  {
    nn::ObserverScope watch(seen);
    observed = model.forward(ids).logits;
  }
  CHECK(seen.layers == std::vector<std::string>{"blocks.0.attn", "blocks.1.attn"});
  model.eval();
  ag_test::require_values(observed, model.forward(ids).logits.to_vector(), 1e-5);
}
