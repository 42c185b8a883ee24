#pragma once
// Internal to interop/: what the GGUF model readers and writers of each llama.cpp
// architecture share (gguf.cpp: gpt2; gguf_llama.cpp: llama, qwen2, qwen3). A GGUF tensor is
// named by llama.cpp and made of attograd's tensors; keys are read checked, each named in
// errors.
#include <set>
#include <string>
#include <vector>

#include "autograd/shape.h"
#include "interop/gguf_format.h"
#include "nn/config.h"

namespace interop {

// One GGUF tensor: the attograd tensors it is made of, stacked as rows, and its [out, in]
// shape. Its content is those weights, or zeros (the gpt2 qkv biases of a model without
// them), or Llama 3's rope factors (computed from the config: rope_freqs.weight).
struct GgufTensor {
  enum class Content { weights, zeros, rope_factors };
  std::string name;
  std::vector<std::string> parts;
  ag::Shape shape;
  Content content = Content::weights;
  // > 0: the rows are permuted per head (of this many heads) from Hugging Face's rotate-half
  // layout into the interleaved pairs llama.cpp's llama architecture turns (gguf_row_source)
  int64_t rope_heads = 0;
};

// llama.cpp's tensors of architecture arch ("gpt2", or the Llama family's) for a model of c.
std::vector<GgufTensor> gguf_tensors(const nn::GPTConfig& c, const std::string& arch);

// The row of attograd's tensor that GGUF row `row` holds, for a tensor of `rows` rows
// permuted over `heads` heads (each head's first and second halves interleaved: GGUF row
// 2j + i of a head is attograd's row i * half + j).
int64_t gguf_row_source(int64_t row, int64_t rows, int64_t heads);

// ne[]: the [out, in] shape reversed.
std::vector<uint64_t> ggml_ne(const ag::Shape& shape);

// A size key: a scalar integer within the bounds of the config key it becomes.
int64_t size_key(const gguf::File& f, const std::string& key, const char* config_key,
                 const std::string& source, std::set<std::string>& used);
// A scalar key of exactly this type.
const gguf::Value& scalar_key(const gguf::File& f, const std::string& key, uint32_t type,
                              const std::string& source, std::set<std::string>& used);
const gguf::TensorInfo* find_tensor(const gguf::File& f, const std::string& name);

}  // namespace interop
