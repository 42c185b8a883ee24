// interop/hf_llama.h through `import` and `export`: Llama, Qwen2 and Qwen3 folders round-trip
// bit for bit in each family's layout; configs whose math attograd does not compute (another
// RoPE scaling, a sliding window, quantisation, heads that do not divide) and tensors the
// config does not state are refused in one line naming the file and the key or tensor, before
// anything is read; F16 is written as PyTorch rounds it. (The numbers against PyTorch:
// tests/reference/hf_llama_reference.py.)
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/posix_file.h"
#include "cli/cli.h"
#include "interop/float_codec.h"
#include "interop/formats.h"
#include "interop/hf_llama.h"
#include "interop/safetensors.h"
#include "interop_support.h"
#include "io/checkpoint.h"
#include "support.h"

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A small model of each family's shape: GQA, RoPE, RMSNorm, SwiGLU.
nn::GPTConfig llama_like(interop::LlamaFamily family) {
  nn::GPTConfig c;
  c.vocab_size = 40, c.context_length = 16, c.d_model = 16, c.n_heads = 4, c.n_layers = 2;
  c.d_ff = 24, c.dropout = 0, c.n_kv_heads = 2, c.tie_weights = false;
  c.norm = nn::NormKind::rms_norm, c.position = nn::PositionKind::rope;
  c.mlp = nn::MlpKind::swiglu, c.norm_eps = 1e-6, c.rope_theta = 500000;
  c.qkv_bias = family == interop::LlamaFamily::qwen2, c.linear_bias = false;
  if (family == interop::LlamaFamily::qwen3) c.qk_norm = true, c.head_dim = 6;
  if (family == interop::LlamaFamily::llama) {
    c.rope_scaling = nn::RopeScaling::llama3, c.rope_factor = 8, c.rope_low_freq_factor = 1;
    c.rope_high_freq_factor = 4, c.rope_original_context = 8;
    c.qkv_bias = true, c.linear_bias = true, c.tie_weights = true;
  }
  return c;
}

std::string written(const ag_test::TempDir& dir, const interop::ModelFiles& m,
                    const std::string& name, interop::StoredType dtype = interop::StoredType::f32) {
  const std::string folder = dir.file(name);
  fs::create_directories(folder);
  interop::write_hf_llama(m, folder, dtype);
  return folder;
}

nlohmann::json llama_read_config(const std::string& folder) {
  return nlohmann::json::parse(base::read_input_file(folder + "/config.json", "config"));
}

void llama_write_config(const std::string& folder, const nlohmann::json& j) {
  std::ofstream(folder + "/config.json", std::ios::trunc) << j.dump();
}

std::string llama_import_error(const std::string& path) {
  try {
    interop::import_model(path, "");
  } catch (const interop::InteropError& e) {
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
    return e.what();
  }
  FAIL("imported without an error");
  return "";
}

}  // namespace

TEST_CASE("Llama, Qwen2 and Qwen3 folders round-trip bit for bit in their own layout",
          "[interop][hf_llama]") {
  using F = interop::LlamaFamily;
  ag_test::TempDir dir;
  for (const auto& [family, arch] :
       {std::pair{F::llama, "LlamaForCausalLM"}, std::pair{F::qwen2, "Qwen2ForCausalLM"},
        std::pair{F::qwen3, "Qwen3ForCausalLM"}}) {
    INFO(arch);
    const interop::ModelFiles m = interop_test::random_model(llama_like(family), 5);
    const std::string folder = written(dir, m, arch);
    const nlohmann::json cfg = llama_read_config(folder);
    CHECK(cfg["architectures"] == nlohmann::json{arch});
    CHECK(cfg["num_key_value_heads"] == 2);
    CHECK(cfg["torch_dtype"] == "float32");
    interop::SafetensorsReader file(folder + "/model.safetensors");
    CHECK(file.find("model.layers.1.self_attn.k_proj.weight")->shape ==
          ag::Shape{2 * (family == F::qwen3 ? 6 : 4), 16});
    CHECK((file.find("model.layers.0.self_attn.q_norm.weight") != nullptr) == (family == F::qwen3));
    CHECK((file.find("model.layers.0.self_attn.q_proj.bias") != nullptr) == (family != F::qwen3));
    CHECK((file.find("model.layers.0.self_attn.o_proj.bias") != nullptr) == (family == F::llama));
    CHECK((file.find("lm_head.weight") != nullptr) == (family != F::llama));
    const interop::ModelFiles back = interop::import_model(folder, "");
    interop_test::require_same_config(back.config, m.config);
    interop_test::require_same_weights(back, m);
  }
}

