#pragma once
// Hugging Face's GPT-2 (transformers' GPT2LMHeadModel): its config.json and the names and
// layout of its weights, against attograd's GPT (docs/interop.md has the map).
//
//   interop::ModelFiles m = interop::read_hf_gpt2("gpt2/");        // or "x/model.safetensors"
//   interop::write_hf_gpt2(m, "out/", interop::StoredType::bf16);   // from_pretrained loads it
//
// HF keeps the projections as Conv1D, [in, out]; attograd's Linear is [out, in]: every
// projection is transposed on the way, and c_attn ([d, 3d], the query, key and value
// projections side by side) is split into W_query, W_key and W_value.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "interop/float_codec.h"
#include "interop/model_files.h"
#include "interop/safetensors.h"
#include "interop/safetensors_shards.h"

namespace interop {

// A config.json's model, held to what attograd's GPT computes: GPT-2's architecture
// (model_type gpt2, GPT2LMHeadModel or GPT2Model), GELU's tanh form, LayerNorm eps 1e-5,
// attention scaled by 1/sqrt(head size) only, no cross-attention; anything else is an
// InteropError naming the key and the reason. What is kept approximately (dropouts that
// differ) goes to notes.
nn::GPTConfig gpt2_config_from_json(const nlohmann::json& j, const std::string& source,
                                    std::vector<std::string>& notes);
// The config.json GPT2LMHeadModel.from_pretrained reads for this model; bos_token_id and
// eos_token_id are end_of_text (null without one: GPT2Config's default 50256 may be no id of
// this vocabulary).
nlohmann::json gpt2_config_json(const nn::GPTConfig& c, std::optional<int64_t> end_of_text);

// How one HF tensor holds attograd's parameters.
enum class HfLayout {
  same,        // the same values and shape
  transposed,  // Conv1D [in, out] of a Linear [out, in]
  qkv_weight,  // c_attn.weight [d, 3d]: W_query, W_key, W_value's weights, each transposed
  qkv_bias,    // c_attn.bias [3d]: their biases one after the other
};
struct HfTensor {
  std::string name;  // without the "transformer." prefix
  ag::Shape shape;
  HfLayout layout;
  std::vector<std::string> ours;  // one name, or three for the qkv layouts
};
// Every tensor GPT2LMHeadModel keeps for this config, in its order (lm_head.weight only when
// the head is untied).
std::vector<HfTensor> hf_gpt2_tensors(const nn::GPTConfig& c);

// A Hugging Face GPT-2: `path` a folder (config.json, model.safetensors or its shards with
// model.safetensors.index.json, and the tokenizer files when present) or a .safetensors
// file with config.json beside it; tokenizer_folder, when not empty, is where the tokenizer
// files are instead. Ends with check_weights.
ModelFiles read_hf_gpt2(const std::string& path, const std::string& tokenizer_folder = "");

// Writes into the existing empty folder: the weights (HF names with the "transformer."
// prefix, Conv1D layout, F32, F16 or BF16) as model.safetensors, or as shards and their index
// past max_shard_bytes (safetensors_shards.h); config.json and the tokenizer files.
void write_hf_gpt2(const ModelFiles& model, const std::string& folder, StoredType dtype,
                   uint64_t max_shard_bytes = kDefaultMaxShardBytes);

}  // namespace interop
