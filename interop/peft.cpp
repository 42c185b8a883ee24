#include "interop/peft.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <list>
#include <map>
#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "interop/hf_folder.h"
#include "interop/hf_gpt2.h"
#include "interop/hf_llama.h"
#include "interop/hub_cache.h"
#include "interop/safetensors.h"

namespace interop {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kPeftPrefix = "base_model.model.";
constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";

std::string without_weight(const std::string& name) {
  return name.substr(0, name.size() - std::string(".weight").size());
}

// The modules of transformers' model of c a LoRA adapter may sit on.
std::vector<AdaptedTensor> peft_tensors(const nn::GPTConfig& c) {
  const auto in_order = c.without_adapters().parameter_shapes();
  const std::map<std::string, ag::Shape> shapes(in_order.begin(), in_order.end());
  std::vector<AdaptedTensor> out;
  const auto add = [&](std::string name, const std::vector<std::string>& parts) {
    AdaptedTensor t{std::move(name), {}, {}, shapes.at(parts[0])[1]};
    for (const auto& p : parts)
      t.parts.push_back(without_weight(p)), t.rows.push_back(shapes.at(p)[0]);
    out.push_back(std::move(t));
  };
  if (has_llama_layout(c)) {
    for (const auto& [name, shape] : in_order)
      if (is_block_linear(name)) add(without_weight(*llama_hf_name(name)), {name});
    return out;
  }
  for (const auto& t : hf_gpt2_tensors(c))
    if (is_block_linear(t.ours[0])) add("transformer." + without_weight(t.name), t.ours);
  return out;
}

// The last `n` dot-separated parts of a module's name ("h.0.attn.c_proj", 2: "attn.c_proj").
std::string suffix(const std::string& name, int n) {
  size_t at = name.size();
  for (int i = 0; i < n && at != std::string::npos && at > 0; ++i) at = name.rfind('.', at - 1);
  return at == std::string::npos ? name : name.substr(at + 1);
}

// peft's rule for a target_modules, rank_pattern or alpha_pattern key: the module's name, or
// its end after a dot.
bool matches(const std::string& module, const std::string& key) {
  return module == key || (module.size() > key.size() &&
                           module.compare(module.size() - key.size(), key.size(), key) == 0 &&
                           module[module.size() - key.size() - 1] == '.');
}

// target_modules: each adapted module's shortest end (one part, else two) that no module
// without an adapter shares (GPT-2's c_proj is in attn and mlp).
std::vector<std::string> target_modules(const std::vector<AdaptedTensor>& all,
                                        const std::vector<const AdaptedTensor*>& on) {
  std::vector<std::string> keys;
  for (const AdaptedTensor* t : on) {
    std::string key = suffix(t->name, 1);
    for (const auto& other : all)
      if (matches(other.name, key) && std::find(on.begin(), on.end(), &other) == on.end())
        key = suffix(t->name, 2);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  return keys;
}

// A number as peft writes it: lora_alpha is an int in its config unless it has a fraction.
json number(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e15) return static_cast<int64_t>(v);
  return v;
}

json peft_config(const LoraAdapter& a, const std::vector<std::string>& modules,
                 const json& rank_pattern, const json& alpha_pattern) {
  const nn::GPTConfig& c = a.config;
  return json{{"alpha_pattern", alpha_pattern},
              {"auto_mapping", nullptr},
              {"base_model_name_or_path", a.base_name},
              {"bias", "none"},
              {"fan_in_fan_out", !has_llama_layout(c)},  // GPT-2's Conv1D
              {"inference_mode", true},
              {"init_lora_weights", true},
              {"layers_pattern", nullptr},
              {"layers_to_transform", nullptr},
              {"lora_alpha", number(c.lora_alpha)},
              {"lora_dropout", c.lora_dropout},
              {"modules_to_save", nullptr},
              {"peft_type", "LORA"},
              {"r", c.lora_rank},
              {"rank_pattern", rank_pattern},
              {"revision", nullptr},
              {"target_modules", modules},
              {"task_type", "CAUSAL_LM"},
              {"use_dora", false},
              {"use_rslora", false}};
}

// adapter_config.json's settings, held to what attograd's adapters compute.
struct PeftSettings {
  int64_t r = 0;
  double alpha = 8, dropout = 0;  // peft's defaults
  json rank_pattern = json::object(), alpha_pattern = json::object();
};

const json* key_of(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// A key that must be absent or this value (what attograd's adapters are).
void require(const json& j, const char* key, const json& value, const std::string& path,
             const char* why) {
  const json* v = key_of(j, key);
  if (v && *v != value && !(v->is_array() && v->empty()))
    throw InteropError(fmt::format("{}: key {} is {}: {}", path, key, excerpt(v->dump()), why));
}

double number_key(const json& j, const char* key, double fallback, double lo, double hi,
                  const std::string& path) {
  const json* v = key_of(j, key);
  if (!v) return fallback;
  if (!v->is_number() || !(v->get<double>() >= lo && v->get<double>() < hi))
    throw InteropError(fmt::format("{}: key {} is {}: a number in [{}, {}) is needed", path, key,
                                   excerpt(v->dump()), lo, hi));
  return v->get<double>();
}

json pattern_key(const json& j, const char* key, const std::string& path) {
  const json* v = key_of(j, key);
  if (!v) return json::object();
  const bool numbers = v->is_object() && std::all_of(v->begin(), v->end(), [](const json& value) {
                         return value.is_number() && value.get<double>() > 0;
                       });
  if (!numbers)
    throw InteropError(fmt::format("{}: key {} is not an object of positive numbers", path, key));
  return *v;
}

PeftSettings read_settings(const std::string& path) {
  const json j = read_hf_config(
      path, {"peft_type", "r", "lora_alpha", "lora_dropout", "bias", "use_dora", "use_rslora",
             "lora_bias", "modules_to_save", "layer_replication", "rank_pattern", "alpha_pattern"});
  const json* type = key_of(j, "peft_type");
  if (!type || *type != "LORA")
    throw InteropError(fmt::format("{}: key peft_type is {}: only LORA adapters are read", path,
                                   type ? excerpt(type->dump()) : "missing"));
  require(j, "bias", "none", path, "attograd's adapters train no biases");
  require(j, "lora_bias", false, path, "attograd's adapters have no bias");
  require(j, "use_dora", false, path, "DoRA's magnitudes are not LoRA's product");
  require(j, "use_rslora", false, path, "rsLoRA's scale is alpha / sqrt(r), attograd's alpha / r");
  require(j, "modules_to_save", json::array(), path, "attograd's adapters hold no full modules");
  require(j, "layer_replication", json::array(), path, "attograd's blocks are not replicated");
  PeftSettings s;
  const double r = number_key(j, "r", 8, 1, (1 << 20) + 1, path);
  if (r != std::floor(r)) throw InteropError(fmt::format("{}: key r is not a whole number", path));
  s.r = static_cast<int64_t>(r);
  s.alpha = number_key(j, "lora_alpha", 8, 1e-12, 1e6, path);
  s.dropout = number_key(j, "lora_dropout", 0, 0, 1, path);
  s.rank_pattern = pattern_key(j, "rank_pattern", path);
  s.alpha_pattern = pattern_key(j, "alpha_pattern", path);
  return s;
}

// A module's value in a pattern (the first key that matches it), or the fallback.
double pattern_value(const json& pattern, const std::string& module, double fallback) {
  for (const auto& [key, value] : pattern.items())
    if (matches(module, key)) return value.get<double>();
  return fallback;
}

// t's adapter from the file: its A [R, in] and B [out, R], R the rank its pattern states.
ReadAdapter read_tensor_pair(const SafetensorsReader& in, const AdaptedTensor& t,
                             const SafetensorsEntry& a, const SafetensorsEntry& b,
                             const PeftSettings& s) {
  const int64_t R = a.shape.size() == 2 ? a.shape[0] : -1;
  if (R < 1 || a.shape[1] != t.in || b.shape != ag::Shape{t.out(), R})
    throw InteropError(fmt::format(
        "{}: tensors {} {} and {} {}: {} needs lora_A [R, {}] and lora_B [{}, R]", in.source(),
        a.name, ag::shape_str(a.shape), b.name, ag::shape_str(b.shape), t.name, t.in, t.out()));
  const double rank = pattern_value(s.rank_pattern, t.name, static_cast<double>(s.r));
  if (static_cast<double>(R) != rank)
    throw InteropError(fmt::format("{}: tensor {} has rank {}, adapter_config.json states {}",
                                   in.source(), a.name, R, rank));
  ReadAdapter r{&t, R, pattern_value(s.alpha_pattern, t.name, s.alpha), {}, {}};
  r.a.resize(static_cast<size_t>(R * t.in));
  r.b.resize(static_cast<size_t>(t.out() * R));
  in.read_into(a, r.a.data());
  in.read_into(b, r.b.data());
  return r;
}

}  // namespace

LoraAdapter read_peft(const std::string& folder, const nn::GPTConfig& base) {
  const PeftSettings s = read_settings((fs::path(folder) / kConfigFile).string());
  const std::vector<AdaptedTensor> all = peft_tensors(base);
  std::map<std::string, const AdaptedTensor*> names;
  for (const auto& t : all)
    for (const char* m : {".lora_A.weight", ".lora_B.weight"}) names[kPeftPrefix + t.name + m] = &t;
  const std::string path = (fs::path(folder) / kWeightsFile).string();
  const SafetensorsReader in(path, [&](const std::string& name) {
    if (!names.count(name))
      throw InteropError(fmt::format(
          "{}: tensor {} is not the lora_A or lora_B of a module of the base ({} layers)", path,
          excerpt(name), base.n_layers));
  });
  std::vector<ReadAdapter> read;
  for (const auto& t : all) {
    const SafetensorsEntry* a = in.find(kPeftPrefix + t.name + ".lora_A.weight");
    const SafetensorsEntry* b = in.find(kPeftPrefix + t.name + ".lora_B.weight");
    if (!a && !b) continue;
    if (!a || !b)
      throw InteropError(fmt::format("{}: {}{} has a lora_{} and no lora_{}", path, kPeftPrefix,
                                     t.name, a ? "A" : "B", a ? "B" : "A"));
    read.push_back(read_tensor_pair(in, t, *a, *b, s));
  }
  const auto spelled = in.metadata().find(kLoraTargetsKey);
  return split_adapter(read, base, s.r, s.dropout, path,
                       spelled == in.metadata().end() ? "" : spelled->second);
}

void check_peft_expressible(const nn::GPTConfig& c, const std::string& folder) {
  if (has_llama_layout(c)) {
    export_family(c.without_adapters(), folder);
    return;
  }
  if (const std::string why = beyond_gpt2(c); !why.empty())
    throw InteropError(
        fmt::format("{}: transformers' GPT-2 cannot hold the model: {}", folder, why));
}

void write_peft(const LoraAdapter& adapter, const std::string& folder, StoredType dtype) {
  const nn::GPTConfig& c = adapter.config;
  check_peft_expressible(c, folder);
  const std::vector<AdaptedTensor> all = peft_tensors(c);
  std::vector<const AdaptedTensor*> on;
  for (const auto& t : all)
    if (adapted(t, adapter, "transformers' model")) on.push_back(&t);
  std::list<JoinedAdapter> joined;  // the values the writer reads where they are
  std::vector<SafetensorsTensor> tensors;
  json rank_pattern = json::object(), alpha_pattern = json::object();
  for (const AdaptedTensor* t : on) {
    const auto k = static_cast<int64_t>(t->parts.size());
    const JoinedAdapter& j = joined.emplace_back(join_adapter(*t, adapter, k * c.lora_rank));
    tensors.push_back({kPeftPrefix + t->name + ".lora_A.weight", {j.rank, t->in}, {}, j.a.data()});
    tensors.push_back(
        {kPeftPrefix + t->name + ".lora_B.weight", {t->out(), j.rank}, {}, j.b.data()});
    if (k == 1) continue;
    rank_pattern[suffix(t->name, 1)] = j.rank;
    alpha_pattern[suffix(t->name, 1)] = number(static_cast<double>(k) * c.lora_alpha);
  }
  write_safetensors((fs::path(folder) / kWeightsFile).string(), tensors, dtype,
                    {{"format", "pt"}, {kLoraTargetsKey, c.lora_targets}});
  const json config = peft_config(adapter, target_modules(all, on), rank_pattern, alpha_pattern);
  base::write_file_atomically((fs::path(folder) / kConfigFile).string(), config.dump(2) + "\n");
}

bool is_peft_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && has_entry(path, kConfigFile);
}

}  // namespace interop
