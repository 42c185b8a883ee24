// Float64 finite-difference checks of every layer's gradient, with respect to its
// parameters and its input at once. Each module is converted with to(Float64) and its
// parameters (shared with the module) are passed to gradcheck followed by the input, so
// the function simply calls the module. Dropout masks are made repeatable by re-seeding the
// dropout generator at the start of every evaluation.
#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "autograd/autograd.h"
#include "gradcheck_helpers.h"
#include "nn/nn.h"

using ag::DType;
using ag::Tensor;

namespace {

constexpr uint64_t kMaskSeed = 2024;

// The module's parameters followed by x: the order the functions below rely on (x last).
std::vector<Tensor> gradcheck_params_and(const nn::Module& m, const Tensor& x) {
  std::vector<Tensor> inputs = m.parameters();
  for (const auto& p : inputs) REQUIRE(p.dtype() == DType::Float64);
  inputs.push_back(x);
  return inputs;
}

bool differ(const Tensor& a, const Tensor& b) {
  return a.to_vector() != b.to_vector();
}

}  // namespace

TEST_CASE("gradcheck Linear with and without bias on 2-D and 3-D inputs", "[nn][gradcheck]") {
  for (bool bias : {true, false}) {
    for (const ag::Shape& shape : {ag::Shape{4, 3}, ag::Shape{2, 3, 3}}) {
      INFO("bias " << bias << " input " << ag::shape_str(shape));
      ag::Generator gen(1);
      nn::Linear lin(3, 2, bias, gen);
      lin.to(DType::Float64);
      Tensor x = ag_test::randn_leaf(shape, gen);
      auto inputs = gradcheck_params_and(lin, x);
      REQUIRE(inputs.size() == (bias ? 3u : 2u));
      REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return lin.forward(in.back()); },
                        inputs);
    }
  }
}

TEST_CASE("gradcheck Embedding with repeated ids", "[nn][gradcheck]") {
  ag::Generator gen(2);
  nn::Embedding emb(5, 3, gen);
  emb.to(DType::Float64);
  // id 2 three times (scatter-add), id 4 never (zero gradient row)
  Tensor ids = ag::from_vector(std::vector<int64_t>{2, 0, 2, 1, 3, 2}, {2, 3});
  REQUIRE_GRADCHECK([&](const std::vector<Tensor>&) { return emb.forward(ids); }, emb.parameters());
}

TEST_CASE("gradcheck LayerNorm with non-trivial weight and bias", "[nn][gradcheck]") {
  ag::Generator gen(3);
  nn::LayerNorm ln(5);
  ln.to(DType::Float64);
  // away from the initial ones and zeros so every term of the backward matters
  ag::copy_(ln.weight, ag::randn({5}, gen, DType::Float64));
  ag::copy_(ln.bias, ag::randn({5}, gen, DType::Float64));
  Tensor x = ag_test::randn_leaf({2, 3, 5}, gen);
  REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return ln.forward(in.back()); },
                    gradcheck_params_and(ln, x));
}

TEST_CASE("gradcheck MLP", "[nn][gradcheck]") {
  ag::Generator gen(4);
  nn::MLP mlp(3, 5, gen);
  mlp.to(DType::Float64);
  Tensor x = ag_test::randn_leaf({2, 2, 3}, gen);
  REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return mlp.forward(in.back()); },
                    gradcheck_params_and(mlp, x));
}

TEST_CASE("gradcheck GELU module", "[nn][gradcheck]") {
  ag::Generator gen(5);
  nn::GELU gelu;
  Tensor x = ag_test::randn_leaf({3, 4}, gen);
  REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return gelu.forward(in[0]); }, {x});
}

