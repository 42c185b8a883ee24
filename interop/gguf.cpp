#include "interop/gguf.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "autograd/quant/packed_weight.h"
#include "base/atomic_file.h"
#include "base/utf8.h"
#include "data/gpt2_tokenizer.h"
#include "data/tokenizer_file.h"
#include "interop/gguf_format.h"
#include "interop/gguf_llama.h"
#include "interop/gguf_model.h"
#include "interop/gguf_tokenizer.h"
#include "interop/hf_folder.h"
#include "interop/import_memory.h"
#include "io/tokenizer_section.h"

namespace interop {

namespace {

constexpr float kLayerNormEps = 1e-5f;  // nn::LayerNorm's, the only one attograd has
// llama.cpp's general.file_type (llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_BF16)
constexpr uint32_t kFileTypeF32 = 0, kFileTypeF16 = 1, kFileTypeBf16 = 32;
// The most entries a tokenizer key may have: the largest vocabulary a checkpoint keeps.
constexpr uint64_t kMaxTokenizerEntries =
    static_cast<uint64_t>(data::kMaxBpeVocabSize) + data::Gpt2Tokenizer::kMaxSpecialTokens;
// The most the kept keys' strings may hold in all, counted with their std::strings: a
// tokenizer of that many tokens and merges comes to about 90 MB so (Llama 3's to 17 MB). Whatever
// a file's tokens say, the import keeps no more (the vocabulary, which could bound them
// better, comes with the tensor infos after the keys).
constexpr uint64_t kMaxKeptStringBytes = uint64_t{128} << 20;

// llama.cpp's gpt2 tensors (the qkv biases of a model without them: zeros).
std::vector<GgufTensor> gpt2_tensors(const nn::GPTConfig& c) {
  std::map<std::string, ag::Shape> shapes;
  for (const auto& [name, shape] : c.parameter_shapes()) shapes.emplace(name, shape);
  std::vector<GgufTensor> out;
  auto add = [&](std::string name, std::vector<std::string> parts) {
    ag::Shape shape = shapes.at(parts[0]);
    shape[0] *= static_cast<int64_t>(parts.size());
    out.push_back({std::move(name), std::move(parts), shape});
  };
  add("token_embd.weight", {"tok_emb.weight"});
  add("position_embd.weight", {"pos_emb.weight"});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string blk = fmt::format("blk.{}.", l), b = fmt::format("blocks.{}.", l);
    const auto qkv = [&](const char* kind) {
      std::vector<std::string> parts;
      for (const char* m : {"W_query", "W_key", "W_value"}) parts.push_back(b + "attn." + m + kind);
      return parts;
    };
    for (const char* kind : {".weight", ".bias"}) add(blk + "attn_norm" + kind, {b + "ln1" + kind});
    add(blk + "attn_qkv.weight", qkv(".weight"));
    if (c.qkv_bias)
      add(blk + "attn_qkv.bias", qkv(".bias"));
    else
      out.push_back({blk + "attn_qkv.bias", {}, {3 * c.d_model}, GgufTensor::Content::zeros});
    for (const auto& [gguf_name, ours] :
         {std::pair{"attn_output", "attn.out_proj"}, std::pair{"ffn_norm", "ln2"},
          std::pair{"ffn_up", "mlp.fc1"}, std::pair{"ffn_down", "mlp.fc2"}})
      for (const char* kind : {".weight", ".bias"}) add(blk + gguf_name + kind, {b + ours + kind});
  }
  add("output_norm.weight", {"ln_f.weight"});
  add("output_norm.bias", {"ln_f.bias"});
  if (!c.tie_weights) add("output.weight", {"lm_head.weight"});
  return out;
}

}  // namespace

std::vector<GgufTensor> gguf_tensors(const nn::GPTConfig& c, const std::string& arch) {
  return arch == "gpt2" ? gpt2_tensors(c) : llama_family_tensors(c, arch);
}