TEST_CASE("a Llama export in F16 and BF16 reads back as the rounded weights",
          "[interop][hf_llama]") {
  ag_test::TempDir dir;
  interop::ModelFiles m = interop_test::random_model(llama_like(interop::LlamaFamily::qwen2), 9);
  const interop::ModelFiles bf16 = interop_test::bf16_rounded(m);
  const std::string b = written(dir, m, "bf16", interop::StoredType::bf16);
  CHECK(llama_read_config(b)["torch_dtype"] == "bfloat16");
  interop_test::require_same_weights(interop::import_model(b, ""), bf16);
  const std::string h = written(dir, m, "f16", interop::StoredType::f16);
  CHECK(llama_read_config(h)["torch_dtype"] == "float16");
  const interop::ModelFiles back = interop::import_model(h, "");
  for (size_t i = 0; i < m.weights.size(); ++i) {  // a half's precision: 11 bits
    const float* a = m.weights[i].second.data<float>();
    const float* r = back.weights[i].second.data<float>();
    for (int64_t j = 0; j < m.weights[i].second.numel(); ++j)
      REQUIRE(std::abs(a[j] - r[j]) <= std::ldexp(std::abs(a[j]), -11));
  }
  m.weights[3].second.data<float>()[0] = 70000.0f;
  fs::create_directories(dir.file("huge"));
  REQUIRE_THROWS_WITH(interop::write_hf_llama(m, dir.file("huge"), interop::StoredType::f16),
                      Contains("holds 70000 at element 0, beyond F16's range"));
}

TEST_CASE(
    "F16 is written rounded to nearest even, as PyTorch rounds, and every half reads "
    "back to itself",
    "[interop][hf_llama]") {
  auto half_of = [](float f) {
    uint16_t h = 0;
    interop::write_floats(&f, 1, interop::StoredType::f16,
                          [&](const char* d, size_t) { std::memcpy(&h, d, 2); });
    return h;
  };
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff)) continue;  // NaNs
    const uint16_t h = static_cast<uint16_t>(bits);
    float f;
    interop::read_floats(reinterpret_cast<const char*>(&h), 1, interop::StoredType::f16, &f);
    REQUIRE(half_of(f) == h);
  }
  CHECK(half_of(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);      // a tie: to the even 1
  CHECK(half_of(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // a tie: to the even above
  CHECK(half_of(65504.0f) == 0x7bff);
  CHECK(half_of(65519.0f) == 0x7bff);
  CHECK(half_of(65520.0f) == 0x7c00);  // halfway to 2^16: infinite
  CHECK(half_of(-1e30f) == 0xfc00);
  CHECK(half_of(std::ldexp(1.0f, -25)) == 0x0000);  // a tie between 0 and the least subnormal
  CHECK(half_of(std::ldexp(3.0f, -26)) == 0x0001);
  CHECK(half_of(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)) == 0x0400);  // to the least normal
}

TEST_CASE("Llama-family configs whose math attograd does not compute are refused with the key",
          "[interop][hf_llama]") {
  ag_test::TempDir dir;
  const std::string folder =
      written(dir, interop_test::random_model(llama_like(interop::LlamaFamily::llama), 3), "m");
  const nlohmann::json good = llama_read_config(folder);
  auto refused = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    llama_write_config(folder, j);
    return llama_import_error(folder);
  };
  auto set = [&](const char* key, const nlohmann::json& v) {
    return refused([&](nlohmann::json& j) { j[key] = v; });
  };
  CHECK_THAT(refused([](auto& j) { j["rope_scaling"]["rope_type"] = "yarn"; }),
             Contains("config.json: rope_scaling.rope_type is 'yarn': attograd computes RoPE"));
  CHECK_THAT(refused([](auto& j) { j["rope_scaling"].erase("factor"); }),
             Contains("rope_scaling.factor is missing"));
  CHECK_THAT(refused([](auto& j) { j["rope_scaling"]["high_freq_factor"] = 0.5; }),
             Contains("rope_scaling.high_freq_factor: config: rope_high_freq_factor (0.5) must be "
                      "larger"));
  CHECK_THAT(set("hidden_act", "gelu"), Contains("hidden_act is 'gelu'"));
  CHECK_THAT(set("use_sliding_window", true), Contains("use_sliding_window is true"));
  CHECK_THAT(set("layer_types", {"full_attention", "sliding_attention"}),
             Contains("layer_types names \"sliding_attention\""));
  CHECK_THAT(set("quantization_config", {{"quant_method", "bitsandbytes"}}),
             Contains("quantization_config is present"));
  CHECK_THAT(set("partial_rotary_factor", 0.5), Contains("partial_rotary_factor is not 1"));
  CHECK_THAT(set("num_key_value_heads", 3),
             Contains("num_key_value_heads: config: n_kv_heads (3) must divide n_heads (4)"));
  CHECK_THAT(set("head_dim", 5), Contains("head_dim: config: rope needs an even head width"));
  CHECK_THAT(set("mlp_bias", false),
             Contains("attention_bias is true and mlp_bias false: attograd's linear_bias"));
  CHECK_THAT(set("architectures", {"LlamaForTokenClassification"}),
             Contains("architectures names \"LlamaForTokenClassification\""));
  CHECK_THAT(set("num_hidden_layers", 1000000000), Contains("num_hidden_layers"));
  CHECK_THAT(set("hidden_size", -16), Contains("hidden_size"));
  CHECK_THAT(set("num_attention_heads", "4"),
             Contains("num_attention_heads is \"4\", not an integer"));
  CHECK_THAT(set("vocab_size", 41), Contains("has shape [40, 16], config.json needs [41, 16]"));
  CHECK_THAT(refused([](auto& j) {
               j["model_type"] = "qwen3", j["architectures"] = {"Qwen3ForCausalLM"};
             }),
             Contains("attention_bias is true and mlp_bias false"));
  llama_write_config(folder, good);
  CHECK_NOTHROW(interop::import_model(folder, ""));
}

