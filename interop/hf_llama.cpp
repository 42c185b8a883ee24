#include "interop/hf_llama.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "base/atomic_file.h"
#include "base/json.h"
#include "interop/hf_classifier.h"
#include "interop/hf_folder.h"
#include "interop/hub_cache.h"
#include "interop/import_memory.h"
#include "interop/tokenizer_files.h"

namespace interop {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Each family's transformers Config defaults (LlamaConfig, Qwen2Config, Qwen3Config), so
// that a config.json leaving a key out means here what it means to from_pretrained.
struct Family {
  LlamaFamily id;
  const char* model_type;
  const char* architecture;
  const char* name;  // for messages
  int64_t vocab_size, hidden_size, intermediate_size, layers, heads;
  int64_t kv_heads;  // 0: num_attention_heads
  int64_t head_dim;  // 0: hidden_size / num_attention_heads
  int64_t context;
};

constexpr Family kFamilies[] = {
    {LlamaFamily::llama, "llama", "LlamaForCausalLM", "Llama (LlamaForCausalLM)", 32000, 4096,
     11008, 32, 32, 0, 0, 2048},
    {LlamaFamily::qwen2, "qwen2", "Qwen2ForCausalLM", "Qwen2 (Qwen2ForCausalLM)", 151936, 4096,
     22016, 32, 32, 32, 0, 32768},
    {LlamaFamily::qwen3, "qwen3", "Qwen3ForCausalLM", "Qwen3 (Qwen3ForCausalLM)", 151936, 4096,
     22016, 32, 32, 32, 128, 32768},
};
constexpr double kRmsNormEps = 1e-6;  // the three Configs' default
constexpr double kRopeTheta = 10000;

const Family& family_row(LlamaFamily id) {
  for (const Family& f : kFamilies)
    if (f.id == id) return f;
  throw std::logic_error("family_row: unknown family");
}

// The keys of config.json read here; the rest are skipped unstored (docs/interop.md lists
// which of them transformers reads, and why ignoring them changes nothing).
const std::set<std::string>& config_keys_read() {
  static const std::set<std::string> keys = {"model_type",
                                             "architectures",
                                             "hidden_act",
                                             "vocab_size",
                                             "hidden_size",
                                             "intermediate_size",
                                             "num_hidden_layers",
                                             "num_attention_heads",
                                             "num_key_value_heads",
                                             "head_dim",
                                             "max_position_embeddings",
                                             "rms_norm_eps",
                                             "rope_theta",
                                             "rope_scaling",
                                             "rope_parameters",
                                             "tie_word_embeddings",
                                             "attention_bias",
                                             "mlp_bias",
                                             "attention_dropout",
                                             "use_sliding_window",
                                             "layer_types",
                                             "quantization_config",
                                             "partial_rotary_factor",
                                             "id2label",
                                             "num_labels"};
  return keys;
}

// What attograd's GPT cannot compute is refused with the reason; the family otherwise.
const Family& check_architecture(const HfConfigKeys& k) {
  const std::string type = k.text("model_type", "");
  const auto id = llama_family_of(type);
  if (!id) k.fail("model_type", fmt::format("is {}: not llama, qwen2 or qwen3", quoted(type)));
  const Family& f = family_row(*id);
  if (const json* archs = k.find("architectures")) {
    if (!archs->is_array()) k.fail("architectures", "is not a list");
    for (const json& a : *archs)
      if (a != f.architecture && a != sequence_classifier_of(f.architecture))
        k.fail("architectures",
               fmt::format("names {}: a {} model is read as {} or {} only", base::json_quote(a),
                           f.model_type, f.architecture, sequence_classifier_of(f.architecture)));
  }
  const std::string act = k.text("hidden_act", "silu");
  if (act != "silu")
    k.fail("hidden_act", fmt::format("is {}: attograd's SwiGLU uses SiLU (silu)", quoted(act)));
  if (k.find("quantization_config"))
    k.fail("quantization_config", "is present: attograd reads unquantised F32, F16 and BF16 only");
  if (k.number("partial_rotary_factor", 1.0) != 1.0)
    k.fail("partial_rotary_factor", "is not 1: attograd's RoPE rotates every dimension of a head");
  if (k.flag("use_sliding_window", false))
    k.fail("use_sliding_window", "is true: attograd's attention is over the whole context");
  if (const json* types = k.find("layer_types")) {
    if (!types->is_array()) k.fail("layer_types", "is not a list");
    for (const json& t : *types)
      if (t != "full_attention")
        k.fail("layer_types", fmt::format("names {}: attograd's attention is full_attention only",
                                          base::json_quote(t)));
  }
  return f;
}

// A number the llama3 scaling needs: HF refuses a rope_scaling without it.
double required_number(const HfConfigKeys& k, const char* key) {
  if (!k.find(key)) k.fail(key, "is missing (Llama 3's RoPE scaling needs it)");
  return k.number(key, 0);
}

// rope_theta and rope_scaling (transformers 5: both in rope_parameters).
void read_rope(const HfConfigKeys& k, nn::GPTConfig& c) {
  c.position = nn::PositionKind::rope;
  c.rope_theta = k.number("rope_theta", kRopeTheta);
  c.rope_scaling = nn::RopeScaling::none;
  const char* key = k.find("rope_parameters") ? "rope_parameters" : "rope_scaling";
  const json* r = k.find(key);
  if (!r) return;
  if (!r->is_object()) k.fail(key, fmt::format("is {}, not an object", base::json_kind(*r)));
  const std::string prefix = std::string(key) + ".";
  const HfConfigKeys s{*r, k.source, prefix.c_str()};
  c.rope_theta = s.number("rope_theta", c.rope_theta);
  const char* type_key = s.find("rope_type") ? "rope_type" : "type";  // "type": older files
  const std::string type = s.text(type_key, "default");
  if (type == "default") return;
  if (type != "llama3")
    s.fail(type_key, fmt::format("is {}: attograd computes RoPE unscaled (default) or with "
                                 "Llama 3's scaling (llama3) only",
                                 quoted(type)));
  c.rope_scaling = nn::RopeScaling::llama3;
  c.rope_factor = required_number(s, "factor");
  c.rope_low_freq_factor = required_number(s, "low_freq_factor");
  c.rope_high_freq_factor = required_number(s, "high_freq_factor");
  if (!s.find("original_max_position_embeddings"))
    s.fail("original_max_position_embeddings", "is missing (Llama 3's RoPE scaling needs it)");
  c.rope_original_context = s.integer("original_max_position_embeddings", 0);
}

// The biases as each family's modeling code has them.
void read_biases(const HfConfigKeys& k, const Family& f, nn::GPTConfig& c) {
  c.qk_norm = f.id == LlamaFamily::qwen3;
  if (f.id == LlamaFamily::qwen2) {  // Qwen2Attention: q, k and v with biases, o without
    c.qkv_bias = true, c.linear_bias = false;
    return;
  }
  const bool attention = k.flag("attention_bias", false);
  const bool mlp = f.id == LlamaFamily::llama && k.flag("mlp_bias", false);
  if (attention != mlp)
    k.fail("attention_bias",
           fmt::format("is {} and mlp_bias {}: attograd's linear_bias puts biases on o_proj and "
                       "the MLP together",
                       attention, mlp));
  c.qkv_bias = attention, c.linear_bias = attention;
}

// The sizes, each with the family's default.
void read_sizes(const HfConfigKeys& k, const Family& f, nn::GPTConfig& c) {
  c.vocab_size = k.integer("vocab_size", f.vocab_size);
  c.d_model = k.integer("hidden_size", f.hidden_size);
  c.d_ff = k.integer("intermediate_size", f.intermediate_size);
  c.n_layers = k.integer("num_hidden_layers", f.layers);
  c.n_heads = k.integer("num_attention_heads", f.heads);
  c.n_kv_heads = k.integer("num_key_value_heads", f.kv_heads ? f.kv_heads : c.n_heads);
  c.head_dim = k.integer("head_dim", f.head_dim);
  c.context_length = k.integer("max_position_embeddings", f.context);
  c.norm_eps = k.number("rms_norm_eps", kRmsNormEps);
  // attograd's way of saying the default: 0
  if (c.n_kv_heads == c.n_heads) c.n_kv_heads = 0;
  if (c.n_heads > 0 && c.head_dim * c.n_heads == c.d_model) c.head_dim = 0;
}

// The config.json key behind the first of attograd's keys a message names.
std::string hf_key_of(const std::string& message) {
  static const std::pair<const char*, const char*> kKeys[] = {
      {"vocab_size", "vocab_size"},
      {"context_length", "max_position_embeddings"},
      {"d_model", "hidden_size"},
      {"n_heads", "num_attention_heads"},
      {"n_kv_heads", "num_key_value_heads"},
      {"n_layers", "num_hidden_layers"},
      {"d_ff", "intermediate_size"},
      {"head_dim", "head_dim"},
      {"head width", "head_dim"},
      {"norm_eps", "rms_norm_eps"},
      {"rope_theta", "rope_theta"},
      {"rope_factor", "rope_scaling.factor"},
      {"rope_low_freq_factor", "rope_scaling.low_freq_factor"},
      {"rope_high_freq_factor", "rope_scaling.high_freq_factor"},
      {"rope_original_context", "rope_scaling.original_max_position_embeddings"},
      {"dropout", "attention_dropout"}};
  size_t first = std::string::npos;
  const char* key = "config";
  for (const auto& [ours, theirs] : kKeys) {
    const size_t at = message.find(ours);
    if (at < first) first = at, key = theirs;
  }
  return key;
}

// ------------------------------------------------------------------ the tensors

// N of "<prefix>N<rest>" when N is a block of the model (no leading zeros), else -1.
int64_t block_of(const std::string& name, const std::string& prefix, const std::string& rest,
                 int64_t n_layers) {
  if (name.rfind(prefix, 0) != 0) return -1;
  size_t end = prefix.size();
  while (end < name.size() && end < prefix.size() + 10 &&
         std::isdigit(static_cast<unsigned char>(name[end])))
    ++end;
  if (end == prefix.size() || (name[prefix.size()] == '0' && end > prefix.size() + 1)) return -1;
  if (name.compare(end, std::string::npos, rest) != 0) return -1;
  const int64_t n = std::stoll(name.substr(prefix.size(), end - prefix.size()));
  return n < n_layers ? n : -1;
}

// RoPE's inverse frequencies, which older checkpoints saved as a buffer: attograd computes them.
bool is_rotary_buffer(const std::string& name, int64_t n_layers) {
  return name == "model.rotary_emb.inv_freq" ||
         block_of(name, "model.layers.", ".self_attn.rotary_emb.inv_freq", n_layers) >= 0;
}

// The tensors the config needs, by HF name; and what else the files may hold: a tied head's
// own copy, the rotary buffers. Anything else is refused as the header names it.
struct Expected {
  struct Want {
    std::string ours;
    ag::Shape shape;
  };
  std::map<std::string, Want> by_hf;
  int64_t n_layers = 0;
  std::string model;