namespace {

// llama-quantize's fallback for a format on rows that are not a whole number of its
// blocks (llama-quant.cpp): the K formats to a format of 32-weight blocks, those to F16.
const ag::quant::BlockLayout* fallback(const ag::quant::BlockLayout& l) {
  using ag::quant::BlockFormat;
  static const std::pair<BlockFormat, BlockFormat> kFallbacks[] = {
      {BlockFormat::q4_k, BlockFormat::q5_0},
      {BlockFormat::q5_k, BlockFormat::q5_1},
      {BlockFormat::q6_k, BlockFormat::q8_0}};
  for (const auto& [from, to] : kFallbacks)
    if (l.format == from) return &ag::quant::layout(to);
  return nullptr;
}

// llama.cpp's converter keeps 1-D tensors and position_embd in F32 whatever the file type;
// llama-quantize quantizes the head (output, or token_embd standing for it) to Q6_K unless
// the file is Q8_0.
uint32_t tensor_type(const GgufTensor& t, const GgufDtype& dtype, bool tied) {
  if (t.shape.size() < 2 || t.name == "position_embd.weight") return gguf::kF32;
  if (!dtype.blocks) {
    if (dtype.floats == StoredType::f32) return gguf::kF32;
    return dtype.floats == StoredType::f16 ? gguf::kF16 : gguf::kBF16;
  }
  const bool head = t.name == "output.weight" || (tied && t.name == "token_embd.weight");
  const bool q8 = dtype.blocks->format == ag::quant::BlockFormat::q8_0;
  const ag::quant::BlockLayout* l =
      head && !q8 ? &ag::quant::layout(ag::quant::BlockFormat::q6_k) : dtype.blocks;
  while (l && t.shape.back() % l->elements != 0) l = fallback(*l);
  return l ? l->ggml_type : gguf::kF16;
}

// llama.cpp's general.file_type (llama_ftype): ALL_F32, MOSTLY_F16, MOSTLY_BF16, and per block
// format the plain type's (Q4_K and Q5_K as the _S files llama-quantize names)
uint32_t file_type(const GgufDtype& dtype) {
  using ag::quant::BlockFormat;
  static const std::pair<BlockFormat, uint32_t> kBlockFileTypes[] = {
      {BlockFormat::q4_0, 2},  {BlockFormat::q4_1, 3}, {BlockFormat::q8_0, 7},
      {BlockFormat::q5_0, 8},  {BlockFormat::q5_1, 9}, {BlockFormat::q4_k, 14},
      {BlockFormat::q5_k, 16}, {BlockFormat::q6_k, 18}};
  if (dtype.blocks) {
    for (const auto& [format, type] : kBlockFileTypes)
      if (dtype.blocks->format == format) return type;
    throw std::logic_error("gguf: a block format that is not written");
  }
  return dtype.floats == StoredType::f32   ? kFileTypeF32
         : dtype.floats == StoredType::f16 ? kFileTypeF16
                                           : kFileTypeBf16;
}

void add_gpt2_keys(const nn::GPTConfig& c, gguf::File& f) {
  using gguf::Value;
  auto u32 = [](int64_t v) { return Value::u32(static_cast<uint32_t>(v)); };
  const std::pair<std::string, Value> keys[] = {
      {"gpt2.context_length", u32(c.context_length)},
      {"gpt2.embedding_length", u32(c.d_model)},
      {"gpt2.feed_forward_length", u32(c.ff_width())},
      {"gpt2.block_count", u32(c.n_layers)},
      {"gpt2.attention.head_count", u32(c.n_heads)},
      {"gpt2.attention.layer_norm_epsilon", Value::f32(kLayerNormEps)},
  };
  f.keys.insert(f.keys.end(), std::begin(keys), std::end(keys));
  if (!c.qkv_bias) f.keys.emplace_back(kGgufNoQkvBiasKey, Value::boolean(false));
}

gguf::File gguf_keys(const ModelFiles& m, const GgufDtype& dtype, const std::string& name,
                     const std::string& arch) {
  using gguf::Value;
  const nn::GPTConfig& c = m.config;
  gguf::File f;
  auto u32 = [](int64_t v) { return Value::u32(static_cast<uint32_t>(v)); };
  f.keys = {
      {"general.architecture", Value::string(arch)},
      {"general.name", Value::string(name)},
      {"general.alignment", u32(gguf::kDefaultAlignment)},
      {"general.file_type", u32(file_type(dtype))},
  };
  if (is_llama_family(arch))
    add_llama_family_keys(c, arch, f);
  else
    add_gpt2_keys(c, f);
  if (m.tokenizer && io::tokenizer_kind(*m.tokenizer) != data::TokenizerKind::none)
    add_tokenizer_keys(*m.tokenizer, c.vocab_size, m.chat_format, f);
  return f;
}

}  // namespace