TEST_CASE("gradcheck Dropout in train mode with a re-seeded mask", "[nn][gradcheck]") {
  ag::Generator gen(6);
  auto mask_gen = std::make_shared<ag::Generator>(0);
  nn::Dropout drop(0.5, mask_gen);
  REQUIRE(drop.is_training());
  Tensor x = ag_test::away_from_zero_leaf({4, 5}, gen);
  auto fn = [&](const std::vector<Tensor>& in) {
    mask_gen->manual_seed(kMaskSeed);
    return drop.forward(in[0]);
  };
  // the mask is active (some dropped, some kept) and the same at every evaluation
  Tensor y = fn({x});
  int dropped = 0;
  for (double v : y.to_vector()) dropped += v == 0.0;
  REQUIRE(dropped > 0);
  REQUIRE(dropped < 20);
  REQUIRE_FALSE(differ(y, fn({x})));
  REQUIRE_GRADCHECK(fn, {x});
}

TEST_CASE("gradcheck SelfAttention_v1", "[nn][gradcheck][attention]") {
  ag::Generator gen(7);
  nn::SelfAttention_v1 attn(3, 2, gen);
  attn.to(DType::Float64);
  Tensor x = ag_test::randn_leaf({4, 3}, gen);
  REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return attn.forward(in.back()); },
                    gradcheck_params_and(attn, x));
}

TEST_CASE("gradcheck SelfAttention_v2 with and without qkv bias", "[nn][gradcheck][attention]") {
  for (bool bias : {false, true}) {
    INFO("qkv_bias " << bias);
    ag::Generator gen(8);
    nn::SelfAttention_v2 attn(3, 2, bias, gen);
    attn.to(DType::Float64);
    Tensor x = ag_test::randn_leaf({2, 4, 3}, gen);
    REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return attn.forward(in.back()); },
                      gradcheck_params_and(attn, x));
  }
}

TEST_CASE("gradcheck CausalAttention with dropout 0 and 0.3", "[nn][gradcheck][attention]") {
  for (double p : {0.0, 0.3}) {
    INFO("dropout " << p);
    ag::Generator gen(9);
    auto mask_gen = std::make_shared<ag::Generator>(0);
    nn::CausalAttention attn(3, 2, /*context_length=*/5, p, /*qkv_bias=*/true, gen, mask_gen);
    attn.to(DType::Float64);
    Tensor x = ag_test::randn_leaf({2, 4, 3}, gen);
    auto fn = [&](const std::vector<Tensor>& in) {
      mask_gen->manual_seed(kMaskSeed);
      return attn.forward(in.back());
    };
    if (p > 0) {  // the check below really goes through a dropout mask
      Tensor train = fn({x});
      attn.eval();
      Tensor eval = attn.forward(x);
      attn.train();
      REQUIRE(differ(train, eval));
      REQUIRE_FALSE(differ(train, fn({x})));
    }
    REQUIRE_GRADCHECK(fn, gradcheck_params_and(attn, x));
  }
}

TEST_CASE("gradcheck MultiHeadAttentionWrapper", "[nn][gradcheck][attention]") {
  for (double p : {0.0, 0.3}) {
    INFO("dropout " << p);
    ag::Generator gen(10);
    auto mask_gen = std::make_shared<ag::Generator>(0);
    nn::MultiHeadAttentionWrapper attn(3, 2, /*context_length=*/4, p, /*num_heads=*/2,
                                       /*qkv_bias=*/false, gen, mask_gen);
    attn.to(DType::Float64);
    Tensor x = ag_test::randn_leaf({2, 3, 3}, gen);
    auto fn = [&](const std::vector<Tensor>& in) {
      mask_gen->manual_seed(kMaskSeed);
      return attn.forward(in.back());
    };
    REQUIRE_GRADCHECK(fn, gradcheck_params_and(attn, x));
  }
}