  Expected(const nn::GPTConfig& c, const Family& f) : n_layers(c.n_layers), model(f.name) {
    for (const auto& [ours, shape] : c.parameter_shapes()) {
      const auto hf = llama_hf_name(ours);
      if (!hf) throw std::logic_error("hf_llama: no Hugging Face name for " + ours);
      by_hf.emplace(*hf, Want{ours, shape});
    }
  }
  bool holds(const std::string& name) const {
    return by_hf.count(name) || name == "lm_head.weight" || is_rotary_buffer(name, n_layers);
  }
  HfNames hf_names() const {
    return {[this](const std::string& name) { return holds(name); }, model};
  }
};

// The files' tensors by name (each already one the model may hold), the buffers set aside.
LocatedTensors file_tensors(const std::vector<SafetensorsReader>& files, const Expected& expected,
                            ModelFiles& m) {
  LocatedTensors found;
  int64_t buffers = 0;
  for (const auto& in : files)
    for (const auto& e : in.entries()) {
      if (is_rotary_buffer(e.name, expected.n_layers)) {
        ++buffers;
        continue;
      }
      if (!found.emplace(e.name, LocatedTensor{&in, &e}).second)
        throw InteropError(fmt::format("{}: tensor {} appears twice (in two shards)", in.source(),
                                       quoted(e.name)));
    }
  if (buffers > 0)
    m.dropped.push_back(fmt::format(
        "{} rotary_emb.inv_freq buffers (RoPE's frequencies: attograd computes them)", buffers));
  return found;
}

// Every tensor the config needs is there with its shape, before anything is read.
void check_found(const Expected& expected, const LocatedTensors& found, const ModelFiles& m,
                 const std::string& source) {
  if (!m.config.tie_weights && m.config.num_classes == 0 && !found.count("lm_head.weight"))
    throw InteropError(fmt::format(
        "{}: no lm_head.weight, and config.json unties the head (tie_word_embeddings false)",
        source));
  for (const auto& [hf, want] : expected.by_hf) {
    const auto it = found.find(hf);
    if (it == found.end())
      throw InteropError(fmt::format("{}: no tensor {} (for {})", source, hf, want.ours));
    const SafetensorsEntry& e = *it->second.e;
    if (e.shape != want.shape)
      throw InteropError(fmt::format("{}: tensor {} has shape {}, config.json needs {}",
                                     it->second.in->source(), quoted(e.name),
                                     ag::shape_str(e.shape), ag::shape_str(want.shape)));
  }
}

// Every tensor straight into its parameter (HF's layout is attograd's): no copy.
void read_llama_weights(const std::vector<SafetensorsReader>& files, const Expected& expected,
                        ModelFiles& m, int64_t tokenizer_bytes) {
  const LocatedTensors found = file_tensors(files, expected, m);
  const std::string source = files.front().source();
  check_found(expected, found, m, source);
  check_hf_size(files, m.config);
  check_import_memory(m.config, files.size() == 1 ? source : "the model's shards", tokenizer_bytes);
  for (const auto& [hf, want] : expected.by_hf) {
    const LocatedTensor& at = found.at(hf);
    m.weights.emplace_back(want.ours, at.in->read(*at.e));
  }
  if (m.config.tie_weights && found.count("lm_head.weight"))
    for (const auto& [name, t] : m.weights)
      if (name == "tok_emb.weight")
        check_tied_head(found.at("lm_head.weight"), t, "model.embed_tokens.weight", m);
}

// --------------------------------------------------------------------- writing

const char* torch_dtype_name(StoredType t) {
  switch (t) {
    case StoredType::f32: return "float32";
    case StoredType::f16: return "float16";
    case StoredType::bf16: return "bfloat16";
  }
  return "float32";
}

json rope_scaling_json(const nn::GPTConfig& c) {
  if (c.rope_scaling == nn::RopeScaling::none) return nullptr;
  return {{"rope_type", "llama3"},
          {"factor", c.rope_factor},
          {"low_freq_factor", c.rope_low_freq_factor},
          {"high_freq_factor", c.rope_high_freq_factor},
          {"original_max_position_embeddings", c.rope_original_context}};
}

// A block's parameters: attograd's name after "blocks.N." and HF's after "model.layers.N.",
// in the order transformers' decoder layer registers them (its state_dict's, which
// save_pretrained cuts shards in); a prefix ending in '.' takes "weight" then "bias" after it.
constexpr std::pair<const char*, const char*> kLlamaBlock[] = {
    {"attn.W_query.", "self_attn.q_proj."},
    {"attn.W_key.", "self_attn.k_proj."},
    {"attn.W_value.", "self_attn.v_proj."},
    {"attn.out_proj.", "self_attn.o_proj."},
    {"attn.q_norm.weight", "self_attn.q_norm.weight"},
    {"attn.k_norm.weight", "self_attn.k_norm.weight"},
    {"mlp.gate_proj.", "mlp.gate_proj."},
    {"mlp.up_proj.", "mlp.up_proj."},
    {"mlp.down_proj.", "mlp.down_proj."},
    {"ln1.weight", "input_layernorm.weight"},
    {"ln2.weight", "post_attention_layernorm.weight"}};

// Where an HF name comes in transformers' state_dict: the embedding, each layer's
// parameters (kLlamaBlock's order, a weight before its bias), the final norm, the head.
std::tuple<int, int64_t, size_t, bool> hf_state_dict_place(const std::string& hf) {
  if (hf == "model.embed_tokens.weight") return {0, 0, 0, false};
  if (hf == "model.norm.weight") return {2, 0, 0, false};
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) != 0) return {3, 0, 0, false};  // lm_head or score
  size_t end = 0;
  const int64_t layer = std::stoll(hf.substr(prefix.size()), &end);
  const std::string rest = hf.substr(prefix.size() + end + 1);
  for (size_t i = 0; i < std::size(kLlamaBlock); ++i)
    if (rest.rfind(kLlamaBlock[i].second, 0) == 0) return {1, layer, i, rest.ends_with("bias")};
  throw std::logic_error("hf_llama: no place in a layer for " + hf);
}