std::vector<uint64_t> ggml_ne(const ag::Shape& shape) {
  return std::vector<uint64_t>(shape.rbegin(), shape.rend());
}

int64_t gguf_row_source(int64_t row, int64_t rows, int64_t heads) {
  const int64_t width = rows / heads, half = width / 2;
  const int64_t head = row / width, within = row % width;
  return head * width + (within % 2) * half + within / 2;
}

int64_t size_key(const gguf::File& f, const std::string& key, const char* config_key,
                 const std::string& source, std::set<std::string>& used) {
  used.insert(key);
  const gguf::Value* v = f.find(key);
  if (!v) throw InteropError(fmt::format("{}: key {} is missing", source, key));
  if (v->is_array || v->ints.size() != 1 || v->type == gguf::kBool)
    throw InteropError(fmt::format("{}: key {} is {}{}, not an integer", source, key,
                                   v->is_array ? "an array of " : "",
                                   gguf::value_type_name(v->type)));
  const int64_t n = v->ints[0];
  const bool huge = v->type == gguf::kUint64 && n < 0;  // above INT64_MAX
  for (const auto& field : nn::config_fields())
    if (std::string(field.key) == config_key &&
        (huge || n < static_cast<int64_t>(field.min) || n > static_cast<int64_t>(field.max)))
      throw InteropError(
          fmt::format("{}: key {} is {}: must be {} to {}", source, key,
                      huge ? fmt::format("{}", static_cast<uint64_t>(n)) : fmt::format("{}", n),
                      static_cast<int64_t>(field.min), static_cast<int64_t>(field.max)));
  return n;
}

const gguf::Value& scalar_key(const gguf::File& f, const std::string& key, uint32_t type,
                              const std::string& source, std::set<std::string>& used) {
  used.insert(key);
  const gguf::Value* v = f.find(key);
  if (!v) throw InteropError(fmt::format("{}: key {} is missing", source, key));
  if (v->is_array || v->type != type)
    throw InteropError(fmt::format("{}: key {} is {}{}, not a {}", source, key,
                                   v->is_array ? "an array of " : "",
                                   gguf::value_type_name(v->type), gguf::value_type_name(type)));
  return *v;
}

