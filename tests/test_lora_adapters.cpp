// LoRA adapters apart from their base (interop/lora_adapter.h, peft.h, gguf_lora.h): exact round
// trips of GPT-2- and Llama-shaped adapters through peft's folder and llama.cpp's adapter GGUF,
// the layouts those tools read (GPT-2's fused q/k/v, llama's permuted rows), and every
// adapter file that does not fit its base refused naming the file and the tensor or key.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fuzz/targets.h"
#include "interop/adapter_formats.h"
#include "interop/gguf_format.h"
#include "interop/gguf_lora.h"
#include "interop/gguf_model.h"
#include "interop/lora_adapter.h"
#include "interop/peft.h"
#include "interop/safetensors.h"
#include "interop_support.h"
#include "support.h"
#include "train/config.h"

using ag_test::TempDir;
using Catch::Matchers::Contains;
using interop::InteropError;
using interop::StoredType;
using json = nlohmann::json;
namespace gguf = interop::gguf;

namespace {

// A LoRA run's checkpoint on a model of cfg: every tensor random (B too, so that nothing hides
// behind zeros), and its base's (the same weights, no adapters).
struct AdapterRun {
  io::Checkpoint lora, base;
};

AdapterRun lora_run(nn::GPTConfig cfg, int64_t rank, const std::string& targets,
                    unsigned seed = 7) {
  cfg.lora_rank = rank, cfg.lora_alpha = 6, cfg.lora_targets = targets;
  const interop::ModelFiles m = interop_test::random_model(cfg, seed);
  AdapterRun r;
  train::RunConfig run;
  run.model = cfg;
  r.lora.config = run.to_json(), r.lora.model = m.weights, r.lora.source = "run.h5";
  run.model = cfg.without_adapters();
  r.base.config = run.to_json(), r.base.source = "base.h5";
  for (const auto& [name, t] : m.weights)
    if (name.find(".lora_") == std::string::npos) r.base.model.emplace_back(name, t);
  return r;
}

nn::GPTConfig gpt2_config() {
  return interop_test::gpt2_like(50, 16, 24, 4, 2);
}

// The checkpoint import writes holds the run's adapters bit for bit and its lora settings.
void require_same_run(const io::Checkpoint& got, const io::Checkpoint& want) {
  const nn::GPTConfig a = train::RunConfig::from_json(got.config).model;
  const nn::GPTConfig b = train::RunConfig::from_json(want.config).model;
  REQUIRE(a.same_adapters(b));
  REQUIRE(ag_test::same_bits(got.model, want.model));
}

io::Checkpoint through(const AdapterRun& r, const std::string& format, const TempDir& dir,
                       StoredType dtype = StoredType::f32) {
  const std::string out = dir.file(format == "peft" ? "adapter" : "adapter.gguf");
  interop::export_adapter(r.lora, format, out, dtype, true);
  return interop::import_adapter(out, r.base);
}

}  // namespace

TEST_CASE("GPT-2- and Llama-shaped adapters round-trip bit for bit through peft and GGUF",
          "[adapters]") {
  std::vector<std::pair<std::string, nn::GPTConfig>> models = {{"gpt2", gpt2_config()}};
  for (const auto& m : interop_test::llama_family_like()) models.push_back(m);
  for (const auto& [name, cfg] : models)
    for (const char* targets : {"attn.qkv,attn.out_proj,mlp.fc1,mlp.fc2", "attn.out_proj,mlp.fc2",
                                "q_proj,v_proj", "all-linear", "v_proj,o_proj,k_proj,q_proj"}) {
      if (name == "gpt2" && std::string(targets).find("q_proj") != std::string::npos)
        continue;  // GPT-2 fuses them in c_attn
      const AdapterRun r = lora_run(cfg, 2, targets);
      for (const char* format : {"peft", "gguf-lora"}) {
        INFO(name << " " << targets << " " << format);
        TempDir dir;
        require_same_run(through(r, format, dir), r.lora);
      }
    }
}