void sort_as_hf_state_dict(std::vector<SafetensorsTensor>& tensors) {
  std::stable_sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) {
    return hf_state_dict_place(a.name) < hf_state_dict_place(b.name);
  });
}

// Llama's attention_bias puts biases on q, k, v and o together: a model with o's bias alone
// gets zero q, k and v biases, which compute the same.
void add_zero_qkv_biases(const nn::GPTConfig& c, std::vector<SafetensorsTensor>& out) {
  const int64_t head = c.head_dim ? c.head_dim : c.d_model / c.n_heads;
  const int64_t kv = c.n_kv_heads ? c.n_kv_heads : c.n_heads;
  for (int64_t i = 0; i < c.n_layers; ++i)
    for (const auto& [part, heads] :
         {std::pair{"q_proj", c.n_heads}, std::pair{"k_proj", kv}, std::pair{"v_proj", kv}})
      out.push_back({fmt::format("model.layers.{}.self_attn.{}.bias", i, part),
                     {heads * head},
                     [](float*) {}});  // the writer's buffer starts zeroed
}

}  // namespace

std::optional<LlamaFamily> llama_family_of(const std::string& model_type) {
  for (const Family& f : kFamilies)
    if (model_type == f.model_type) return f.id;
  return std::nullopt;
}

nn::GPTConfig llama_config_from_json(const json& j, const std::string& source,
                                     std::vector<std::string>& notes) {
  if (!j.is_object())
    throw InteropError(fmt::format("{}: is {}, not a JSON object", source, base::json_kind(j)));
  const HfConfigKeys k{j, source};
  const Family& f = check_architecture(k);
  nn::GPTConfig c;
  c.norm = nn::NormKind::rms_norm;
  c.mlp = nn::MlpKind::swiglu;
  read_sizes(k, f, c);
  read_rope(k, c);
  read_biases(k, f, c);
  c.tie_weights = k.flag("tie_word_embeddings", false);
  if (const auto labels = classifier_labels(j, source, sequence_classifier_of(f.architecture));
      !labels.empty())
    make_classifier(c, labels.size());
  c.dropout = k.number("attention_dropout", 0.0);
  if (c.dropout != 0)
    notes.push_back(fmt::format(
        "attention_dropout {} (attograd's one dropout takes it, on the residual branches too)",
        c.dropout));
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw InteropError(fmt::format("{}: {}: {}", source, hf_key_of(e.what()), e.what()));
  }
  return c;
}