TEST_CASE("gradcheck MultiHeadAttention with dropout 0 and 0.3", "[nn][gradcheck][attention]") {
  for (double p : {0.0, 0.3}) {
    for (bool bias : {false, true}) {
      INFO("dropout " << p << " qkv_bias " << bias);
      ag::Generator gen(11);
      auto mask_gen = std::make_shared<ag::Generator>(0);
      nn::MultiHeadAttention attn(3, 4, /*context_length=*/5, p, /*num_heads=*/2, bias, gen,
                                  mask_gen);
      attn.to(DType::Float64);
      Tensor x = ag_test::randn_leaf({2, 4, 3}, gen);
      // the fused kernel takes one draw per forward: re-seeding replays the same mask
      auto fn = [&](const std::vector<Tensor>& in) {
        mask_gen->manual_seed(kMaskSeed);
        return attn.forward(in.back());
      };
      if (p > 0) {
        Tensor train = fn({x});
        attn.eval();
        Tensor eval = attn.forward(x);
        attn.train();
        REQUIRE(differ(train, eval));
        REQUIRE_FALSE(differ(train, fn({x})));
      }
      REQUIRE_GRADCHECK(fn, gradcheck_params_and(attn, x));
    }
  }
}

TEST_CASE("gradcheck RMSNorm with a non-trivial weight", "[nn][gradcheck]") {
  ag::Generator gen(12);
  nn::RMSNorm norm(5);
  norm.to(DType::Float64);
  ag::copy_(norm.weight, ag::randn({5}, gen, DType::Float64));
  Tensor x = ag_test::randn_leaf({2, 3, 5}, gen);
  REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return norm.forward(in.back()); },
                    gradcheck_params_and(norm, x));
}

TEST_CASE("gradcheck a Linear carrying a low-rank adapter", "[nn][gradcheck][adapter]") {
  for (bool bias : {true, false}) {
    INFO("bias " << bias);
    ag::Generator gen(13);
    nn::Linear lin(4, 3, bias, gen);
    lin.add_adapter(/*rank=*/2, /*alpha=*/4.0, gen);
    lin.to(DType::Float64);
    // B starts at zero, where A's gradient is zero too: move it so both terms matter
    ag::copy_(lin.lora_B->weight, ag::randn({3, 2}, gen, DType::Float64));
    Tensor x = ag_test::randn_leaf({2, 3, 4}, gen);
    auto inputs = gradcheck_params_and(lin, x);
    REQUIRE(inputs.size() == (bias ? 5u : 4u));  // weight, (bias,) lora_A, lora_B, x
    REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return lin.forward(in.back()); },
                      inputs);
  }
}

TEST_CASE("gradcheck a ClassificationHead and its loss", "[nn][gradcheck][head]") {
  ag::Generator gen(14);
  nn::ClassificationHead head(4, 3, gen);
  head.to(DType::Float64);
  Tensor h = ag_test::randn_leaf({2, 5, 4}, gen);
  const Tensor labels = ag::from_vector(std::vector<int64_t>{2, 0}, {2});
  REQUIRE_GRADCHECK(
      [&](const std::vector<Tensor>& in) { return head.loss(head.forward(in.back()), labels); },
      gradcheck_params_and(head, h));
}

TEST_CASE("gradcheck a ClassificationHead pooling padded rows, last and mean",
          "[nn][gradcheck][head]") {
  for (const char* pool : {"last", "mean"}) {
    INFO("pool " << pool);
    ag::Generator gen(16);
    nn::ClassificationHead head(4, 3, gen, base::parse_choice<nn::Pooling>(pool));
    head.to(DType::Float64);
    Tensor h = ag_test::randn_leaf({3, 5, 4}, gen);
    const Tensor labels = ag::from_vector(std::vector<int64_t>{2, 0, 1}, {3});
    const Tensor lengths = ag::from_vector(std::vector<int64_t>{2, 5, 1}, {3});
    REQUIRE_GRADCHECK(
        [&](const std::vector<Tensor>& in) {
          return head.loss(head.forward(in.back(), lengths), labels);
        },
        gradcheck_params_and(head, h));
    // the padding's states get no gradient: they never reach the logits
    Tensor x = ag_test::randn_leaf({3, 5, 4}, gen);
    head.loss(head.forward(x, lengths), labels).backward();
    for (int64_t t = 2; t < 5; ++t)
      for (int64_t c = 0; c < 4; ++c) CHECK(x.grad().at({0, t, c}) == 0.0);
  }
}

