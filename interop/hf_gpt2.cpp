#include "interop/hf_gpt2.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "base/atomic_file.h"
#include "base/json.h"
#include "base/posix_file.h"
#include "base/utf8.h"
#include "interop/hf_classifier.h"
#include "interop/hf_folder.h"
#include "interop/hub_cache.h"
#include "interop/import_memory.h"
#include "interop/tokenizer_files.h"

namespace interop {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kAttogradLayerNormEps = 1e-5;
constexpr char kPrefix[] = "transformer.";
constexpr char kModel[] = "GPT-2 (GPT2LMHeadModel)";
constexpr char kClassifier[] = "GPT2ForSequenceClassification";

// What attograd's GPT cannot compute is refused with the reason.
void check_gpt2_architecture(const HfConfigKeys& k, std::vector<std::string>& notes) {
  const std::string type = k.text("model_type", "gpt2");
  if (type != "gpt2")
    k.fail("model_type", fmt::format("is {}: only GPT-2 (gpt2), Llama (llama), Qwen2 (qwen2) and "
                                     "Qwen3 (qwen3) are read",
                                     quoted(type)));
  if (const json* archs = k.find("architectures")) {
    if (!archs->is_array()) k.fail("architectures", "is not a list");
    for (const json& a : *archs)
      if (!a.is_string() || (a != "GPT2LMHeadModel" && a != "GPT2Model" && a != kClassifier))
        k.fail("architectures", fmt::format("names {}: only GPT2LMHeadModel, GPT2Model and {} "
                                            "are read",
                                            base::json_quote(a), kClassifier));
  }
  const std::string act = k.text("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    k.fail("activation_function",
           fmt::format("is {}: attograd's GPT uses GELU's tanh form (gelu_new, gelu_pytorch_tanh)",
                       quoted(act)));
  const double eps = k.number("layer_norm_epsilon", 1e-5);
  if (std::abs(eps - kAttogradLayerNormEps) > 1e-12)
    k.fail("layer_norm_epsilon",
           fmt::format("is {}: attograd's LayerNorm uses {}", eps, kAttogradLayerNormEps));
  if (!k.flag("scale_attn_weights", true))
    k.fail("scale_attn_weights", "is false: attograd's attention scales by 1/sqrt(head size)");
  if (k.flag("scale_attn_by_inverse_layer_idx", false))
    k.fail("scale_attn_by_inverse_layer_idx",
           "is true: attograd's attention scales by 1/sqrt(head size) only");
  if (k.flag("add_cross_attention", false))
    k.fail("add_cross_attention", "is true: attograd's GPT is a decoder without cross-attention");
  if (k.flag("reorder_and_upcast_attn", false))
    notes.push_back("reorder_and_upcast_attn (attograd computes attention in float32 anyway)");
}

// The config.json key behind the first of attograd's keys a message names.
std::string gpt2_key_of(const std::string& message) {
  static const std::pair<const char*, const char*> kKeys[] = {
      {"vocab_size", "vocab_size"}, {"context_length", "n_positions"}, {"d_model", "n_embd"},
      {"n_heads", "n_head"},        {"n_layers", "n_layer"},           {"d_ff", "n_inner"},
      {"dropout", "resid_pdrop"}};
  size_t first = std::string::npos;
  const char* key = "config";
  for (const auto& [ours, theirs] : kKeys) {
    const size_t at = message.find(ours);
    if (at < first) first = at, key = theirs;
  }
  return key;
}

// attograd has one dropout; GPT-2 has three (usually equal).
double dropout_of(const HfConfigKeys& k, std::vector<std::string>& notes) {
  const double resid = k.number("resid_pdrop", 0.1), embd = k.number("embd_pdrop", 0.1),
               attn = k.number("attn_pdrop", 0.1);
  if (embd != resid || attn != resid)
    notes.push_back(
        fmt::format("embd_pdrop {} and attn_pdrop {} (attograd has one dropout: "
                    "resid_pdrop's {})",
                    embd, attn, resid));
  return resid;
}

// The keys of config.json attograd reads (check_gpt2_architecture's and the config's); the rest are
// skipped as they are read, never stored.
const std::set<std::string>& gpt2_config_keys_read() {
  static const std::set<std::string> keys = {"model_type",
                                             "architectures",
                                             "activation_function",
                                             "layer_norm_epsilon",
                                             "scale_attn_weights",
                                             "scale_attn_by_inverse_layer_idx",
                                             "add_cross_attention",
                                             "reorder_and_upcast_attn",
                                             "vocab_size",
                                             "n_positions",
                                             "n_ctx",
                                             "n_embd",
                                             "n_layer",
                                             "n_head",
                                             "n_inner",
                                             "resid_pdrop",
                                             "embd_pdrop",
                                             "attn_pdrop",
                                             "tie_word_embeddings",
                                             "id2label",
                                             "num_labels"};
  return keys;
}

// --------------------------------------------------------------- the weights' layouts

// hf [rows, cols] -> ours [cols, rows]
void transpose(const float* in, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
}

// c_attn.weight [d, 3d] -> part p (0 query, 1 key, 2 value) as a Linear [d, d]
void split_qkv(const float* in, float* out, int64_t d, int64_t part) {
  for (int64_t r = 0; r < d; ++r)
    for (int64_t c = 0; c < d; ++c) out[c * d + r] = in[r * 3 * d + part * d + c];
}

// ours -> c_attn.weight's part p
void join_qkv(const float* in, float* out, int64_t d, int64_t part) {
  for (int64_t r = 0; r < d; ++r)
    for (int64_t c = 0; c < d; ++c) out[r * 3 * d + part * d + c] = in[c * d + r];
}

ag::Shape our_shape(const HfTensor& t) {
  switch (t.layout) {
    case HfLayout::same: return t.shape;
    case HfLayout::transposed: return {t.shape[1], t.shape[0]};
    case HfLayout::qkv_weight: return {t.shape[0], t.shape[0]};
    case HfLayout::qkv_bias: return {t.shape[0] / 3};
  }
  return {};
}

// ours[t.ours] from the HF tensor's values
void convert_in(const HfTensor& t, const float* hf, nn::StateDict& ours) {
  const ag::Shape shape = our_shape(t);
  for (size_t p = 0; p < t.ours.size(); ++p) {
    ag::Tensor out = ag::empty(shape);
    float* o = out.data<float>();
    const int64_t n = out.numel();
    if (t.layout == HfLayout::transposed) transpose(hf, o, t.shape[0], t.shape[1]);
    if (t.layout == HfLayout::qkv_weight) split_qkv(hf, o, t.shape[0], static_cast<int64_t>(p));
    if (t.layout == HfLayout::qkv_bias || t.layout == HfLayout::same)
      std::memcpy(o, hf + static_cast<int64_t>(p) * n, n * sizeof(float));
    ours.emplace_back(t.ours[p], out);
  }
}

// The HF tensor's values from ours
void convert_out(const HfTensor& t, const std::map<std::string, const ag::Tensor*>& ours,
                 float* hf) {
  for (size_t p = 0; p < t.ours.size(); ++p) {
    const ag::Tensor& in = *ours.at(t.ours[p]);
    const float* i = in.data<float>();
    if (t.layout == HfLayout::transposed) transpose(i, hf, t.shape[1], t.shape[0]);
    if (t.layout == HfLayout::qkv_weight) join_qkv(i, hf, t.shape[0], static_cast<int64_t>(p));
    if (t.layout == HfLayout::qkv_bias || t.layout == HfLayout::same)
      std::memcpy(hf + static_cast<int64_t>(p) * in.numel(), i, in.numel() * sizeof(float));
  }
}

// ------------------------------------------------------------------- reading

// "h.N.attn.bias" or "h.N.attn.masked_bias" for a block N of the model
bool is_mask_buffer(const std::string& name, int64_t n_layers) {
  if (name.rfind("h.", 0) != 0) return false;
  size_t end = 2;
  while (end < name.size() && end < 12 && std::isdigit(static_cast<unsigned char>(name[end])))
    ++end;
  if (end == 2 || (name[2] == '0' && end > 3)) return false;
  const std::string rest = name.substr(end);
  if (rest != ".attn.bias" && rest != ".attn.masked_bias") return false;
  return std::stoll(name.substr(2, end - 2)) < n_layers;
}

// The name without the "transformer." prefix.
std::string unprefixed(const std::string& name) {
  return name.rfind(kPrefix, 0) == 0 ? name.substr(sizeof(kPrefix) - 1) : name;
}

// What the files may hold for this config: GPT-2's tensors (with or without the prefix),
// lm_head.weight, the mask buffers of its blocks; anything else is refused as the header
// names it, before it is stored (SafetensorsReader::Filter), so a header of a million
// entries costs its first.
struct ExpectedNames {
  std::set<std::string> names;
  int64_t n_layers = 0;