nn::GPTConfig read_llama_config(const InputBytes& config, std::vector<std::string>& notes) {
  return llama_config_from_json(read_hf_config(config, config_keys_read()), config.source(), notes);
}

std::optional<std::string> llama_hf_name(const std::string& ours) {
  static const std::pair<const char*, const char*> kTop[] = {
      {"tok_emb.weight", "model.embed_tokens.weight"},
      {"ln_f.weight", "model.norm.weight"},
      {"lm_head.weight", "lm_head.weight"},
      {"classifier.weight", "score.weight"}};  // *ForSequenceClassification's head
  for (const auto& [a, b] : kTop)
    if (ours == a) return b;
  const std::string prefix = "blocks.";
  const size_t dot = ours.find('.', prefix.size());
  if (ours.rfind(prefix, 0) != 0 || dot == std::string::npos) return std::nullopt;
  const std::string index = ours.substr(prefix.size(), dot - prefix.size());
  const std::string rest = ours.substr(dot + 1);
  for (const auto& [a, b] : kLlamaBlock) {
    const std::string from = a;
    if (rest.rfind(from, 0) != 0) continue;
    const std::string tail = rest.substr(from.size());
    if (from.back() == '.' ? (tail == "weight" || tail == "bias") : tail.empty())
      return "model.layers." + index + "." + b + tail;
  }
  return std::nullopt;
}