TEST_CASE("gradcheck a GPT classifier on a padded batch", "[nn][gradcheck][gpt][head]") {
  nn::GPTConfig cfg;
  cfg.vocab_size = 7, cfg.context_length = 4, cfg.d_model = 4, cfg.n_heads = 2;
  cfg.n_layers = 1, cfg.dropout = 0.0, cfg.num_classes = 2, cfg.pool = nn::Pooling::mean;
  nn::GPT model(cfg, 17);
  model.to(DType::Float64);
  ag::Generator gen(17);
  for (auto& p : model.parameters()) ag::copy_(p, ag::randn(p.shape(), gen, DType::Float64) * 0.5);
  const Tensor ids = ag::from_vector(std::vector<int64_t>{1, 3, 0, 2, 5, 6}, {2, 3});
  const Tensor labels = ag::from_vector(std::vector<int64_t>{1, 0}, {2});
  const Tensor lengths = ag::from_vector(std::vector<int64_t>{2, 3}, {2});
  REQUIRE_GRADCHECK(
      [&](const std::vector<Tensor>&) { return model.forward(ids, labels, lengths).loss; },
      model.parameters());
}

TEST_CASE("gradcheck a GPT whose blocks use RMSNorm", "[nn][gradcheck][gpt]") {
  nn::GPTConfig cfg;
  cfg.vocab_size = 7, cfg.context_length = 4, cfg.d_model = 4, cfg.n_heads = 2;
  cfg.n_layers = 1, cfg.dropout = 0.0, cfg.norm = nn::NormKind::rms_norm;
  nn::GPT model(cfg, 15);
  model.to(DType::Float64);
  ag::Generator gen(15);
  for (auto& p : model.parameters()) ag::copy_(p, ag::randn(p.shape(), gen, DType::Float64) * 0.5);
  const Tensor ids = ag::from_vector(std::vector<int64_t>{1, 3, 6, 2, 0, 5}, {2, 3});
  const Tensor targets = ag::from_vector(std::vector<int64_t>{3, 6, 2, 0, 5, 1}, {2, 3});
  REQUIRE_GRADCHECK([&](const std::vector<Tensor>&) { return model.forward(ids, targets).loss; },
                    model.parameters());
}

TEST_CASE("gradcheck a GPT with LoRA adapters over its frozen base", "[nn][gradcheck][adapter]") {
  nn::GPTConfig cfg;
  cfg.vocab_size = 7, cfg.context_length = 4, cfg.d_model = 4, cfg.n_heads = 2;
  cfg.n_layers = 1, cfg.dropout = 0.0, cfg.lora_rank = 2, cfg.lora_alpha = 3;
  nn::GPT model(cfg, 16);  // adapters on W_query, W_key, W_value, out_proj, fc1 and fc2
  model.to(DType::Float64);
  ag::Generator gen(16);
  for (auto& p : model.parameters()) ag::copy_(p, ag::randn(p.shape(), gen, DType::Float64) * 0.5);
  std::vector<Tensor> adapters;
  for (auto& [name, p] : model.named_parameters()) {
    const bool adapter = name.find(".lora_") != std::string::npos;
    p.requires_grad_(adapter);  // the base frozen, as train freezes it
    if (adapter) adapters.push_back(p);
  }
  REQUIRE(adapters.size() == 12u);
  const Tensor ids = ag::from_vector(std::vector<int64_t>{1, 3, 6, 2, 0, 5}, {2, 3});
  const Tensor targets = ag::from_vector(std::vector<int64_t>{3, 6, 2, 0, 5, 1}, {2, 3});
  REQUIRE_GRADCHECK([&](const std::vector<Tensor>&) { return model.forward(ids, targets).loss; },
                    adapters);
}