  explicit ExpectedNames(const nn::GPTConfig& c) : n_layers(c.n_layers) {
    for (const auto& t : hf_gpt2_tensors(c)) names.insert(t.name);
    names.insert("lm_head.weight");
  }
  bool holds(const std::string& name) const {
    const std::string bare = unprefixed(name);
    return names.count(bare) || is_mask_buffer(bare, n_layers);
  }
  HfNames hf_names() const {
    return {[this](const std::string& name) { return holds(name); }, kModel};
  }
};

// The files' tensors by their name without the "transformer." prefix; what GPT-2 does not
// have is refused by name, the mask buffers are set aside (dropped).
LocatedTensors gpt2_file_tensors(const std::vector<SafetensorsReader>& files,
                                 const nn::GPTConfig& c, const std::set<std::string>& expected,
                                 ModelFiles& m) {
  LocatedTensors found;
  int64_t buffers = 0;
  for (const auto& in : files)
    for (const auto& e : in.entries()) {
      const bool prefixed = e.name.rfind(kPrefix, 0) == 0;
      const std::string name = prefixed ? e.name.substr(sizeof(kPrefix) - 1) : e.name;
      if (is_mask_buffer(name, c.n_layers)) {
        ++buffers;
        continue;
      }
      if (!expected.count(name) && name != "lm_head.weight")
        throw InteropError(fmt::format("{}: tensor {} is not part of {} as config.json states it",
                                       in.source(), quoted(e.name), kModel));
      if (!found.emplace(name, LocatedTensor{&in, &e}).second)
        throw InteropError(
            fmt::format("{}: tensor {} appears twice (with and without the "
                        "'transformer.' prefix, or in two shards)",
                        in.source(), quoted(name)));
    }
  if (buffers > 0)
    m.dropped.push_back(
        fmt::format("attn.bias and attn.masked_bias of {} blocks (the causal "
                    "mask buffers: attograd's attention is causal by itself)",
                    c.n_layers));
  return found;
}

// Every tensor GPT-2 needs is there with the config's shape, before anything is read.
void check_gpt2_found(const std::vector<HfTensor>& tensors, const LocatedTensors& found,
                      const ModelFiles& m, const std::string& source) {
  if (!m.config.tie_weights && m.config.num_classes == 0 && !found.count("lm_head.weight"))
    throw InteropError(
        fmt::format("{}: no lm_head.weight, and config.json unties the head "
                    "(tie_word_embeddings false)",
                    source));
  for (const auto& t : tensors) {
    const auto it = found.find(t.name);
    if (it == found.end())
      throw InteropError(fmt::format("{}: no tensor {} (for {})", source, t.name, t.ours[0]));
    const SafetensorsEntry& e = *it->second.e;
    if (e.shape != t.shape)
      throw InteropError(fmt::format("{}: tensor {} has shape {}, config.json needs {}",
                                     it->second.in->source(), quoted(e.name),
                                     ag::shape_str(e.shape), ag::shape_str(t.shape)));
  }
}

void read_gpt2_weights(const std::vector<SafetensorsReader>& files, ModelFiles& m,
                       int64_t tokenizer_bytes) {
  const auto tensors = hf_gpt2_tensors(m.config);
  std::set<std::string> expected;
  for (const auto& t : tensors) expected.insert(t.name);
  const LocatedTensors found = gpt2_file_tensors(files, m.config, expected, m);
  check_gpt2_found(tensors, found, m, files.front().source());
  check_hf_size(files, m.config);
  check_import_memory(m.config, files.size() == 1 ? files.front().source() : "the model's shards",
                      tokenizer_bytes);
  for (const auto& t : tensors) {
    const LocatedTensor& at = found.at(t.name);
    if (t.layout == HfLayout::same) {  // straight into the parameter: no copy
      m.weights.emplace_back(t.ours[0], at.in->read(*at.e));
      continue;
    }
    const ag::Tensor hf = at.in->read(*at.e);
    convert_in(t, hf.data<float>(), m.weights);
  }
  if (m.config.tie_weights && found.count("lm_head.weight"))
    check_tied_head(found.at("lm_head.weight"), m.weights.front().second, "wte.weight", m);
}

}  // namespace