bool has_llama_layout(const nn::GPTConfig& c) {
  return c.position == nn::PositionKind::rope || c.mlp == nn::MlpKind::swiglu || c.qk_norm;
}

LlamaFamily export_family(const nn::GPTConfig& c, const std::string& folder) {
  auto refuse = [&](const std::string& why) -> LlamaFamily {
    throw InteropError(fmt::format("{}: {}", folder, why));
  };
  if (c.position != nn::PositionKind::rope)
    return refuse("a GPT with learned positions is no Llama-family model (RoPE)");
  if (c.norm != nn::NormKind::rms_norm)
    return refuse("a GPT with LayerNorm is no Llama-family model (RMSNorm)");
  if (c.mlp != nn::MlpKind::swiglu)
    return refuse("a GPT with a GELU MLP is no Llama-family model (SwiGLU)");
  if (c.qk_norm) {  // Qwen3: attention_bias puts biases on o_proj too, none in the MLP
    if (c.qkv_bias || c.linear_bias)
      return refuse("Qwen3 (q/k norms) is written without biases (qkv_bias and linear_bias false)");
    return LlamaFamily::qwen3;
  }
  if (c.qkv_bias && !c.linear_bias) return LlamaFamily::qwen2;
  return LlamaFamily::llama;  // qkv_bias false with linear_bias: zero q, k, v biases
}

