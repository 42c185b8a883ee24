#pragma once
// An adapter as llama.cpp's LoRA GGUF (convert_lora_to_gguf.py writes it, llama.cpp's --lora and
// node-llama-cpp's createContext({lora}) load it onto a base GGUF of the same architecture):
// keys general.architecture (the base's: gpt2, llama, qwen2, qwen3), general.type "adapter",
// adapter.type "lora", adapter.lora.alpha (FLOAT32), and attograd's attograd.lora_rank,
// attograd.lora_alpha and attograd.lora_targets (its rank, exact alpha and targets' spelling,
// which llama.cpp does not read); tensors
// <base tensor>.lora_a, ne [in, R], and .lora_b, ne [R, out], on the base's tensor names
// (blk.N.attn_q.weight.lora_a, ...). llama.cpp scales each by alpha / R with R its own rank
// and one alpha for the file, so with gpt2's attn_qkv (W_query, W_key and W_value joined at rank
// 3r: lora_adapter.h) every tensor is written at rank 3r (the others' extra rows and columns
// zeros) and alpha 3 alpha. The llama architecture's attn_q and attn_k rows are permuted per
// head as the base's are (gguf_llama.h), so lora_b's rows are too.
//
//   interop::write_gguf_lora(interop::adapter_of(ckpt), "adapter.gguf", interop::StoredType::f32);
//   interop::LoraAdapter a = interop::read_gguf_lora("adapter.gguf", base_config);
#include <string>

#include "interop/float_codec.h"
#include "interop/input_bytes.h"
#include "interop/lora_adapter.h"

namespace interop {

// The file's bytes, to out (general.name: name).
void write_gguf_lora(const LoraAdapter& adapter, const std::string& name, StoredType dtype,
                     const ByteSink& out);
// Replaced whole (atomically) or left as it was.
void write_gguf_lora(const LoraAdapter& adapter, const std::string& path, StoredType dtype);

// The GGUF adapter's adapter on a base of config `base`: the keys above (another tool's file
// without attograd's: the rank its tensors share), every tensor one of the base's with both
// halves, shapes its; everything bounded by the file before it is allocated. Errors name the
// file and the key or tensor.
LoraAdapter read_gguf_lora(const InputBytes& in, const nn::GPTConfig& base);
LoraAdapter read_gguf_lora(const std::string& path, const nn::GPTConfig& base);

// Whether the GGUF file at path is an adapter (general.type "adapter").
bool is_gguf_adapter(const std::string& path);

}  // namespace interop