TEST_CASE("peft's folder names transformers' modules and states c_attn's rank in rank_pattern",
          "[adapters]") {
  const AdapterRun r = lora_run(gpt2_config(), 2, "attn.qkv,attn.out_proj");
  TempDir dir;
  interop::export_adapter(r.lora, "peft", dir.file("a"), StoredType::f32, false);
  const json cfg = json::parse(std::ifstream(dir.file("a/adapter_config.json")));
  REQUIRE(cfg["peft_type"] == "LORA");
  REQUIRE(cfg["r"] == 2);
  REQUIRE(cfg["lora_alpha"] == 6);
  REQUIRE(cfg["fan_in_fan_out"] == true);
  REQUIRE(cfg["task_type"] == "CAUSAL_LM");
  REQUIRE(cfg["target_modules"] == json{"c_attn", "attn.c_proj"});  // not mlp.c_proj
  REQUIRE(cfg["rank_pattern"] == json{{"c_attn", 6}});
  REQUIRE(cfg["alpha_pattern"] == json{{"c_attn", 18}});
  const interop::SafetensorsReader in(dir.file("a/adapter_model.safetensors"));
  const auto* a = in.find("base_model.model.transformer.h.1.attn.c_attn.lora_A.weight");
  const auto* b = in.find("base_model.model.transformer.h.1.attn.c_attn.lora_B.weight");
  REQUIRE((a && b));
  REQUIRE(a->shape == ag::Shape{6, 24});
  REQUIRE(b->shape == ag::Shape{72, 6});
  // block-diagonal: W_key's rows of B are zeros outside columns 2-3
  const ag::Tensor B = in.read(*b);
  for (int64_t row = 24; row < 48; ++row)
    for (int64_t col : {0, 1, 4, 5}) REQUIRE(B.data<float>()[row * 6 + col] == 0.0F);
}

TEST_CASE("a GGUF adapter has llama.cpp's keys, names and shapes, llama's rows permuted",
          "[adapters]") {
  const auto family = interop_test::llama_family_like();
  const auto& [arch, cfg] = family[0];
  const AdapterRun r = lora_run(cfg, 2, "attn.qkv");
  TempDir dir;
  interop::export_adapter(r.lora, "gguf-lora", dir.file("a.gguf"), StoredType::f32, false);
  const auto in = interop::InputBytes::open(dir.file("a.gguf"));
  const gguf::File f = gguf::read_header(in);
  REQUIRE(f.find("general.type")->strings[0] == "adapter");
  REQUIRE(f.find("general.architecture")->strings[0] == arch);
  REQUIRE(f.find("adapter.type")->strings[0] == "lora");
  REQUIRE(f.find("adapter.lora.alpha")->floats[0] == 6.0);
  const gguf::TensorInfo* b = interop::find_tensor(f, "blk.1.attn_q.weight.lora_b");
  REQUIRE(b);
  REQUIRE(b->ne == std::vector<uint64_t>{2, static_cast<uint64_t>(cfg.d_model)});
  REQUIRE(interop::find_tensor(f, "blk.1.attn_k.weight.lora_a")->ne ==
          std::vector<uint64_t>{static_cast<uint64_t>(cfg.d_model), 2});
  const std::vector<float> stored = gguf::read_tensor(in, f, *b);
  const ag::Tensor ours = [&] {
    for (const auto& [name, t] : r.lora.model)
      if (name == "blocks.1.attn.W_query.lora_B.weight") return t;
    return ag::Tensor();
  }();
  for (int64_t row = 0; row < cfg.d_model; ++row)
    for (int64_t col = 0; col < 2; ++col)
      REQUIRE(
          stored[row * 2 + col] ==
          ours.data<float>()[interop::gguf_row_source(row, cfg.d_model, cfg.n_heads) * 2 + col]);
}

TEST_CASE("GPT-2's attn_qkv adapter makes every GGUF adapter rank 3r, alpha 3 alpha",
          "[adapters]") {
  const AdapterRun r = lora_run(gpt2_config(), 2, "attn.qkv,mlp.fc2");
  TempDir dir;
  interop::export_adapter(r.lora, "gguf-lora", dir.file("a.gguf"), StoredType::f32, false);
  const auto in = interop::InputBytes::open(dir.file("a.gguf"));
  const gguf::File f = gguf::read_header(in);
  REQUIRE(f.find("adapter.lora.alpha")->floats[0] == 18.0);
  REQUIRE(interop::find_tensor(f, "blk.0.attn_qkv.weight.lora_b")->ne ==
          std::vector<uint64_t>{6, 72});
  const gguf::TensorInfo* down = interop::find_tensor(f, "blk.0.ffn_down.weight.lora_a");
  REQUIRE(down->ne == std::vector<uint64_t>{96, 6});
  const std::vector<float> a = gguf::read_tensor(in, f, *down);
  REQUIRE(std::all_of(a.begin() + 2 * 96, a.end(), [](float v) { return v == 0.0F; }));
}