const gguf::TensorInfo* find_tensor(const gguf::File& f, const std::string& name) {
  for (const auto& t : f.tensors)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

// The vocabulary: token_embd's rows.
int64_t vocab_of(const gguf::File& f, const std::string& source) {
  const gguf::TensorInfo* embd = find_tensor(f, "token_embd.weight");
  if (!embd) throw InteropError(fmt::format("{}: no tensor token_embd.weight", source));
  if (embd->ne.size() != 2)
    throw InteropError(
        fmt::format("{}: tensor token_embd.weight has {} dims, not 2", source, embd->ne.size()));
  if (embd->ne[1] > (1 << 24))
    throw InteropError(fmt::format("{}: tensor token_embd.weight has {} rows (tokens): at most {}",
                                   source, embd->ne[1], 1 << 24));
  return static_cast<int64_t>(embd->ne[1]);
}

// general.architecture: gpt2, llama, qwen2 or qwen3.
std::string architecture_of(const gguf::File& f, const std::string& source,
                            std::set<std::string>& used) {
  const std::string arch =
      scalar_key(f, "general.architecture", gguf::kString, source, used).strings[0];
  if (arch != "gpt2" && !is_llama_family(arch))
    throw InteropError(
        fmt::format("{}: key general.architecture is '{}': only gpt2, llama, qwen2 and qwen3 "
                    "are read",
                    source, excerpt(arch)));
  return arch;
}

nn::GPTConfig gpt2_config(const gguf::File& f, const std::string& source,
                          std::set<std::string>& used) {
  nn::GPTConfig c;
  c.context_length = size_key(f, "gpt2.context_length", "context_length", source, used);
  c.d_model = size_key(f, "gpt2.embedding_length", "d_model", source, used);
  c.d_ff = size_key(f, "gpt2.feed_forward_length", "d_ff", source, used);
  if (c.d_ff == 4 * c.d_model) c.d_ff = 0;  // attograd's way of saying GPT-2's 4 d
  c.n_layers = size_key(f, "gpt2.block_count", "n_layers", source, used);
  c.n_heads = size_key(f, "gpt2.attention.head_count", "n_heads", source, used);
  const double eps =
      scalar_key(f, "gpt2.attention.layer_norm_epsilon", gguf::kFloat32, source, used).floats[0];
  if (static_cast<float>(eps) != kLayerNormEps)
    throw InteropError(
        fmt::format("{}: key gpt2.attention.layer_norm_epsilon is {}: attograd's "
                    "LayerNorm has eps 1e-5 only",
                    source, static_cast<float>(eps)));
  c.qkv_bias = !f.find(kGgufNoQkvBiasKey) ||
               scalar_key(f, kGgufNoQkvBiasKey, gguf::kBool, source, used).ints[0] != 0;
  c.tie_weights = find_tensor(f, "output.weight") == nullptr;
  return c;
}

nn::GPTConfig config_of(const gguf::File& f, const std::string& arch, const std::string& source,
                        std::set<std::string>& used) {
  nn::GPTConfig c =
      arch == "gpt2" ? gpt2_config(f, source, used) : llama_family_config(f, arch, source, used);
  c.vocab_size = vocab_of(f, source);
  const std::string vocab_key = arch + ".vocab_size";
  if (used.insert(vocab_key),
      f.find(vocab_key) && size_key(f, vocab_key, "vocab_size", source, used) != c.vocab_size)
    throw InteropError(fmt::format("{}: key {} is not token_embd.weight's {} rows", source,
                                   vocab_key, c.vocab_size));
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw InteropError(fmt::format("{}: the {}.* keys are not a model attograd builds: {}", source,
                                   arch, e.what()));
  }
  return c;
}

// Every element +0.0 or -0.0.
bool all_values_zero(const std::vector<float>& v) {
  for (float x : v)
    if (x != 0.0f) return false;
  return true;
}

// A tensor that holds no parameter: the gpt2 qkv biases of a model without them (zeros), or
// Llama 3's rope factors (the config's, which they may settle).
void check_derived_tensor(const InputBytes& in, const gguf::File& f, const gguf::TensorInfo& info,
                          const GgufTensor& t, nn::GPTConfig& c) {
  const std::vector<float> stored = gguf::read_tensor(in, f, info);
  if (t.content == GgufTensor::Content::rope_factors)
    return settle_rope_factors(stored, f, in.source(), c);
  if (!all_values_zero(stored))
    throw InteropError(
        fmt::format("{}: tensor {} is not zero, but key {} says the model has no qkv biases",
                    in.source(), t.name, kGgufNoQkvBiasKey));
}

// The rows of a tensor permuted per head (llama's attn_q, attn_k) each put back in its place.
void read_permuted_rows(const InputBytes& in, const gguf::File& f, const gguf::TensorInfo& info,
                        const GgufTensor& t, float* out) {
  const int64_t rows = t.shape[0], width = ag::shape_numel(t.shape) / rows;
  for (int64_t row = 0; row < rows; ++row)
    gguf::read_tensor_into(in, f, info, static_cast<uint64_t>(row * width),
                           static_cast<uint64_t>(width),
                           out + gguf_row_source(row, rows, t.rope_heads) * width);
}

// The packed format a tensor is kept in by an import keeping blocks: its block format's
// row (packed_weight.h); null for floats, a vector, or Q8_K (activations' format, which no
// model file of llama-quantize holds: dequantized as ever).
const ag::quant::PackedFormat* kept_format(const gguf::TensorInfo& info, const GgufTensor& t,
                                           bool keep_blocks) {
  if (!keep_blocks || t.shape.size() != 2) return nullptr;
  const ag::quant::BlockLayout* l = gguf::block_layout(info.type);
  return l ? ag::quant::packed_format_named(l->name) : nullptr;
}

