#include "interop/llmc.h"

#include <fmt/format.h>

#include <array>
#include <map>
#include <vector>

#include "base/atomic_file.h"
#include "interop/import_memory.h"
#include "interop/tokenizer_files.h"
#include "io/tokenizer_section.h"

namespace interop {

namespace {

// One of llm.c's 16 parameter tensors: the attograd tensors it is made of, in order (a
// per-layer kind holds them for layer 0, then layer 1, ...: "{}" is the layer).
struct LlmcTensor {
  const char* name;
  std::vector<const char*> parts;
};

const std::vector<LlmcTensor>& llmc_tensors() {
  static const std::vector<LlmcTensor> tensors{
      {"wte", {"tok_emb.weight"}},
      {"wpe", {"pos_emb.weight"}},
      {"ln1w", {"blocks.{}.ln1.weight"}},
      {"ln1b", {"blocks.{}.ln1.bias"}},
      {"qkvw",
       {"blocks.{}.attn.W_query.weight", "blocks.{}.attn.W_key.weight",
        "blocks.{}.attn.W_value.weight"}},
      {"qkvb",
       {"blocks.{}.attn.W_query.bias", "blocks.{}.attn.W_key.bias", "blocks.{}.attn.W_value.bias"}},
      {"attprojw", {"blocks.{}.attn.out_proj.weight"}},
      {"attprojb", {"blocks.{}.attn.out_proj.bias"}},
      {"ln2w", {"blocks.{}.ln2.weight"}},
      {"ln2b", {"blocks.{}.ln2.bias"}},
      {"fcw", {"blocks.{}.mlp.fc1.weight"}},
      {"fcb", {"blocks.{}.mlp.fc1.bias"}},
      {"fcprojw", {"blocks.{}.mlp.fc2.weight"}},
      {"fcprojb", {"blocks.{}.mlp.fc2.bias"}},
      {"lnfw", {"ln_f.weight"}},
      {"lnfb", {"ln_f.bias"}},
  };
  return tensors;
}

bool per_layer(const LlmcTensor& t) {
  return std::string(t.parts[0]).find("{}") != std::string::npos;
}

// Calls visit(attograd name, llm.c tensor, layer) for every attograd tensor in file order.
template <typename Visit>
void for_each_part(int64_t layers, Visit visit) {
  for (const auto& t : llmc_tensors())
    for (int64_t l = 0; l < (per_layer(t) ? layers : 1); ++l)
      for (const char* part : t.parts) visit(fmt::format(fmt::runtime(part), l), t, l);
}

struct Header {
  std::array<int32_t, kLlmcHeaderInts> ints{};
  int64_t maxT() const { return ints[2]; }
  int64_t V() const { return ints[3]; }
  int64_t L() const { return ints[4]; }
  int64_t NH() const { return ints[5]; }
  int64_t C() const { return ints[6]; }
  int64_t Vp() const { return ints[7]; }
};

// One size field of the header against the bounds of the config key it becomes.
void check_size_field(const Header& h, int index, const char* label, const char* config_key,
                      const std::string& source) {
  const int64_t v = h.ints[static_cast<size_t>(index)];
  for (const auto& f : nn::config_fields()) {
    if (std::string(f.key) != config_key) continue;
    if (v < static_cast<int64_t>(f.min) || v > static_cast<int64_t>(f.max))
      throw InteropError(fmt::format("{}: header[{}] ({}) is {}: must be {} to {}", source, index,
                                     label, v, static_cast<int64_t>(f.min),
                                     static_cast<int64_t>(f.max)));
  }
}

nn::GPTConfig llmc_config_of(const Header& h, const std::string& source) {
  if (h.ints[0] != kLlmcMagic)
    throw InteropError(
        fmt::format("{}: not an llm.c checkpoint: header[0] (magic) is {}, llm.c's "
                    "is {}",
                    source, h.ints[0], kLlmcMagic));
  if (h.ints[1] != kLlmcVersionF32 && h.ints[1] != kLlmcVersionBf16)
    throw InteropError(
        fmt::format("{}: header[1] (version) is {}: only {} (float32) and {} "
                    "(bfloat16) are llm.c's GPT-2 checkpoints",
                    source, h.ints[1], kLlmcVersionF32, kLlmcVersionBf16));
  check_size_field(h, 2, "maxT, the context length", "context_length", source);
  check_size_field(h, 3, "V, the vocabulary", "vocab_size", source);
  check_size_field(h, 4, "L, the layers", "n_layers", source);
  check_size_field(h, 5, "NH, the heads", "n_heads", source);
  check_size_field(h, 6, "C, the width", "d_model", source);
  if (h.Vp() < h.V())
    throw InteropError(
        fmt::format("{}: header[7] (Vp, the padded vocabulary) is {}, less than "
                    "header[3] (V) = {}",
                    source, h.Vp(), h.V()));
  if (h.C() % h.NH() != 0)
    throw InteropError(fmt::format("{}: header[6] (C) = {} is not divisible by header[5] (NH) = {}",
                                   source, h.C(), h.NH()));
  nn::GPTConfig c;
  c.context_length = h.maxT(), c.vocab_size = h.V(), c.n_layers = h.L();
  c.n_heads = h.NH(), c.d_model = h.C();
  c.qkv_bias = true, c.tie_weights = true, c.norm = nn::NormKind::layer_norm, c.d_ff = 0;
  return c;
}

// Elements after the header: Vp*C + maxT*C + L*(12C^2 + 13C) + 2C. The header's bounds
// (C <= 2^20, L <= 2^14, Vp < 2^31) keep this and its bytes far below 2^64.
uint64_t llmc_elements(const Header& h) {
  const uint64_t C = static_cast<uint64_t>(h.C());
  return static_cast<uint64_t>(h.Vp()) * C + static_cast<uint64_t>(h.maxT()) * C +
         static_cast<uint64_t>(h.L()) * (12 * C * C + 13 * C) + 2 * C;
}

}  // namespace

ModelFiles read_llmc_weights(const InputBytes& in, int64_t tokenizer_bytes) {
  const std::string& source = in.source();
  Header h;
  in.read(0, h.ints.data(), sizeof h.ints, "the header (256 int32)");
  ModelFiles m;
  m.format = "llmc";
  m.config = llmc_config_of(h, source);
  const StoredType type = h.ints[1] == kLlmcVersionF32 ? StoredType::f32 : StoredType::bf16;
  const uint64_t expected = sizeof h.ints + llmc_elements(h) * stored_bytes(type);
  if (in.size() != expected)
    throw InteropError(fmt::format(
        "{}: the file is {} bytes; its header (version {}, maxT {}, V {}, L {}, NH {}, C {}, Vp "
        "{}) needs exactly {}",
        source, in.size(), h.ints[1], h.maxT(), h.V(), h.L(), h.NH(), h.C(), h.Vp(), expected));
  check_import_memory(m.config, source, tokenizer_bytes);
  std::map<std::string, ag::Shape> shapes;
  for (const auto& [name, shape] : m.config.parameter_shapes()) shapes.emplace(name, shape);
  uint64_t offset = sizeof h.ints;
  std::vector<char> buffer;
  for_each_part(h.L(), [&](const std::string& name, const LlmcTensor& t, int64_t layer) {
    ag::Tensor w = ag::empty(shapes.at(name));
    buffer.resize(static_cast<size_t>(w.numel()) * stored_bytes(type));
    in.read(offset, buffer.data(), buffer.size(),
            per_layer(t) ? fmt::format("tensor {} of layer {} ({})", t.name, layer, name)
                         : fmt::format("tensor {} ({})", t.name, name));
    read_floats(buffer.data(), w.numel(), type, w.data<float>());
    offset += buffer.size();
    if (name == "tok_emb.weight")  // llm.c's padding rows follow
      offset += static_cast<uint64_t>((h.Vp() - h.V()) * h.C()) * stored_bytes(type);
    m.weights.emplace_back(name, std::move(w));
  });
  if (h.Vp() > h.V())
    m.dropped.push_back(fmt::format("wte rows {} to {} (llm.c's padding of the vocabulary to {})",
                                    h.V(), h.Vp() - 1, h.Vp()));
  check_weights(m, source);
  return m;
}

ModelFiles read_llmc(const std::string& path, const std::string& tokenizer_folder) {
  if (tokenizer_folder.empty())
    throw InteropError(
        fmt::format("{}: an llm.c checkpoint holds no tokenizer: give GPT-2's "
                    "tokenizer files with --tokenizer DIR (vocab.json + merges.txt, "
                    "or encoder.json + vocab.bpe)",
                    path));
  std::optional<io::TokenizerSection> tokenizer = read_tokenizer_folder(tokenizer_folder, true);
  const int64_t tokens = io::make_tokenizer(*tokenizer)->vocab_size();
  ModelFiles m =
      read_llmc_weights(InputBytes::open(path), tokenizer_folder_bytes(tokenizer_folder));
  if (tokens != m.config.vocab_size)
    throw InteropError(fmt::format("{}: header[3] (V) is {}, but the tokenizer in {} has {} tokens",
                                   path, m.config.vocab_size, tokenizer_folder, tokens));
  m.tokenizer = std::move(tokenizer);
  return m;
}

std::string llmc_cannot_express(const nn::GPTConfig& c) {
  if (std::string why = beyond_gpt2(c); !why.empty()) return why;
  if (!c.qkv_bias) return "llm.c's GPT-2 has biases in W_query/W_key/W_value; this model has none";
  if (!c.tie_weights)
    return "llm.c's GPT-2 ties the head to tok_emb; this model has its own lm_head";
  if (c.norm != nn::NormKind::layer_norm)
    return fmt::format("llm.c's GPT-2 uses layernorm; this model uses {}", c.norm);
  if (c.ff_width() != 4 * c.d_model)
    return fmt::format("llm.c's GPT-2 has d_ff = 4 d_model = {}; this model has {}", 4 * c.d_model,
                       c.ff_width());
  return "";
}

void write_llmc(const ModelFiles& model, ag::Precision dtype, const ByteSink& out) {
  const nn::GPTConfig& c = model.config;
  if (const std::string why = llmc_cannot_express(c); !why.empty())
    throw InteropError("llm.c cannot hold this model: " + why);
  const int64_t Vp =
      (c.vocab_size + kLlmcVocabMultiple - 1) / kLlmcVocabMultiple * kLlmcVocabMultiple;
  Header h;
  h.ints[0] = kLlmcMagic;
  h.ints[1] = dtype == ag::Precision::fp32 ? kLlmcVersionF32 : kLlmcVersionBf16;
  const std::array<int64_t, 6> sizes{c.context_length, c.vocab_size, c.n_layers,
                                     c.n_heads,        c.d_model,    Vp};
  for (size_t i = 0; i < sizes.size(); ++i) h.ints[2 + i] = static_cast<int32_t>(sizes[i]);
  out(reinterpret_cast<const char*>(h.ints.data()), sizeof h.ints);
  const StoredType type = dtype == ag::Precision::fp32 ? StoredType::f32 : StoredType::bf16;
  std::map<std::string, ag::Tensor> weights(model.weights.begin(), model.weights.end());
  std::map<std::string, ag::Shape> shapes;
  for (const auto& [name, shape] : c.parameter_shapes()) shapes.emplace(name, shape);
  for_each_part(c.n_layers, [&](const std::string& name, const LlmcTensor&, int64_t) {
    const auto it = weights.find(name);
    if (it == weights.end() || it->second.shape() != shapes.at(name))
      throw InteropError(
          fmt::format("the model has no tensor {} of the shape its config states", name));
    const ag::Tensor w = it->second.contiguous();
    write_floats(w.data<float>(), w.numel(), type, out);
    if (name == "tok_emb.weight") write_zeros((Vp - c.vocab_size) * c.d_model, type, out);
  });
}

void write_llmc(const ModelFiles& model, const std::string& path, ag::Precision dtype) {
  try {  // streamed: no second copy of the model in memory
    base::write_file_atomically(path, [&](int fd) {
      base::BufferedWriter file(fd, path);
      write_llmc(model, dtype, [&](const char* data, size_t n) { file.write(data, n); });
      file.flush();
    });
  } catch (const InteropError& e) {
    throw InteropError(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace interop