json llama_config_json(const nn::GPTConfig& c, LlamaFamily family, StoredType dtype,
                       std::optional<int64_t> end_of_text) {
  const Family& f = family_row(family);
  const json eos = end_of_text ? json(*end_of_text) : json(nullptr);
  json j = {{"architectures", {f.architecture}},
            {"model_type", f.model_type},
            {"hidden_act", "silu"},
            {"vocab_size", c.vocab_size},
            {"hidden_size", c.d_model},
            {"intermediate_size", c.ff_width()},
            {"num_hidden_layers", c.n_layers},
            {"num_attention_heads", c.n_heads},
            {"num_key_value_heads", c.n_kv_heads ? c.n_kv_heads : c.n_heads},
            {"head_dim", c.head_dim ? c.head_dim : c.d_model / c.n_heads},
            {"max_position_embeddings", c.context_length},
            {"rms_norm_eps", c.norm_eps},
            {"rope_theta", c.rope_theta},
            {"rope_scaling", rope_scaling_json(c)},
            {"tie_word_embeddings", c.tie_weights},
            {"attention_dropout", c.dropout},
            {"initializer_range", 0.02},
            {"torch_dtype", torch_dtype_name(dtype)},
            {"bos_token_id", eos},
            {"eos_token_id", eos},
            {"use_cache", true}};
  if (family == LlamaFamily::llama) {
    j["attention_bias"] = c.qkv_bias || c.linear_bias;
    j["mlp_bias"] = c.linear_bias;
    j["pretraining_tp"] = 1;
  } else {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = c.n_layers;
  }
  if (family == LlamaFamily::qwen3) j["attention_bias"] = false;
  return j;
}