// Part p of a tensor of blocks (its rows stacked) as those blocks, byte for byte, read
// straight into a packed tensor; a tensor permuted per head (one part) row by row, each
// row put back in its place. read_header checked the rows are whole blocks.
ag::Tensor read_part_blocks(const InputBytes& in, const gguf::File& f, const gguf::TensorInfo& info,
                            const GgufTensor& t, const ag::Shape& shape, size_t p,
                            const ag::quant::PackedFormat& format) {
  ag::Tensor w = ag::quant::packed_empty(shape, format);
  const auto row_bytes = static_cast<uint64_t>(ag::quant::packed_row_bytes(format, shape[1]));
  const auto rows = static_cast<uint64_t>(shape[0]);
  uint8_t* out = ag::quant::packed_data(w).data();
  if (t.rope_heads == 0) {
    gguf::read_tensor_bytes(in, f, info, p * rows * row_bytes, rows * row_bytes, out);
    return w;
  }
  for (uint64_t row = 0; row < rows; ++row) {
    const auto to =
        static_cast<uint64_t>(gguf_row_source(static_cast<int64_t>(row), shape[0], t.rope_heads));
    gguf::read_tensor_bytes(in, f, info, row * row_bytes, row_bytes, out + to * row_bytes);
  }
  return w;
}

// The file's tensors cut into attograd's, in the order of gguf_tensors(config); with
// keep_blocks a matrix of blocks is kept as them (kept_format).
void read_weights(const InputBytes& in, const gguf::File& f, const std::string& arch,
                  bool keep_blocks, ModelFiles& m) {
  const std::string& source = in.source();
  const std::vector<GgufTensor> tensors = gguf_tensors(m.config, arch);
  std::set<std::string> expected;
  for (const auto& t : tensors) expected.insert(t.name);
  for (const auto& info : f.tensors)
    if (!expected.count(info.name))
      throw InteropError(
          fmt::format("{}: tensor {} is not one of llama.cpp's {} tensors for "
                      "these keys",
                      source, excerpt(info.name), arch));
  for (const auto& t : tensors) {
    const gguf::TensorInfo* info = find_tensor(f, t.name);
    if (!info) throw InteropError(fmt::format("{}: no tensor {}", source, t.name));
    if (info->ne != ggml_ne(t.shape))
      throw InteropError(fmt::format("{}: tensor {} has ne [{}], the keys need [{}]", source,
                                     t.name, fmt::join(info->ne, ", "),
                                     fmt::join(ggml_ne(t.shape), ", ")));
    if (t.content != GgufTensor::Content::weights) {
      check_derived_tensor(in, f, *info, t, m.config);
      continue;
    }
    // each part (rows stacked) read straight into its parameter: no copy of the tensor
    ag::Shape shape = t.shape;
    shape[0] /= static_cast<int64_t>(t.parts.size());
    const auto part_size = static_cast<uint64_t>(ag::shape_numel(shape));
    const ag::quant::PackedFormat* blocks = kept_format(*info, t, keep_blocks);
    for (size_t p = 0; p < t.parts.size(); ++p) {
      if (blocks) {
        m.weights.emplace_back(t.parts[p], read_part_blocks(in, f, *info, t, shape, p, *blocks));
        continue;
      }
      ag::Tensor w = ag::empty(shape);
      if (t.rope_heads > 0)
        read_permuted_rows(in, f, *info, t, w.data<float>());
      else
        gguf::read_tensor_into(in, f, *info, p * part_size, part_size, w.data<float>());
      m.weights.emplace_back(t.parts[p], w);
    }
  }
}

// llama.cpp's converter writes GPT-2's tied head as output.weight, a copy of token_embd: such
// a copy is the tied head it stands for.
void retie_head(ModelFiles& m) {
  if (m.config.tie_weights) return;
  const ag::Tensor& emb = m.weights.front().second;     // tok_emb.weight comes first
  const auto head = m.weights.end() - 1;                // lm_head.weight last
  if (emb.packing() != head->second.packing()) return;  // kept blocks of two formats
  if (emb.packing()) {
    const auto a = ag::quant::packed_bytes(emb), b = ag::quant::packed_bytes(head->second);
    if (a.size() != b.size() || std::memcmp(a.data(), b.data(), a.size()) != 0) return;
  } else if (std::memcmp(emb.data<float>(), head->second.data<float>(),
                         static_cast<size_t>(emb.numel()) * sizeof(float)) != 0) {
    return;
  }
  m.weights.erase(head);
  m.config.tie_weights = true;
  m.dropped.push_back("output.weight (a copy of token_embd.weight: the head is tied)");
}

