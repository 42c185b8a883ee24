#pragma once
// One model as every format holds it (see interop.h for the map).
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat_format.h"
#include "io/checkpoint.h"
#include "nn/config.h"
#include "nn/module.h"

namespace interop {

// A file from elsewhere that cannot be read or written as asked: the message names the file
// and the field (a tensor, a header key, a config key). The command line exits 2 on it.
struct InteropError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ModelFiles {
  nn::GPTConfig config;
  // Every parameter GPT(config) registers, by its attograd name ("blocks.0.attn.W_query.weight"),
  // float32, in nn::Linear's [out, in] layout, in GPT(config)'s order; a GGUF import keeping
  // blocks holds its quantized matrices packed (autograd/quant/packed_weight.h) instead.
  nn::StateDict weights;
  // The tokenizer, when the files carry one (io::TokenizerSection's forms, "gpt2" for GPT-2's).
  std::optional<io::TokenizerSection> tokenizer;
  // how its conversations are written and the ids that end a reply (Hugging Face's
  // tokenizer_config.json and generation_config.json, when there)
  std::optional<data::ChatFormat> chat_format;
  std::vector<int64_t> stop_ids;
  // a classifier's labels (config.num_classes of them, in its outputs' order)
  std::vector<std::string> labels;
  std::string format;                // "hf", "safetensors", "llmc", "gguf"
  std::vector<std::string> dropped;  // what the source held that the model does not keep
};

// A file an export writes beside the one asked for (llm.c's gpt2_tokenizer.bin): its path,
// or an empty path and a note saying why it is not written ("" when the format has none).
struct CompanionFile {
  std::string path;
  std::string note;
};

}  // namespace interop

namespace interop {

// What every reader ends with: the weights are exactly the parameters GPT(config) registers,
// same names, same shapes, put in its order, each finite; otherwise an InteropError naming
// `source` and the first offending tensor.
void check_weights(ModelFiles& model, const std::string& source);

// What of a config GPT-2's layouts (Hugging Face's GPT-2, llm.c, llama.cpp's gpt2) cannot
// hold: the first of the Llama family's options set (RoPE, SwiGLU, grouped or explicitly
// sized heads, q/k norms, a linear without bias, another norm epsilon), named; "" when none.
std::string beyond_gpt2(const nn::GPTConfig& c);

// Text from a file (a name, a key, a link's target) for a message: printable
// (base::printable) and cut to its first max_bytes bytes on a character boundary ("..."
// after), so that a message names what is wrong and never reproduces a file.
std::string excerpt(std::string_view text, size_t max_bytes = 80);

}  // namespace interop