nn::GPTConfig gpt2_config_from_json(const json& j, const std::string& source,
                                    std::vector<std::string>& notes) {
  if (!j.is_object())
    throw InteropError(fmt::format("{}: is {}, not a JSON object", source, base::json_kind(j)));
  const HfConfigKeys k{j, source};
  check_gpt2_architecture(k, notes);
  nn::GPTConfig c;
  c.vocab_size = k.integer("vocab_size", 50257);
  c.context_length = k.integer("n_positions", k.integer("n_ctx", 1024));
  if (k.find("n_ctx") && k.integer("n_ctx", 0) != c.context_length)
    notes.push_back(fmt::format("n_ctx {} (n_positions {} is the context length)",
                                k.integer("n_ctx", 0), c.context_length));
  c.d_model = k.integer("n_embd", 768);
  c.n_layers = k.integer("n_layer", 12);
  c.n_heads = k.integer("n_head", 12);
  c.d_ff = k.integer("n_inner", 0);
  c.dropout = dropout_of(k, notes);
  c.qkv_bias = true;
  c.tie_weights = k.flag("tie_word_embeddings", true);
  c.norm = nn::NormKind::layer_norm;
  if (c.d_ff == 4 * c.d_model) c.d_ff = 0;  // attograd's way of saying the default
  if (const auto labels = classifier_labels(j, source, kClassifier); !labels.empty())
    make_classifier(c, labels.size());
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw InteropError(fmt::format("{}: {}: {}", source, gpt2_key_of(e.what()), e.what()));
  }
  return c;
}

