#pragma once
// Hugging Face's Llama family: transformers' LlamaForCausalLM, Qwen2ForCausalLM and
// Qwen3ForCausalLM (config.json's model_type llama, qwen2, qwen3), against attograd's GPT
// with RoPE, RMSNorm, SwiGLU and grouped-query attention (docs/interop.md has the map).
//
//   interop::ModelFiles m = interop::read_hf_llama("Llama-3.2-1B/");   // or a .safetensors
//   interop::write_hf_llama(m, "out/", interop::StoredType::bf16);
//
// HF's Linear weights are [out, in], as attograd's, and its RoPE is the rotate-half layout
// attograd computes, so every tensor is read straight into its parameter under another name
// (model.layers.N.self_attn.q_proj.weight -> blocks.N.attn.W_query.weight): no transpose, no
// permutation, no copy.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "interop/float_codec.h"
#include "interop/input_bytes.h"
#include "interop/model_files.h"
#include "interop/safetensors_shards.h"

namespace interop {

enum class LlamaFamily { llama, qwen2, qwen3 };

// The family whose config.json has this model_type, if any.
std::optional<LlamaFamily> llama_family_of(const std::string& model_type);

// config.json's model, held to what attograd's GPT computes: SiLU (hidden_act silu), RoPE
// without scaling or with Llama 3's (rope_scaling rope_type llama3), full attention (no
// sliding window), unquantised; biases as the family has them. Anything else is an
// InteropError naming the key and the reason; what is kept approximately goes to notes.
nn::GPTConfig llama_config_from_json(const nlohmann::json& j, const std::string& source,
                                     std::vector<std::string>& notes);
// config.json's bytes streamed (only the keys above kept), then llama_config_from_json.
nn::GPTConfig read_llama_config(const InputBytes& config, std::vector<std::string>& notes);

// Whether a model is written in the Llama family's layout (RoPE, SwiGLU or q/k norms; the
// rest is GPT-2's): what every hf export asks.
bool has_llama_layout(const nn::GPTConfig& c);

// The family a model is exported as: Qwen3 with q/k norms, Qwen2 with biases on q, k and v
// only, Llama otherwise; a model none of them holds (learned positions, LayerNorm, GELU, an
// MLP bias without biases on the attention, ...) is an InteropError saying why.
LlamaFamily export_family(const nn::GPTConfig& c, const std::string& folder);

// The config.json the family's from_pretrained reads for this model: torch_dtype names
// dtype, bos_token_id and eos_token_id are end_of_text (null without one).
nlohmann::json llama_config_json(const nn::GPTConfig& c, LlamaFamily family, StoredType dtype,
                                 std::optional<int64_t> end_of_text);

// HF's name of one of attograd's parameters ("blocks.3.attn.W_key.bias" ->
// "model.layers.3.self_attn.k_proj.bias"); nullopt for a name the family does not have.
std::optional<std::string> llama_hf_name(const std::string& ours);

// A Llama-family folder (config.json, model.safetensors or its shards with
// model.safetensors.index.json, tokenizer.json when present) or a .safetensors file with
// config.json beside it; tokenizer_folder, when not empty, is where the tokenizer is
// instead. Ends with check_weights.
ModelFiles read_hf_llama(const std::string& path, const std::string& tokenizer_folder = "");

// Writes into the existing empty folder: the weights (HF's names, F32, F16 or BF16) as
// model.safetensors, or as shards and their index past max_shard_bytes
// (safetensors_shards.h), in transformers' state_dict order; config.json in the family's
// layout and the tokenizer files.
void write_hf_llama(const ModelFiles& model, const std::string& folder, StoredType dtype,
                    uint64_t max_shard_bytes = kDefaultMaxShardBytes);

}  // namespace interop
