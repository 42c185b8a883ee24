// The Llama family's options of the one model description (nn/config.h: RoPE, grouped-query
// attention, SwiGLU, q/k norms, explicit head width, biases per projection): float64
// gradient checks of each new module and of whole models, their parameter names (the
// importers' contract), their LoRA targets, and their keys in a checkpoint's config.
#include <catch2/catch.hpp>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/autograd.h"
#include "autograd/test_hooks.h"
#include "decode_support.h"
#include "gradcheck_helpers.h"
#include "nn/nn.h"
#include "train/config.h"

using ag::DType;
using ag::Tensor;
using Catch::Matchers::Contains;

namespace {

std::vector<Tensor> params_and(const nn::Module& m, const Tensor& x) {
  std::vector<Tensor> inputs = m.parameters();
  inputs.push_back(x);
  return inputs;
}

std::vector<std::string> names_of(const nn::GPT& model) {
  std::vector<std::string> names;
  for (const auto& [name, p] : model.named_parameters()) names.push_back(name);
  return names;
}

}  // namespace

TEST_CASE("gradcheck SwiGLU with and without biases", "[nn][gradcheck][llama]") {
  for (bool bias : {false, true}) {
    INFO("bias " << bias);
    ag::Generator gen(21);
    nn::SwiGLU mlp(3, 5, gen, bias);
    mlp.to(DType::Float64);
    if (bias)
      for (auto& p : mlp.parameters())
        if (p.dim() == 1) ag::copy_(p, ag::randn(p.shape(), gen, DType::Float64));
    Tensor x = ag_test::randn_leaf({2, 3, 3}, gen);
    REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return mlp.forward(in.back()); },
                      params_and(mlp, x));
  }
}

TEST_CASE("gradcheck grouped attention with RoPE, q/k norms and its own head width",
          "[nn][gradcheck][llama]") {
  nn::GPTConfig rope_cfg;
  rope_cfg.position = nn::PositionKind::rope, rope_cfg.head_dim = 4, rope_cfg.context_length = 6;
  rope_cfg.rope_theta = 100;
  for (int64_t kv_heads : {4, 2, 1}) {
    for (bool qk_norm : {false, true}) {
      for (double p : {0.0, 0.3}) {
        INFO("kv heads " << kv_heads << " qk_norm " << qk_norm << " dropout " << p);
        ag::Generator gen(22);
        auto mask_gen = std::make_shared<ag::Generator>(0);
        nn::AttentionOptions o;
        o.num_kv_heads = kv_heads, o.head_dim = 4, o.out_bias = false, o.qk_norm = qk_norm;
        o.rope = nn::rope_tables(rope_cfg);
        // 4 heads of 4 (16 wide) over a 6-wide input and output
        nn::MultiHeadAttention attn(6, 6, 6, p, 4, /*qkv_bias=*/true, gen, mask_gen, o);
        attn.to(DType::Float64);
        for (auto& q : attn.parameters())
          if (q.dim() == 1) ag::copy_(q, ag::randn(q.shape(), gen, DType::Float64) * 0.5 + 1.0);
        Tensor x = ag_test::randn_leaf({2, 5, 6}, gen);
        auto fn = [&](const std::vector<Tensor>& in) {
          mask_gen->manual_seed(2024);
          return attn.forward(in.back());
        };
        REQUIRE_GRADCHECK(fn, params_and(attn, x));
      }
    }
  }
}

TEST_CASE("gradcheck whole models of the Llama, Qwen2 and Qwen3 shapes", "[nn][gradcheck][llama]") {
  for (auto [name, cfg] : ag_test::llama_family_configs()) {
    INFO(name);
    cfg.vocab_size = 7, cfg.context_length = 4, cfg.d_model = cfg.qk_norm ? 6 : 8;
    cfg.n_heads = 4, cfg.n_kv_heads = 2, cfg.head_dim = cfg.qk_norm ? 2 : 0, cfg.d_ff = 6;
    cfg.n_layers = 1, cfg.rope_original_context = 2;
    nn::GPT model(cfg, 23);
    model.to(DType::Float64);
    ag::Generator gen(23);
    for (auto& p : model.parameters())
      ag::copy_(p, ag::randn(p.shape(), gen, DType::Float64) * 0.5 + (p.dim() == 1 ? 1.0 : 0.0));
    const Tensor ids = ag::from_vector(std::vector<int64_t>{1, 3, 6, 2, 0, 5}, {2, 3});
    const Tensor targets = ag::from_vector(std::vector<int64_t>{3, 6, 2, 0, 5, 1}, {2, 3});
    REQUIRE_GRADCHECK([&](const std::vector<Tensor>&) { return model.forward(ids, targets).loss; },
                      model.parameters());
  }
}