TEST_CASE("F16 and BF16 adapters read back as their rounded values", "[adapters]") {
  const AdapterRun r = lora_run(gpt2_config(), 2, "attn.out_proj");
  for (StoredType dtype : {StoredType::f16, StoredType::bf16}) {
    TempDir dir;
    const io::Checkpoint back = through(r, "gguf-lora", dir, dtype);
    const io::Checkpoint peft = through(r, "peft", dir, dtype);
    REQUIRE(ag_test::same_bits(back.model, peft.model));
  }
}

TEST_CASE("an adapter of another tool trained on fused q/k/v splits into adapters sharing A",
          "[adapters]") {
  // peft's own GPT-2 adapter: rank 2 on the whole of c_attn (not block-diagonal)
  const AdapterRun r = lora_run(gpt2_config(), 2, "attn.qkv");
  TempDir dir;
  const std::string folder = dir.file("a");
  std::filesystem::create_directories(folder);
  std::vector<float> A(2 * 24, 0.5F), B(72 * 2, 0.25F);
  std::vector<interop::SafetensorsTensor> t;
  for (int l = 0; l < 2; ++l) {
    const std::string m = fmt::format("base_model.model.transformer.h.{}.attn.c_attn.", l);
    t.push_back({m + "lora_A.weight", {2, 24}, {}, A.data()});
    t.push_back({m + "lora_B.weight", {72, 2}, {}, B.data()});
  }
  interop::write_safetensors(folder + "/adapter_model.safetensors", t, StoredType::f32);
  dir.write("a/adapter_config.json", R"({"peft_type": "LORA", "r": 2, "lora_alpha": 4})");
  const io::Checkpoint got = interop::import_adapter(folder, r.base);
  const nn::GPTConfig c = train::RunConfig::from_json(got.config).model;
  REQUIRE(c.lora_rank == 2);
  REQUIRE(c.lora_alpha == 4);
  REQUIRE(c.lora_targets == "attn.qkv");
  for (const auto& [name, tensor] : got.model)
    if (name.find("lora_A") != std::string::npos) REQUIRE(tensor.data<float>()[0] == 0.5F);
}

// ------------------------------------------------------------------ refused, with the reason
namespace {

std::string adapter_refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const InteropError& e) {
    return e.what();
  }
  return "(accepted)";
}

// A peft folder of run r with adapter_config.json's key set to value (null: removed).
std::string peft_with_key(const AdapterRun& r, const TempDir& dir, const std::string& key,
                          const json& value) {
  const std::string folder = dir.file("p");
  interop::export_adapter(r.lora, "peft", folder, StoredType::f32, true);
  json cfg = json::parse(std::ifstream(folder + "/adapter_config.json"));
  if (value.is_null())
    cfg.erase(key);
  else
    cfg[key] = value;
  dir.write("p/adapter_config.json", cfg.dump());
  return adapter_refusal([&] { interop::import_adapter(folder, r.base); });
}

// A peft folder of these tensors (each zeros) and r 2.
std::string peft_with_tensors(const AdapterRun& r, const TempDir& dir,
                              const std::vector<std::pair<std::string, ag::Shape>>& tensors) {
  const std::string folder = dir.file("t");
  std::filesystem::create_directories(folder);
  std::vector<interop::SafetensorsTensor> t;
  for (const auto& [name, shape] : tensors) t.push_back({name, shape, [](float*) {}});
  interop::write_safetensors(folder + "/adapter_model.safetensors", t, StoredType::f32);
  dir.write("t/adapter_config.json", R"({"peft_type": "LORA", "r": 2, "lora_alpha": 4})");
  return adapter_refusal([&] { interop::import_adapter(folder, r.base); });
}

}  // namespace

TEST_CASE("a checkpoint without adapters, or adapters its format cannot hold, is refused",
          "[adapters]") {
  const AdapterRun r = lora_run(gpt2_config(), 2, "q_proj");
  TempDir dir;
  CHECK_THAT(adapter_refusal([&] {
               interop::export_adapter(r.base, "peft", dir.file("x"), StoredType::f32, false);
             }),
             Contains("base.h5: the checkpoint has no LoRA adapters (lora_rank 0)"));
  for (const char* format : {"peft", "gguf-lora"})
    CHECK_THAT(adapter_refusal([&] {
                 interop::export_adapter(r.lora, format, dir.file("y"), StoredType::f32, true);
               }),
               Contains("as one tensor") && Contains("attn.qkv"));
}