// The keys a model is read from (gpt2's here, the Llama family's in gguf_llama.h) (the rest are
// read past, unstored); general.name and general.file_type are read past unnoted (a file's name, a
// type the tensors state anyway).
gguf::KeyUse key_use(const std::string& key) {
  static const std::set<std::string> kept = {"general.architecture",
                                             "general.alignment",
                                             "gpt2.context_length",
                                             "gpt2.embedding_length",
                                             "gpt2.feed_forward_length",
                                             "gpt2.block_count",
                                             "gpt2.attention.head_count",
                                             "gpt2.attention.layer_norm_epsilon",
                                             kGgufNoQkvBiasKey,
                                             "tokenizer.ggml.model",
                                             "tokenizer.ggml.pre",
                                             "tokenizer.ggml.tokens",
                                             "tokenizer.ggml.token_type",
                                             "tokenizer.ggml.merges",
                                             "tokenizer.ggml.bos_token_id",
                                             "tokenizer.ggml.eos_token_id",
                                             "tokenizer.ggml.add_bos_token",
                                             "tokenizer.chat_template"};
  if (kept.count(key) || llama_family_key(key)) return gguf::KeyUse::keep;
  // (eot: a chat format's end of turn, which the chat template's format gives again)
  if (key == "general.name" || key == "general.file_type" || key == "tokenizer.ggml.eot_token_id")
    return gguf::KeyUse::ignore;
  return gguf::KeyUse::skip;
}

// The names of llama.cpp's tensors of the keys' architecture and block count (every
// optional one included), once the file is seen to have room for their infos (32 bytes each
// at least).
std::set<std::string> tensor_names(const gguf::File& keys, const InputBytes& in) {
  std::set<std::string> ignored;
  const std::string arch = architecture_of(keys, in.source(), ignored);
  nn::GPTConfig c;
  c.n_layers = size_key(keys, arch + ".block_count", "n_layers", in.source(), ignored);
  constexpr uint64_t kTensorsPerBlock = 9, kInfoBytes = 32;
  if (static_cast<uint64_t>(c.n_layers) * kTensorsPerBlock * kInfoBytes > in.size())
    throw InteropError(
        fmt::format("{}: key {}.block_count is {}: the infos of its tensors "
                    "cannot fit in the file ({} bytes)",
                    in.source(), arch, c.n_layers, in.size()));
  c.tie_weights = false, c.qkv_bias = false;  // output.weight may come; gpt2's biases always do
  if (is_llama_family(arch)) {  // every optional tensor: qkv biases, q/k norms, rope factors
    c.position = nn::PositionKind::rope, c.mlp = nn::MlpKind::swiglu;
    c.norm = nn::NormKind::rms_norm, c.linear_bias = false;
    c.qkv_bias = true, c.qk_norm = true, c.rope_scaling = nn::RopeScaling::llama3;
  }
  std::set<std::string> names;
  for (const auto& t : gguf_tensors(c, arch)) names.insert(t.name);
  return names;
}

// What read_gguf keeps of the header: the keys above, no array longer than a tokenizer the
// checkpoint can hold, and only llama.cpp's tensors of its architecture for its block count,
// each refused as its info is read (a header of millions costs its first stranger).
gguf::HeaderFilter model_filter(const InputBytes& in) {
  const std::string& source = in.source();
  gguf::HeaderFilter filter;
  filter.key = [source](const std::string& key, uint32_t, bool is_array, uint64_t count) {
    const gguf::KeyUse use = key_use(key);
    if (use == gguf::KeyUse::keep && is_array && count > kMaxTokenizerEntries)
      throw InteropError(
          fmt::format("{}: key {} holds {} entries, more than the {} of the largest "
                      "tokenizer attograd keeps",
                      source, excerpt(key), count, kMaxTokenizerEntries));
    return use;
  };
  filter.max_kept_string_bytes = kMaxKeptStringBytes;
  auto expected = std::make_shared<std::set<std::string>>();
  filter.tensor = [&in, expected](const gguf::File& keys, const gguf::TensorInfo& t) {
    if (expected->empty()) *expected = tensor_names(keys, in);
    if (!expected->count(t.name))
      throw InteropError(
          fmt::format("{}: tensor {} is not one of llama.cpp's {} tensors for these keys",
                      in.source(), excerpt(t.name), keys.find("general.architecture")->strings[0]));
  };
  return filter;
}