TEST_CASE("a Llama-family model registers Hugging Face's modules under attograd's names",
          "[nn][llama]") {
  const auto configs = ag_test::llama_family_configs();
  nn::GPTConfig qwen3 = configs[2].second;
  qwen3.n_layers = 1;
  const std::vector<std::string> expected{"tok_emb.weight",
                                          "blocks.0.ln1.weight",
                                          "blocks.0.attn.W_query.weight",
                                          "blocks.0.attn.W_key.weight",
                                          "blocks.0.attn.W_value.weight",
                                          "blocks.0.attn.out_proj.weight",
                                          "blocks.0.attn.q_norm.weight",
                                          "blocks.0.attn.k_norm.weight",
                                          "blocks.0.ln2.weight",
                                          "blocks.0.mlp.gate_proj.weight",
                                          "blocks.0.mlp.up_proj.weight",
                                          "blocks.0.mlp.down_proj.weight",
                                          "ln_f.weight"};
  CHECK(names_of(nn::GPT(qwen3, 1)) == expected);
  const auto shapes = qwen3.parameter_shapes();
  CHECK(shapes[2].second == ag::Shape{64, 48});  // 4 heads of 16 from d_model 48
  CHECK(shapes[3].second == ag::Shape{32, 48});  // 2 key/value heads
  CHECK(shapes[5].second == ag::Shape{48, 64});
  CHECK(shapes[6].second == ag::Shape{16});
  nn::GPTConfig qwen2 = configs[1].second;
  qwen2.n_layers = 1;
  const std::vector<std::string> names = names_of(nn::GPT(qwen2, 1));
  CHECK(std::count(names.begin(), names.end(), "blocks.0.attn.W_key.bias") == 1);
  CHECK(std::count(names.begin(), names.end(), "blocks.0.attn.out_proj.bias") == 0);
  CHECK(std::count(names.begin(), names.end(), "pos_emb.weight") == 0);
}

TEST_CASE("LoRA targets take the Llama family's module names and all-linear", "[nn][llama]") {
  nn::GPTConfig cfg = ag_test::llama_family_configs()[0].second;
  cfg.n_layers = 1, cfg.lora_rank = 2;
  auto adapted = [&](const std::string& targets) {
    cfg.lora_targets = targets;
    std::vector<std::string> linears;
    for (const std::string& name : names_of(nn::GPT(cfg, 2)))
      if (name.ends_with(".lora_A.weight")) linears.push_back(name.substr(9, name.size() - 23));
    return linears;
  };
  CHECK(adapted("q_proj,v_proj") == std::vector<std::string>{"attn.W_query", "attn.W_value"});
  CHECK(adapted("all-linear").size() == 7u);
  CHECK(adapted("mlp.fc1,o_proj") ==
        std::vector<std::string>{"attn.out_proj", "mlp.gate_proj", "mlp.up_proj"});
  nn::GPTConfig gpt2;
  gpt2.lora_rank = 2, gpt2.lora_targets = "gate_proj";
  REQUIRE_THROWS_WITH(gpt2.validate(), Contains("gate_proj names a SwiGLU MLP's Linear"));
}

TEST_CASE("the Llama family's keys reach a checkpoint's config only when set", "[nn][llama]") {
  train::RunConfig gpt2;
  const nlohmann::json plain = gpt2.to_json();
  for (const char* key : {"position", "rope_theta", "n_kv_heads", "head_dim", "norm_eps", "mlp",
                          "linear_bias", "qk_norm", "rope_scaling", "rope_factor"})
    CHECK_FALSE(plain.contains(key));
  for (const auto& [name, cfg] : ag_test::llama_family_configs()) {
    INFO(name);
    train::RunConfig run;
    run.model = cfg;
    const nn::GPTConfig back = train::RunConfig::from_json(run.to_json()).model;
    CHECK(back.position == cfg.position);
    CHECK(back.rope_theta == cfg.rope_theta);
    CHECK(back.rope_scaling == cfg.rope_scaling);
    CHECK(back.rope_factor == cfg.rope_factor);
    CHECK(back.rope_original_context == cfg.rope_original_context);
    CHECK(back.n_kv_heads == cfg.n_kv_heads);
    CHECK(back.head_dim == cfg.head_dim);
    CHECK(back.qk_norm == cfg.qk_norm);
    CHECK(back.mlp == cfg.mlp);
    CHECK(back.linear_bias == cfg.linear_bias);
    CHECK(back.norm_eps == cfg.norm_eps);
  }
}

TEST_CASE("the Llama family's options refuse shapes that do not fit", "[nn][llama]") {
  nn::GPTConfig cfg = ag_test::llama_family_configs()[0].second;
  cfg.n_kv_heads = 3;
  REQUIRE_THROWS_WITH(cfg.validate(), Contains("n_kv_heads (3) must divide n_heads (8)"));
  cfg.n_kv_heads = 2, cfg.head_dim = 7;
  REQUIRE_THROWS_WITH(cfg.validate(), Contains("rope needs an even head width"));
  cfg.head_dim = 0, cfg.position = nn::PositionKind::learned;
  REQUIRE_THROWS_WITH(cfg.validate(), Contains("rope_scaling is set but position is learned"));
}