TEST_CASE("Llama-family tensors the config does not state are refused by name before reading",
          "[interop][hf_llama]") {
  ag_test::TempDir dir;
  const interop::ModelFiles m =
      interop_test::random_model(llama_like(interop::LlamaFamily::qwen2), 4);
  auto refused = [&](const std::function<void(std::vector<interop::SafetensorsTensor>&)>& edit) {
    std::vector<interop::SafetensorsTensor> tensors;
    for (const auto& [name, t] : m.weights)
      tensors.push_back({*interop::llama_hf_name(name), t.shape(), nullptr, t.data<float>()});
    edit(tensors);
    interop::write_safetensors(dir.file("m/model.safetensors"), tensors, interop::StoredType::f32);
    return llama_import_error(dir.file("m"));
  };
  written(dir, m, "m");
  CHECK_THAT(refused([](auto& t) {
               t.push_back({"model.layers.0.self_attn.rotary.weight", {2}, [](float*) {}});
             }),
             Contains("tensor 'model.layers.0.self_attn.rotary.weight' is not part of Qwen2"));
  CHECK_THAT(refused([](auto& t) {
               t.push_back({"model.layers.2.self_attn.rotary_emb.inv_freq", {2}, [](float*) {}});
             }),
             Contains("is not part of Qwen2"));
  CHECK_THAT(refused([](auto& t) { t.pop_back(); }),
             Contains("no lm_head.weight, and config.json unties the head"));
  CHECK_THAT(refused([](auto& t) { t.erase(t.begin() + 3); }),
             Contains("no tensor model.layers.0.self_attn.q_proj.bias (for "
                      "blocks.0.attn.W_query.bias)"));
  CHECK_THAT(refused([](auto& t) {
               for (auto& x : t)
                 if (x.name == "model.layers.1.self_attn.v_proj.weight")
                   x.shape = {16, 16}, x.values = nullptr, x.fill = [](float*) {};
             }),
             Contains("tensor 'model.layers.1.self_attn.v_proj.weight' has shape [16, 16], "
                      "config.json needs [8, 16]"));
}

TEST_CASE(
    "import --context shortens a RoPE model's context; hostile configs exit 2 with no "
    "output",
    "[interop][hf_llama][cli]") {
  ag_test::TempDir dir;
  nn::GPTConfig c = llama_like(interop::LlamaFamily::qwen3);
  const std::string folder = written(dir, interop_test::random_model(c, 2), "q");
  const std::string ckpt = dir.file("q.h5");
  REQUIRE(interop_test::run_cli({"import", folder, "--out", ckpt, "--context", "8"}) == 0);
  CHECK(io::load_checkpoint(ckpt).config["context_length"] == 8);
  CHECK(interop_test::run_cli({"import", folder, "--out", dir.file("r.h5"), "--context", "17"}) ==
        2);
  nlohmann::json j = llama_read_config(folder);
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  llama_write_config(folder, j);
  CHECK(interop_test::run_cli({"import", folder, "--out", dir.file("s.h5")}) == 2);
  CHECK_FALSE(fs::exists(dir.file("s.h5")));
  REQUIRE(interop_test::run_cli({"export", ckpt, "--format", "llmc", "--out", dir.file("x.bin"),
                                 "--dtype", "f16"}) == 2);
  CHECK_FALSE(fs::exists(dir.file("x.bin")));
}
