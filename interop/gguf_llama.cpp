#include "interop/gguf_llama.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <stdexcept>

#include "interop/model_files.h"

namespace interop {

namespace {

const char* const kFamily[] = {"llama", "qwen2", "qwen3"};

// attograd's keys for Llama 3's scaling: llama.cpp reads only rope_freqs.weight's factors,
// which do not say the numbers they came from
constexpr const char* kRopeFactorKey = "attograd.rope_scaling.factor";
constexpr const char* kRopeLowKey = "attograd.rope_scaling.low_freq_factor";
constexpr const char* kRopeHighKey = "attograd.rope_scaling.high_freq_factor";
constexpr const char* kRopeOriginalKey = "attograd.rope_scaling.original_context";

// The architecture's keys the reader uses (ARCH. + each).
const char* const kArchKeys[] = {"context_length",
                                 "embedding_length",
                                 "feed_forward_length",
                                 "block_count",
                                 "vocab_size",
                                 "attention.head_count",
                                 "attention.head_count_kv",
                                 "attention.key_length",
                                 "attention.value_length",
                                 "attention.layer_norm_rms_epsilon",
                                 "rope.freq_base",
                                 "rope.dimension_count"};

// The double a float32 stands for: its shortest decimal spelling (1e-05f is 1e-5), so that a
// config's 1e-5 or 500000 written as float32 reads back as it was.
double spelled(float v) {
  return std::stod(fmt::format("{}", v));
}

// What of the family's layout the config lacks ("" when it has it all).
std::string outside_family(const nn::GPTConfig& c) {
  if (c.position != nn::PositionKind::rope) return "its positions are learned, not rope";
  if (c.mlp != nn::MlpKind::swiglu) return "its MLP is gelu, not swiglu";
  if (c.norm != nn::NormKind::rms_norm) return "its norms are layernorm, not rmsnorm";
  if (c.linear_bias) return "its out_proj and MLP have biases (linear_bias)";
  if (c.qk_norm && c.qkv_bias) return "it has q/k norms and qkv biases (qwen3 has no biases)";
  if (c.qk_norm && c.rope_scaling != nn::RopeScaling::none)
    return "it has q/k norms and llama3 rope scaling (qwen3 has no rope factors)";
  for (const auto& [key, v] : {std::pair{"rope_theta", c.rope_theta}, {"norm_eps", c.norm_eps}})
    if (spelled(static_cast<float>(v)) != v)
      return fmt::format("its {} {} has no exact float32 spelling, which llama.cpp keeps", key, v);
  return "";
}

void add(std::vector<GgufTensor>& out, const std::map<std::string, ag::Shape>& shapes,
         std::string name, const std::string& part, int64_t rope_heads = 0) {
  out.push_back(
      {std::move(name), {part}, shapes.at(part), GgufTensor::Content::weights, rope_heads});
}

void add_block(std::vector<GgufTensor>& out, const std::map<std::string, ag::Shape>& shapes,
               const nn::GPTConfig& c, bool permuted, int64_t l) {
  const std::string blk = fmt::format("blk.{}.", l), b = fmt::format("blocks.{}.", l);
  add(out, shapes, blk + "attn_norm.weight", b + "ln1.weight");
  const int64_t q_heads = permuted ? c.n_heads : 0, k_heads = permuted ? c.kv_heads() : 0;
  for (const char* kind : {".weight", ".bias"}) {
    if (std::string(kind) == ".bias" && !c.qkv_bias) break;
    add(out, shapes, blk + "attn_q" + kind, b + "attn.W_query" + kind, q_heads);
    add(out, shapes, blk + "attn_k" + kind, b + "attn.W_key" + kind, k_heads);
    add(out, shapes, blk + "attn_v" + kind, b + "attn.W_value" + kind);
  }
  if (c.qk_norm) {
    add(out, shapes, blk + "attn_q_norm.weight", b + "attn.q_norm.weight");
    add(out, shapes, blk + "attn_k_norm.weight", b + "attn.k_norm.weight");
  }
  add(out, shapes, blk + "attn_output.weight", b + "attn.out_proj.weight");
  add(out, shapes, blk + "ffn_norm.weight", b + "ln2.weight");
  for (const char* proj : {"gate", "up", "down"})
    add(out, shapes, fmt::format("{}ffn_{}.weight", blk, proj),
        fmt::format("{}mlp.{}_proj.weight", b, proj));
}

const gguf::Value* optional_key(const gguf::File& f, const std::string& key,
                                std::set<std::string>& used) {
  used.insert(key);
  return f.find(key);
}

// A float key: F32 as llama.cpp writes them (read as the double it spells), or attograd's
// F64; `fallback` when absent.
double float_key(const gguf::File& f, const std::string& key, double fallback,
                 const std::string& source, std::set<std::string>& used) {
  const gguf::Value* v = optional_key(f, key, used);
  if (!v) return fallback;
  if (v->is_array || (v->type != gguf::kFloat32 && v->type != gguf::kFloat64))
    throw InteropError(fmt::format("{}: key {} is {}{}, not a FLOAT32", source, key,
                                   v->is_array ? "an array of " : "",
                                   gguf::value_type_name(v->type)));
  const double x = v->floats[0];
  return v->type == gguf::kFloat32 ? spelled(static_cast<float>(x)) : x;
}

// head_count_kv, key_length (value_length must agree) and rope.dimension_count: the heads.
void read_heads(const gguf::File& f, const std::string& arch, const std::string& source,
                std::set<std::string>& used, nn::GPTConfig& c) {
  const std::string p = arch + ".";
  if (optional_key(f, p + "attention.head_count_kv", used))
    c.n_kv_heads = size_key(f, p + "attention.head_count_kv", "n_kv_heads", source, used);
  if (c.n_kv_heads == 0 || c.n_kv_heads > c.n_heads || c.n_heads % c.n_kv_heads != 0)
    throw InteropError(
        fmt::format("{}: key {}attention.head_count_kv is {}: it must divide "
                    "attention.head_count ({})",
                    source, p, c.n_kv_heads, c.n_heads));
  if (c.n_kv_heads == c.n_heads) c.n_kv_heads = 0;
  if (optional_key(f, p + "attention.key_length", used))
    c.head_dim = size_key(f, p + "attention.key_length", "head_dim", source, used);
  if (optional_key(f, p + "attention.value_length", used) &&
      size_key(f, p + "attention.value_length", "head_dim", source, used) != c.head_width())
    throw InteropError(
        fmt::format("{}: key {}attention.value_length differs from key_length: "
                    "attograd's heads have one width",
                    source, p));
  if (c.head_dim != 0 && c.d_model % c.n_heads == 0 && c.head_dim == c.d_model / c.n_heads)
    c.head_dim = 0;
  if (optional_key(f, p + "rope.dimension_count", used) &&
      size_key(f, p + "rope.dimension_count", "head_dim", source, used) != c.head_width())
    throw InteropError(
        fmt::format("{}: key {}rope.dimension_count is not the head width {}: "
                    "attograd turns whole heads",
                    source, p, c.head_width()));
}

// rope_freqs.weight: Llama 3's scaling, its numbers from attograd's keys, else Meta's (1, 4,
// 8192; the factor 8 until settle_rope_factors reads it off the table).
void read_rope_scaling(const gguf::File& f, const std::string& source, std::set<std::string>& used,
                       nn::GPTConfig& c) {
  const gguf::TensorInfo* t = find_tensor(f, "rope_freqs.weight");
  if (!t) return;
  if (t->ne != std::vector<uint64_t>{static_cast<uint64_t>(c.head_width() / 2)})
    throw InteropError(fmt::format("{}: tensor rope_freqs.weight has ne [{}], the keys need [{}]",
                                   source, fmt::join(t->ne, ", "), c.head_width() / 2));
  c.rope_scaling = nn::RopeScaling::llama3;
  c.rope_factor = float_key(f, kRopeFactorKey, 8, source, used);
  c.rope_low_freq_factor = float_key(f, kRopeLowKey, 1, source, used);
  c.rope_high_freq_factor = float_key(f, kRopeHighKey, 4, source, used);
  c.rope_original_context = 8192;
  if (optional_key(f, kRopeOriginalKey, used))
    c.rope_original_context = size_key(f, kRopeOriginalKey, "rope_original_context", source, used);
}

}  // namespace

bool is_llama_family(const std::string& architecture) {
  for (const char* a : kFamily)
    if (architecture == a) return true;
  return false;
}

std::string gguf_architecture(const nn::GPTConfig& c, std::string& why) {
  const std::string beyond = beyond_gpt2(c);
  if (beyond.empty() && c.norm == nn::NormKind::layer_norm) return "gpt2";
  const std::string outside = outside_family(c);
  if (!outside.empty()) {
    why = fmt::format(
        "{}; and llama.cpp's llama, qwen2 and qwen3 (the Llama family's) cannot either: {}",
        beyond.empty()
            ? fmt::format("llama.cpp's gpt2 architecture uses layernorm; this model uses {}",
                          c.norm)
            : beyond,
        outside);
    return "";
  }
  if (c.qk_norm) return "qwen3";
  if (c.qkv_bias && c.rope_scaling == nn::RopeScaling::none) return "qwen2";
  return "llama";
}

std::vector<GgufTensor> llama_family_tensors(const nn::GPTConfig& c, const std::string& arch) {
  std::map<std::string, ag::Shape> shapes;
  for (const auto& [name, shape] : c.parameter_shapes()) shapes.emplace(name, shape);
  std::vector<GgufTensor> out;
  add(out, shapes, "token_embd.weight", "tok_emb.weight");
  if (c.rope_scaling == nn::RopeScaling::llama3)
    out.push_back(
        {"rope_freqs.weight", {}, {c.head_width() / 2}, GgufTensor::Content::rope_factors});
  for (int64_t l = 0; l < c.n_layers; ++l) add_block(out, shapes, c, arch == "llama", l);
  add(out, shapes, "output_norm.weight", "ln_f.weight");
  if (!c.tie_weights) add(out, shapes, "output.weight", "lm_head.weight");
  return out;
}

void add_llama_family_keys(const nn::GPTConfig& c, const std::string& arch, gguf::File& f) {
  using gguf::Value;
  const auto u32 = [](int64_t v) { return Value::u32(static_cast<uint32_t>(v)); };
  const auto key = [&](const char* name, Value v) {
    f.keys.emplace_back(fmt::format("{}.{}", arch, name), std::move(v));
  };
  key("context_length", u32(c.context_length));
  key("embedding_length", u32(c.d_model));
  key("feed_forward_length", u32(c.ff_width()));
  key("block_count", u32(c.n_layers));
  key("attention.head_count", u32(c.n_heads));
  key("attention.head_count_kv", u32(c.kv_heads()));
  key("rope.freq_base", Value::f32(static_cast<float>(c.rope_theta)));
  key("attention.layer_norm_rms_epsilon", Value::f32(static_cast<float>(c.norm_eps)));
  key("rope.dimension_count", u32(c.head_width()));
  if (c.head_width() * c.n_heads != c.d_model) {
    key("attention.key_length", u32(c.head_width()));
    key("attention.value_length", u32(c.head_width()));
  }
  key("vocab_size", u32(c.vocab_size));
  if (c.rope_scaling != nn::RopeScaling::llama3) return;
  const auto f64 = [](double v) { return Value{gguf::kFloat64, false, {}, {v}, {}}; };
  f.keys.emplace_back(kRopeFactorKey, f64(c.rope_factor));
  f.keys.emplace_back(kRopeLowKey, f64(c.rope_low_freq_factor));
  f.keys.emplace_back(kRopeHighKey, f64(c.rope_high_freq_factor));
  f.keys.emplace_back(kRopeOriginalKey, u32(c.rope_original_context));
}

bool llama_family_key(const std::string& key) {
  for (const char* k : {kRopeFactorKey, kRopeLowKey, kRopeHighKey, kRopeOriginalKey})
    if (key == k) return true;
  const size_t dot = key.find('.');
  if (dot == std::string::npos || !is_llama_family(key.substr(0, dot))) return false;
  for (const char* k : kArchKeys)
    if (key.compare(dot + 1, std::string::npos, k) == 0) return true;
  return false;
}

nn::GPTConfig llama_family_config(const gguf::File& f, const std::string& arch,
                                  const std::string& source, std::set<std::string>& used) {
  const std::string p = arch + ".";
  nn::GPTConfig c;
  c.position = nn::PositionKind::rope, c.mlp = nn::MlpKind::swiglu;
  c.norm = nn::NormKind::rms_norm, c.linear_bias = false;
  c.context_length = size_key(f, p + "context_length", "context_length", source, used);
  c.d_model = size_key(f, p + "embedding_length", "d_model", source, used);
  c.d_ff = size_key(f, p + "feed_forward_length", "d_ff", source, used);
  if (c.d_ff == 4 * c.d_model) c.d_ff = 0;  // attograd's way of saying 4 d
  c.n_layers = size_key(f, p + "block_count", "n_layers", source, used);
  c.n_heads = size_key(f, p + "attention.head_count", "n_heads", source, used);
  c.n_kv_heads = c.n_heads;
  read_heads(f, arch, source, used, c);
  c.rope_theta = float_key(f, p + "rope.freq_base", 10000, source, used);
  c.norm_eps = spelled(static_cast<float>(
      scalar_key(f, p + "attention.layer_norm_rms_epsilon", gguf::kFloat32, source, used)
          .floats[0]));
  c.qkv_bias = find_tensor(f, "blk.0.attn_q.bias") != nullptr;
  c.qk_norm = find_tensor(f, "blk.0.attn_q_norm.weight") != nullptr;
  c.tie_weights = find_tensor(f, "output.weight") == nullptr;
  read_rope_scaling(f, source, used, c);
  return c;
}

void settle_rope_factors(const std::vector<float>& stored, const gguf::File& f,
                         const std::string& source, nn::GPTConfig& c) {
  if (!f.find(kRopeFactorKey)) {
    c.rope_factor = 1;
    for (float v : stored) c.rope_factor = std::max(c.rope_factor, static_cast<double>(v));
  }
  const std::vector<float> expected = llama3_rope_factors(c);
  for (size_t i = 0; i < stored.size(); ++i)
    if (!(std::fabs(stored[i] - expected[i]) <= 1e-5 * std::fabs(expected[i])))
      throw InteropError(fmt::format(
          "{}: tensor rope_freqs.weight: factor {} is {}, but Llama 3's scaling with factor {}, "
          "low/high frequency factors {}, {} and original context {} gives {}",
          source, i, stored[i], c.rope_factor, c.rope_low_freq_factor, c.rope_high_freq_factor,
          c.rope_original_context, expected[i]));
}

std::vector<float> llama3_rope_factors(const nn::GPTConfig& c) {
  const int64_t D = c.head_width();
  const double old_context = static_cast<double>(c.rope_original_context);
  const double low_wavelength = old_context / c.rope_low_freq_factor;
  const double high_wavelength = old_context / c.rope_high_freq_factor;
  std::vector<float> factors;
  for (int64_t i = 0; i < D / 2; ++i) {
    const double frequency =
        1.0 / std::pow(c.rope_theta, static_cast<double>(2 * i) / static_cast<double>(D));
    const double wavelength = 2 * std::numbers::pi / frequency;
    double factor = 1;
    if (wavelength > low_wavelength) {
      factor = c.rope_factor;
    } else if (wavelength >= high_wavelength) {
      const double smooth = (old_context / wavelength - c.rope_low_freq_factor) /
                            (c.rope_high_freq_factor - c.rope_low_freq_factor);
      factor = 1 / ((1 - smooth) / c.rope_factor + smooth);
    }
    factors.push_back(static_cast<float>(factor));
  }
  return factors;
}

}  // namespace interop