TEST_CASE("RoPE's tables follow Llama 3's frequency scaling", "[nn][llama]") {
  nn::GPTConfig cfg;
  cfg.position = nn::PositionKind::rope, cfg.d_model = 64, cfg.n_heads = 1;  // 32 pairs
  cfg.rope_theta = 500000;
  const std::vector<float> plain = nn::rope_inverse_frequencies(cfg);
  cfg.rope_scaling = nn::RopeScaling::llama3, cfg.rope_original_context = 8192;
  const std::vector<float> scaled = nn::rope_inverse_frequencies(cfg);
  // wavelength 2 pi / f: under 8192 / 4 kept, over 8192 / 1 divided by 8, blended between
  for (size_t i = 0; i < plain.size(); ++i) {
    const double wavelength = 2 * 3.141592653589793 / plain[i];
    INFO(i << ": wavelength " << wavelength);
    if (wavelength < 2048) CHECK(scaled[i] == plain[i]);
    if (wavelength > 8192) CHECK(scaled[i] == Approx(plain[i] / 8.0).epsilon(1e-6));
    if (wavelength > 2048 && wavelength < 8192) {
      CHECK(scaled[i] < plain[i]);
      CHECK(scaled[i] > plain[i] / 8.0);
    }
  }
  CHECK(plain[0] == 1.0f);
  const auto tables = nn::rope_tables(cfg);
  CHECK(tables->cos.at({0, 5}) == 1.0);
  CHECK(tables->sin.at({3, 0}) == Approx(std::sin(3.0)));
}

namespace {

// out and the gradient of sum(out * g) for qkv of grouped attention (8 query heads over
// `kv_heads`), on `threads` threads, in float32 or in a bf16 scope on `kernel`
std::vector<std::vector<double>> family_grouped_attention(int64_t kv_heads, int threads, bool bf16,
                                                          ag::AttentionKernelForTests kernel) {
  ag::Generator gen(31);
  const int64_t B = 2, T = 70, D = 16, H = 8;
  Tensor qkv = ag::randn({B, T, (H + 2 * kv_heads) * D}, gen).requires_grad_();
  const Tensor g = ag::randn({B, T, H * D}, gen);
  ag::force_attention_kernel_for_tests(kernel);
  ag::set_num_threads(threads);
  std::vector<std::vector<double>> all;
  {
    std::optional<ag::AutocastScope> autocast;
    if (bf16) autocast.emplace(ag::Precision::bf16);
    ag::Generator dropout_gen(3);
    const Tensor out = ag::causal_self_attention(qkv, H, kv_heads, 0.1, &dropout_gen);
    ag::sum(ag::mul(out, g)).backward();
    all = {out.to_vector(), qkv.grad().to_vector()};
  }
  ag::set_num_threads(1);
  ag::force_attention_kernel_for_tests(ag::AttentionKernelForTests::chosen);
  return all;
}

}  // namespace

TEST_CASE("grouped attention gives the same bits on one thread and on two",
          "[llama][attention][threads]") {
  using K = ag::AttentionKernelForTests;
  for (int64_t kv : {4, 2, 1}) {
    INFO(kv << " key/value heads");
    CHECK(family_grouped_attention(kv, 1, false, K::chosen) ==
          family_grouped_attention(kv, 2, false, K::chosen));
    CHECK(family_grouped_attention(kv, 1, true, K::fma) ==
          family_grouped_attention(kv, 2, true, K::fma));
    if (ag::attention_bf16_units_available())
      CHECK(family_grouped_attention(kv, 1, true, K::units) ==
            family_grouped_attention(kv, 2, true, K::units));
  }
}

TEST_CASE("grouped attention on the BF16 units agrees with the FMA kernels", "[llama][bf16]") {
  using K = ag::AttentionKernelForTests;
  if (!ag::attention_bf16_units_available()) {
    WARN("skipped: this CPU has no AVX-512 BF16 instructions");
    return;
  }
  for (int64_t kv : {2, 1}) {
    const auto units = family_grouped_attention(kv, 1, true, K::units),
               fma = family_grouped_attention(kv, 1, true, K::fma);
    for (size_t i = 0; i < 2; ++i) {
      double err = 0, scale = 0;
      for (size_t x = 0; x < fma[i].size(); ++x)
        err = std::max(err, std::fabs(units[i][x] - fma[i][x])),
        scale = std::max(scale, std::fabs(fma[i][x]));
      INFO(kv << " key/value heads, result " << i << ": error " << err << ", scale " << scale);
      CHECK(err <= 0x1p-7 * scale);  // tolerance as tests/test_attention_bf16_kernels.cpp's
    }
  }
}