ModelFiles read_hf_llama(const std::string& path, const std::string& tokenizer_folder) {
  std::error_code ec;
  const bool is_folder = fs::is_directory(path, ec);
  const std::string folder = is_folder ? path : fs::path(path).parent_path().string();
  const std::string config_path = hf_config_path(path);
  ModelFiles m;
  m.format = is_folder ? "hf" : "safetensors";
  const InputBytes config_in = InputBytes::open(config_path);
  const json config = read_hf_config(config_in, config_keys_read());
  m.config = llama_config_from_json(config, config_in.source(), m.dropped);
  const LlamaFamily family = *llama_family_of(config.at("model_type").get<std::string>());
  m.labels = classifier_labels(config, config_in.source(),
                               sequence_classifier_of(family_row(family).architecture));
  const std::string tokenizer_at = tokenizer_folder.empty() ? folder : tokenizer_folder;
  std::string source;
  {
    // the family config.json named: the one its config exports as (export_family)
    const Expected expected(m.config, family_row(export_family(m.config, config_path)));
    const auto files = open_hf_weights(path, expected.hf_names());
    source = files.size() == 1 ? files.front().source() : path;
    read_llama_weights(files, expected, m, tokenizer_folder_bytes(tokenizer_at));
  }
  m.tokenizer = read_tokenizer_folder(tokenizer_at, !tokenizer_folder.empty(), &m.dropped);
  const ChatSettings chat = read_chat_settings(tokenizer_at, folder, m.dropped);
  m.chat_format = chat.format;
  m.stop_ids = chat.stop_ids;
  check_weights(m, source);
  return m;
}

void write_hf_llama(const ModelFiles& model, const std::string& folder, StoredType dtype,
                    uint64_t max_shard_bytes) {
  const nn::GPTConfig& c = model.config;
  const LlamaFamily family = export_family(c, folder);
  if (dtype == StoredType::f16) check_f16_range(model, folder);  // callers other than export too
  std::vector<SafetensorsTensor> out;
  for (const auto& [name, t] : model.weights) {
    const auto hf = llama_hf_name(name);
    if (!hf)
      throw InteropError(fmt::format("{}: parameter {} has no place in {}", folder, name,
                                     family_row(family).name));
    out.push_back({*hf, t.shape(), nullptr, t.data<float>()});
  }
  if (family == LlamaFamily::llama && c.linear_bias && !c.qkv_bias) add_zero_qkv_biases(c, out);
  sort_as_hf_state_dict(out);  // so that shards are cut where save_pretrained cuts them
  write_safetensors_model(folder, out, dtype, max_shard_bytes, {{"format", "pt"}});
  // (the tokenizer's files first: they name the end-of-text id config.json states)
  const auto eos = model.tokenizer ? write_hf_tokenizer(*model.tokenizer, c.vocab_size,
                                                        model.chat_format, model.stop_ids, folder)
                                   : std::nullopt;
  json config = llama_config_json(c, family, dtype, eos);
  if (c.num_classes > 0) {
    check_hf_classifier(model, folder);
    add_classifier_keys(config, model, family_row(family).architecture, eos);
  }
  base::write_file_atomically((fs::path(folder) / "config.json").string(), config.dump(2) + "\n");
}

}  // namespace interop