json gpt2_config_json(const nn::GPTConfig& c, std::optional<int64_t> end_of_text) {
  const json eos = end_of_text ? json(*end_of_text) : json(nullptr);
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"activation_function", "gelu_new"},
          {"vocab_size", c.vocab_size},
          {"n_positions", c.context_length},
          {"n_ctx", c.context_length},
          {"n_embd", c.d_model},
          {"n_layer", c.n_layers},
          {"n_head", c.n_heads},
          {"n_inner", c.ff_width() != 4 * c.d_model ? json(c.d_ff) : json(nullptr)},
          {"bos_token_id", eos},
          {"eos_token_id", eos},
          {"layer_norm_epsilon", kAttogradLayerNormEps},
          {"resid_pdrop", c.dropout},
          {"embd_pdrop", c.dropout},
          {"attn_pdrop", c.dropout},
          {"initializer_range", 0.02},
          {"scale_attn_weights", true},
          {"scale_attn_by_inverse_layer_idx", false},
          {"reorder_and_upcast_attn", false},
          {"tie_word_embeddings", c.tie_weights},
          {"use_cache", true}};
}

std::vector<HfTensor> hf_gpt2_tensors(const nn::GPTConfig& c) {
  const int64_t d = c.d_model, f = c.ff_width();
  std::vector<HfTensor> t = {
      {"wte.weight", {c.vocab_size, d}, HfLayout::same, {"tok_emb.weight"}},
      {"wpe.weight", {c.context_length, d}, HfLayout::same, {"pos_emb.weight"}}};
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string h = fmt::format("h.{}.", i), b = fmt::format("blocks.{}.", i);
    const std::string q = b + "attn.W_query.", k = b + "attn.W_key.", v = b + "attn.W_value.";
    const std::vector<HfTensor> block = {
        {h + "ln_1.weight", {d}, HfLayout::same, {b + "ln1.weight"}},
        {h + "ln_1.bias", {d}, HfLayout::same, {b + "ln1.bias"}},
        {h + "attn.c_attn.weight",
         {d, 3 * d},
         HfLayout::qkv_weight,
         {q + "weight", k + "weight", v + "weight"}},
        {h + "attn.c_attn.bias", {3 * d}, HfLayout::qkv_bias, {q + "bias", k + "bias", v + "bias"}},
        {h + "attn.c_proj.weight", {d, d}, HfLayout::transposed, {b + "attn.out_proj.weight"}},
        {h + "attn.c_proj.bias", {d}, HfLayout::same, {b + "attn.out_proj.bias"}},
        {h + "ln_2.weight", {d}, HfLayout::same, {b + "ln2.weight"}},
        {h + "ln_2.bias", {d}, HfLayout::same, {b + "ln2.bias"}},
        {h + "mlp.c_fc.weight", {d, f}, HfLayout::transposed, {b + "mlp.fc1.weight"}},
        {h + "mlp.c_fc.bias", {f}, HfLayout::same, {b + "mlp.fc1.bias"}},
        {h + "mlp.c_proj.weight", {f, d}, HfLayout::transposed, {b + "mlp.fc2.weight"}},
        {h + "mlp.c_proj.bias", {d}, HfLayout::same, {b + "mlp.fc2.bias"}}};
    t.insert(t.end(), block.begin(), block.end());
  }
  t.push_back({"ln_f.weight", {d}, HfLayout::same, {"ln_f.weight"}});
  t.push_back({"ln_f.bias", {d}, HfLayout::same, {"ln_f.bias"}});
  if (c.num_classes > 0)  // GPT2ForSequenceClassification: score, no LM head
    t.push_back({"score.weight", {c.num_classes, d}, HfLayout::same, {"classifier.weight"}});
  else if (!c.tie_weights)
    t.push_back({"lm_head.weight", {c.vocab_size, d}, HfLayout::same, {"lm_head.weight"}});
  return t;
}