TEST_CASE("peft adapter files that do not fit the base are refused naming the tensor or key",
          "[adapters]") {
  const AdapterRun r = lora_run(gpt2_config(), 2, "attn.out_proj,mlp.fc2");
  TempDir dir;
  const std::string m = "base_model.model.transformer.h.0.attn.c_proj.";
  CHECK_THAT(peft_with_key(r, dir, "peft_type", "IA3"), Contains("key peft_type is \"IA3\""));
  CHECK_THAT(peft_with_key(r, dir, "peft_type", nullptr), Contains("key peft_type is missing"));
  CHECK_THAT(peft_with_key(r, dir, "use_dora", true), Contains("key use_dora is true"));
  CHECK_THAT(peft_with_key(r, dir, "use_rslora", true), Contains("key use_rslora"));
  CHECK_THAT(peft_with_key(r, dir, "bias", "all"), Contains("key bias is \"all\""));
  CHECK_THAT(peft_with_key(r, dir, "modules_to_save", json{"lm_head"}),
             Contains("key modules_to_save"));
  CHECK_THAT(peft_with_key(r, dir, "r", 3), Contains("has rank 2, adapter_config.json states 3"));
  CHECK_THAT(peft_with_key(r, dir, "r", 0), Contains("key r is 0"));
  CHECK_THAT(peft_with_key(r, dir, "r", 2.5), Contains("key r is not a whole number"));
  CHECK_THAT(peft_with_key(r, dir, "lora_alpha", "big"), Contains("key lora_alpha is \"big\""));
  CHECK_THAT(peft_with_key(r, dir, "rank_pattern", json{{"c_proj", -1}}),
             Contains("key rank_pattern is not an object of positive numbers"));
  CHECK_THAT(peft_with_tensors(r, dir, {{m + "lora_A.weight", {2, 24}}}),
             Contains("attn.c_proj has a lora_A and no lora_B"));
  CHECK_THAT(
      peft_with_tensors(r, dir, {{m + "lora_A.weight", {2, 25}}, {m + "lora_B.weight", {24, 2}}}),
      Contains("[2, 25]") && Contains("needs lora_A [R, 24] and lora_B [24, R]"));
  CHECK_THAT(
      peft_with_tensors(r, dir, {{m + "lora_A.weight", {2, 24}}, {m + "lora_B.weight", {24, 3}}}),
      Contains("needs lora_A [R, 24]"));
  CHECK_THAT(peft_with_tensors(r, dir, {{"base_model.model.lm_head.lora_A.weight", {2, 24}}}),
             Contains("tensor base_model.model.lm_head.lora_A.weight is not the lora_A or lora_B"));
  CHECK_THAT(
      peft_with_tensors(r, dir, {{m + "lora_A.weight", {2, 24}}, {m + "lora_B.weight", {24, 2}}}),
      Contains("no adapter on blocks.1.attn.out_proj"));
  CHECK_THAT(peft_with_tensors(r, dir, {}), Contains("holds no adapter tensors"));
  // an adapter of c_attn at a rank neither r nor 3r
  const std::string qkv = "base_model.model.transformer.h.0.attn.c_attn.";
  CHECK_THAT(peft_with_tensors(
                 r, dir, {{qkv + "lora_A.weight", {4, 24}}, {qkv + "lora_B.weight", {72, 4}}}),
             Contains("has rank 4, adapter_config.json states 2"));
}

TEST_CASE("an adapter onto another base is refused naming the tensor", "[adapters]") {
  const AdapterRun r = lora_run(gpt2_config(), 2, "attn.out_proj");
  nn::GPTConfig wider = gpt2_config();
  wider.d_model = 32;
  const AdapterRun other = lora_run(wider, 2, "attn.out_proj");
  const auto configs = interop_test::llama_family_like();
  const AdapterRun family = lora_run(configs[0].second, 2, "attn.out_proj");
  for (const char* format : {"peft", "gguf-lora"}) {
    TempDir dir;
    const std::string out = dir.file("a");
    interop::export_adapter(r.lora, format, out, StoredType::f32, false);
    CHECK_THAT(adapter_refusal([&] { interop::import_adapter(out, other.base); }),
               Contains("[2, 24]") && Contains("32"));
    CHECK_THAT(adapter_refusal([&] { interop::import_adapter(out, family.base); }),
               Contains(format == std::string("peft")
                            ? "is not the lora_A or lora_B"
                            : "general.architecture is 'gpt2', the base's is 'llama'"));
    CHECK_THAT(adapter_refusal([&] { interop::import_adapter(out, r.lora); }),
               Contains("the base has LoRA adapters already"));
  }
}

