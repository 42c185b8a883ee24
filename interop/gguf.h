#pragma once
// A GPT as llama.cpp's `gpt2` architecture in a GGUF v3 file (see interop.h for the map,
// gguf_format.h for the container, docs/interop.md for the name map). Keys: general.* ,
// gpt2.context_length, embedding_length, feed_forward_length, block_count,
// attention.head_count, attention.layer_norm_epsilon (1e-5), and the tokenizer under
// tokenizer.ggml.* (model "gpt2": tokens in byte-level form, token types, merges "a b", the
// pre-tokenizer "gpt-2" for GPT-2's split pattern or "llama-bpe" for GPT-4's, which
// attograd's own bpe uses, bos/eos = <|endoftext|> when the vocabulary has it,
// add_bos_token false). Tensors: token_embd, position_embd, blk.N.attn_norm,
// blk.N.attn_qkv (W_query, W_key, W_value stacked as rows), blk.N.attn_output,
// blk.N.ffn_norm, blk.N.ffn_up, blk.N.ffn_down, output_norm, output (only when untied);
// ne[] is the [out, in] shape reversed.
//
//   interop::write_gguf(model, "model.gguf", interop::StoredType::bf16);
//   interop::ModelFiles back = interop::read_gguf("model.gguf");
#include <string>

#include "autograd/quant/block_formats.h"
#include "interop/float_codec.h"
#include "interop/input_bytes.h"
#include "interop/model_files.h"

namespace interop {

// The key that says a model has no qkv biases (llama.cpp's gpt2 needs the tensors: they are
// written as zeros, which compute the same, and dropped again on import).
inline constexpr const char* kGgufNoQkvBiasKey = "attograd.qkv_bias";

// The reason a GGUF gpt2 file cannot hold this model ("" when it can): RMSNorm, and a
// tokenizer that is not byte-level (char).
std::string gguf_cannot_express(const ModelFiles& model);

// What an export stores the weight matrices as: floats (F32, F16, BF16), or one of ggml's
// block formats (autograd/quant/block_formats.h), quantized as llama.cpp's reference
// quantizers do.
struct GgufDtype {
  StoredType floats = StoredType::f32;
  const ag::quant::BlockLayout* blocks = nullptr;
  GgufDtype(StoredType f)
      : floats(f) {}  // NOLINT(google-explicit-constructor): a float type is one
  explicit GgufDtype(const ag::quant::BlockLayout& b) : blocks(&b) {}
};

// The file's bytes, to out: F32, or with dtype bf16 or f16 the matrices (not position_embd,
// the norms or the biases, as llama.cpp's converter keeps them) in BF16 or F16, rounded to
// nearest even (float_codec.h; a weight beyond F16's range is refused: check_f16_range).
// With a block format, the matrices as llama-quantize types them for that format
// (gguf_quant_type): position_embd, norms and biases F32, the head (output, or token_embd
// when tied) Q6_K unless the format is Q8_0, a K format on rows not a multiple of 256 its
// fallback (Q4_K: Q5_0, Q5_K: Q5_1, Q6_K: Q8_0), rows not a multiple of 32 F16.
// `name` is general.name. A model it cannot hold is an InteropError with the reason.
void write_gguf(const ModelFiles& model, GgufDtype dtype, const std::string& name,
                const ByteSink& out);
// The same into the file at path (general.name: the file's name without .gguf), replaced
// whole (atomically) or left as it was.
void write_gguf(const ModelFiles& model, const std::string& path, GgufDtype dtype);

// A GGUF file of architecture gpt2 (attograd's or llama.cpp's converter's: its output.weight
// copy of token_embd is taken as a tied head) as a model, with its tokenizer when it has one.
// Everything is checked against the file's size and the config before it is allocated; a
// key or tensor the model does not keep is noted in `dropped`. Errors name the file and
// the key or tensor. With keep_blocks, each matrix the file holds in a block format (Q8_K
// aside) is kept as its blocks, byte for byte, a packed tensor (packed_weight.h): no float32
// copy of it is made (docs/quantization.md, "Importing a quantized GGUF as its blocks").
ModelFiles read_gguf(const InputBytes& in, bool keep_blocks = false);
ModelFiles read_gguf(const std::string& path, bool keep_blocks = false);

}  // namespace interop