// tokenizer.chat_template's family (data::detect_chat_format), as a Hugging Face folder's
// tokenizer_config.json is read: a template of neither family is noted in dropped.
std::optional<data::ChatFormat> chat_format_key(const gguf::File& f, const std::string& source,
                                                std::set<std::string>& used,
                                                std::vector<std::string>& dropped) {
  used.insert("tokenizer.chat_template");
  const gguf::Value* v = f.find("tokenizer.chat_template");
  if (!v) return std::nullopt;
  if (v->is_array || v->type != gguf::kString)
    throw InteropError(fmt::format("{}: key tokenizer.chat_template is not a string", source));
  const std::optional<data::ChatFormat> format = data::detect_chat_format(v->strings[0]);
  if (!format)
    dropped.push_back(
        "tokenizer.chat_template, which writes neither ChatML (<|im_start|>) nor Llama 3's "
        "headers (<|start_header_id|>), the chat formats attograd knows: sample --chat needs "
        "--chat-format");
  return format;
}

// Keys neither read nor known, noted by name (the first kNamedSkips of those read past).
void note_unused_keys(const gguf::File& f, const std::set<std::string>& used,
                      std::vector<std::string>& dropped) {
  std::vector<std::string> unused;
  for (const auto& [key, v] : f.keys)
    if (!used.count(key)) unused.push_back(excerpt(key));
  unused.insert(unused.end(), f.skipped_names.begin(), f.skipped_names.end());
  if (unused.empty()) return;
  const uint64_t more = f.skipped_keys - f.skipped_names.size();
  dropped.push_back(fmt::format("keys {}{}", fmt::join(unused, ", "),
                                more ? fmt::format(" and {} more", more) : ""));
}

}  // namespace

std::string gguf_cannot_express(const ModelFiles& m) {
  std::string why;
  gguf_architecture(m.config, why);
  return why;
}

namespace {

// rows x width floats as the tensor's type: floats, or each row's blocks.
void write_rows(const float* x, int64_t rows, int64_t width, uint32_t type, const ByteSink& out) {
  const ag::quant::BlockLayout* l = gguf::block_layout(type);
  if (!l) return write_floats(x, rows * width, gguf::stored_type(type), out);
  std::vector<uint8_t> blocks(static_cast<size_t>(rows * ag::quant::row_bytes(*l, width)));
  ag::quant::quantize_rows(*l, x, rows, width, blocks.data());
  out(reinterpret_cast<const char*>(blocks.data()), blocks.size());
}

// One tensor's bytes: its parts' rows (permuted per head for llama's attn_q and attn_k, a
// part at a time), zeros, or the rope factors.
void write_tensor(const GgufTensor& t, const std::map<std::string, ag::Tensor>& weights,
                  const nn::GPTConfig& c, uint32_t type, const ByteSink& out) {
  if (t.content == GgufTensor::Content::zeros)
    return write_zeros(ag::shape_numel(t.shape), gguf::stored_type(type), out);
  if (t.content == GgufTensor::Content::rope_factors) {
    const std::vector<float> factors = llama3_rope_factors(c);
    return write_rows(factors.data(), 1, static_cast<int64_t>(factors.size()), type, out);
  }
  for (const auto& part : t.parts) {
    const auto it = weights.find(part);
    if (it == weights.end())
      throw InteropError(fmt::format("the model has no tensor {}, which its config states", part));
    const ag::Tensor w = it->second.contiguous();
    const int64_t rows = w.shape()[0], width = w.numel() / rows;
    if (t.rope_heads == 0) {
      write_rows(w.data<float>(), rows, width, type, out);
      continue;
    }
    std::vector<float> permuted(static_cast<size_t>(w.numel()));
    for (int64_t row = 0; row < rows; ++row)
      std::memcpy(permuted.data() + row * width,
                  w.data<float>() + gguf_row_source(row, rows, t.rope_heads) * width,
                  static_cast<size_t>(width) * sizeof(float));
    write_rows(permuted.data(), rows, width, type, out);
  }
}

}  // namespace