ModelFiles read_hf_gpt2(const std::string& path, const std::string& tokenizer_folder) {
  std::error_code ec;
  const bool is_folder = fs::is_directory(path, ec);
  const std::string folder = is_folder ? path : fs::path(path).parent_path().string();
  const std::string config_path = hf_config_path(path);
  ModelFiles m;
  m.format = is_folder ? "hf" : "safetensors";
  const json config = read_hf_config(config_path, gpt2_config_keys_read());
  m.config = gpt2_config_from_json(config, config_path, m.dropped);
  m.labels = classifier_labels(config, config_path, kClassifier);
  std::string source;
  {
    const ExpectedNames expected(m.config);
    const auto files = open_hf_weights(path, expected.hf_names());
    source = files.size() == 1 ? files.front().source() : path;
    read_gpt2_weights(files, m,
                      tokenizer_folder_bytes(tokenizer_folder.empty() ? folder : tokenizer_folder));
  }
  m.tokenizer = read_tokenizer_folder(tokenizer_folder.empty() ? folder : tokenizer_folder,
                                      !tokenizer_folder.empty(), &m.dropped);
  check_weights(m, source);
  return m;
}

void write_hf_gpt2(const ModelFiles& model, const std::string& folder, StoredType dtype,
                   uint64_t max_shard_bytes) {
  nn::GPTConfig c = model.config;
  if (c.norm != nn::NormKind::layer_norm)
    throw InteropError(
        fmt::format("{}: a GPT with {} cannot be GPT-2, which has LayerNorm", folder, c.norm));
  if (const std::string why = beyond_gpt2(c); !why.empty())
    throw InteropError(fmt::format("{}: this model cannot be GPT-2: {}", folder, why));
  if (dtype == StoredType::f16) check_f16_range(model, folder);
  std::map<std::string, const ag::Tensor*> ours;
  for (const auto& [name, t] : model.weights) ours.emplace(name, &t);
  const bool zero_qkv_bias = !c.qkv_bias;  // GPT-2's c_attn has a bias: zeros compute the same
  c.qkv_bias = true;
  std::vector<SafetensorsTensor> out;
  for (const auto& t : hf_gpt2_tensors(c)) {
    const bool zeros = zero_qkv_bias && t.layout == HfLayout::qkv_bias;
    const bool top = t.name == "lm_head.weight" || t.name == "score.weight";
    const std::string name = top ? t.name : std::string(kPrefix) + t.name;
    if (t.layout == HfLayout::same) {  // written from the parameter itself: no copy
      out.push_back({name, t.shape, nullptr, ours.at(t.ours[0])->data<float>()});
      continue;
    }
    out.push_back({name, t.shape, [&ours, t, zeros](float* hf) {
                     if (!zeros) convert_out(t, ours, hf);  // the buffer starts zeroed
                   }});
  }
  write_safetensors_model(folder, out, dtype, max_shard_bytes, {{"format", "pt"}});
  // (the tokenizer's files first: they name the end-of-text id config.json states)
  const auto eos = model.tokenizer ? write_hf_tokenizer(*model.tokenizer, c.vocab_size,
                                                        model.chat_format, model.stop_ids, folder)
                                   : std::nullopt;
  json config = gpt2_config_json(c, eos);
  if (c.num_classes > 0) {
    check_hf_classifier(model, folder);
    add_classifier_keys(config, model, config["architectures"][0], eos);
  }
  base::write_file_atomically((fs::path(folder) / "config.json").string(), config.dump(2) + "\n");
}

}  // namespace interop