namespace {

// A GGUF adapter for r's base with these keys and tensors (zeros).
std::string gguf_adapter(
    const AdapterRun& r, const TempDir& dir, std::vector<std::pair<std::string, gguf::Value>> keys,
    const std::vector<std::pair<std::string, std::vector<uint64_t>>>& tensors) {
  gguf::File f;
  f.keys = std::move(keys);
  for (const auto& [name, ne] : tensors) f.tensors.push_back({name, ne, gguf::kF32, 0});
  std::string bytes;
  const interop::ByteSink out = [&](const char* d, size_t n) { bytes.append(d, n); };
  gguf::write_header(f, out);
  for (const auto& t : f.tensors) {
    interop::write_zeros(static_cast<int64_t>(t.elements()), StoredType::f32, out);
    gguf::write_padding(t.bytes(), f.alignment, out);
  }
  const std::string path = dir.write("x.gguf", bytes);
  return adapter_refusal([&] { interop::import_adapter(path, r.base); });
}

std::vector<std::pair<std::string, gguf::Value>> adapter_keys(const char* type = "lora") {
  return {{"general.architecture", gguf::Value::string("gpt2")},
          {"general.type", gguf::Value::string("adapter")},
          {"adapter.type", gguf::Value::string(type)},
          {"adapter.lora.alpha", gguf::Value::f32(4)}};
}

}  // namespace

TEST_CASE("GGUF adapter files that do not fit the base are refused naming the tensor or key",
          "[adapters]") {
  const AdapterRun r = lora_run(gpt2_config(), 2, "attn.out_proj");
  TempDir dir;
  const std::string t = "blk.0.attn_output.weight.lora_";
  CHECK_THAT(gguf_adapter(r, dir, adapter_keys("control_vector"),
                          {{t + "a", {24, 2}}, {t + "b", {2, 24}}}),
             Contains("key adapter.type is 'control_vector'"));
  auto keys = adapter_keys();
  keys.erase(keys.begin());
  CHECK_THAT(gguf_adapter(r, dir, keys, {{t + "a", {24, 2}}, {t + "b", {2, 24}}}),
             Contains("key general.architecture is missing"));
  keys = adapter_keys();
  keys.emplace_back("attograd.lora_rank", gguf::Value::u32(0));
  CHECK_THAT(gguf_adapter(r, dir, keys, {{t + "a", {24, 2}}, {t + "b", {2, 24}}}),
             Contains("key attograd.lora_rank is 0"));
  CHECK_THAT(gguf_adapter(r, dir, adapter_keys(), {{t + "a", {24, 2}}}),
             Contains("tensor blk.0.attn_output.weight.lora_a has no lora_b"));
  CHECK_THAT(gguf_adapter(r, dir, adapter_keys(), {{t + "a", {24, 2}}, {t + "b", {3, 24}}}),
             Contains("have ne [24, 2] and [3, 24]"));
  CHECK_THAT(gguf_adapter(r, dir, adapter_keys(), {{t + "a", {24, 2, 1}}, {t + "b", {2, 24}}}),
             Contains("have ne [24, 2, 1]"));
  CHECK_THAT(gguf_adapter(r, dir, adapter_keys(), {{"blk.0.attn_norm.weight.lora_a", {24, 2}}}),
             Contains("tensor blk.0.attn_norm.weight.lora_a is not the lora_a or lora_b"));
  CHECK_THAT(gguf_adapter(r, dir, adapter_keys(),
                          {{t + "a", {24, 2}},
                           {t + "b", {2, 24}},
                           {"blk.1.attn_output.weight.lora_a", {24, 3}},
                           {"blk.1.attn_output.weight.lora_b", {3, 24}}}),
             Contains("have ranks 2 and 3"));
  keys = adapter_keys();
  keys[1].second = gguf::Value::string("model");  // a model file, not an adapter
  CHECK_THAT(gguf_adapter(r, dir, keys, {}), Contains("not an adapter attograd reads"));
}

TEST_CASE("every cut and every changed byte of a GGUF adapter reads back the same or is refused",
          "[adapters]") {
  for (const char* seed : {"gpt2_qkv.gguf", "llama_permuted_f16.gguf"}) {
    INFO(seed);
    const std::string bytes = base::read_input_file(
        std::string(ATTOGRAD_SOURCE_DIR) + "/fuzz/corpus/gguf_lora/" + seed, "seed");
    for (size_t n = 0; n < bytes.size(); n += 13)
      REQUIRE_NOTHROW(fuzz::gguf_lora(bytes.substr(0, n)));
    for (size_t i = 0; i < bytes.size(); i += 7) {
      std::string changed = bytes;
      changed[i] = static_cast<char>(changed[i] ^ 0x5a);
      REQUIRE_NOTHROW(fuzz::gguf_lora(changed));
    }
  }
}