void write_gguf(const ModelFiles& m, GgufDtype dtype, const std::string& name,
                const ByteSink& out) {
  std::string why;
  const std::string arch = gguf_architecture(m.config, why);
  if (arch.empty()) throw InteropError("a GGUF file cannot hold this model: " + why);
  if (dtype.floats == StoredType::f16 || dtype.blocks) check_f16_range(m, "GGUF F16");
  gguf::File f = gguf_keys(m, dtype, name, arch);
  const std::vector<GgufTensor> tensors = gguf_tensors(m.config, arch);
  for (const auto& t : tensors)
    f.tensors.push_back({t.name, ggml_ne(t.shape), tensor_type(t, dtype, m.config.tie_weights), 0});
  gguf::write_header(f, out);
  const std::map<std::string, ag::Tensor> weights(m.weights.begin(), m.weights.end());
  for (size_t i = 0; i < tensors.size(); ++i) {
    write_tensor(tensors[i], weights, m.config, f.tensors[i].type, out);
    gguf::write_padding(f.tensors[i].bytes(), f.alignment, out);
  }
}

void write_gguf(const ModelFiles& m, const std::string& path, GgufDtype dtype) {
  std::string name = base::base_name(path);
  if (name.size() > 5 && name.substr(name.size() - 5) == ".gguf") name.resize(name.size() - 5);
  try {  // streamed: no second copy of the model in memory
    base::write_file_atomically(path, [&](int fd) {
      base::BufferedWriter file(fd, path);
      write_gguf(m, dtype, name, [&](const char* data, size_t n) { file.write(data, n); });
      file.flush();
    });
  } catch (const InteropError& e) {
    throw InteropError(fmt::format("{}: {}", path, e.what()));
  }
}

namespace {

// The import's memory planned before a tensor is read: kept blocks at their bytes (0.7 GB of
// Q4_K for a Llama-3.2-1B's 4.9 GB of float32), every other tensor as float32.
void check_memory(const gguf::File& f, const nn::GPTConfig& c, bool keep_blocks,
                  const std::string& source) {
  ImportPlan plan = plan_import(c);
  if (keep_blocks) {
    double bytes = 0;
    for (const gguf::TensorInfo& t : f.tensors) {
      const ag::quant::BlockLayout* l = gguf::block_layout(t.type);
      const bool kept = l && t.ne.size() == 2 && ag::quant::packed_format_named(l->name);
      bytes += kept ? static_cast<double>(t.bytes()) : 4.0 * static_cast<double>(t.elements());
    }
    plan.weights = static_cast<int64_t>(std::min(bytes, 0x1p62));
  }
  check_import_memory(plan, source);
}

}  // namespace

ModelFiles read_gguf(const InputBytes& in, bool keep_blocks) {
  const std::string& source = in.source();
  const gguf::File f = gguf::read_header(in, model_filter(in));
  std::set<std::string> used{"general.alignment"};
  ModelFiles m;
  m.format = "gguf";
  const std::string arch = architecture_of(f, source, used);
  m.config = config_of(f, arch, source, used);
  check_memory(f, m.config, keep_blocks, source);
  read_weights(in, f, arch, keep_blocks, m);
  retie_head(m);
  m.tokenizer = read_tokenizer_keys(f, m.config.vocab_size, source, used, m.dropped);
  m.chat_format = chat_format_key(f, source, used, m.dropped);
  note_unused_keys(f, used, m.dropped);
  check_weights(m, source);
  return m;
}

ModelFiles read_gguf(const std::string& path, bool keep_blocks) {
  return read_gguf(InputBytes::open(path), keep_blocks);
}

}  // namespace interop
