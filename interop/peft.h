#pragma once
// An adapter as Hugging Face's peft saves a LoRA model (save_pretrained): a folder of
// adapter_model.safetensors (base_model.model.<the module's name>.lora_A.weight [r, in] and
// lora_B.weight [out, r], the adapter name left out) and adapter_config.json (peft_type LORA,
// r, lora_alpha, target_modules, lora_dropout, bias none, task_type CAUSAL_LM, fan_in_fan_out,
// rank_pattern and alpha_pattern, ...). The modules are transformers': the Llama family's
// model.layers.N.self_attn.q_proj ... mlp.down_proj; GPT-2's transformer.h.N.attn.c_attn,
// attn.c_proj, mlp.c_fc, mlp.c_proj (Conv1D: peft sets fan_in_fan_out, its A and B are the
// same [r, in] and [out, r]), c_attn's adapter W_query's, W_key's and W_value's joined
// (lora_adapter.h) at rank 3r with rank_pattern {"c_attn": 3r}, alpha_pattern {"c_attn": 3 alpha}.
//
//   interop::write_peft(interop::adapter_of(ckpt), "adapter/", interop::StoredType::f32);
//   interop::LoraAdapter a = interop::read_peft("adapter/", base_config);
#include <string>

#include "interop/float_codec.h"
#include "interop/lora_adapter.h"

namespace interop {

// Into the existing empty folder.
void write_peft(const LoraAdapter& adapter, const std::string& folder, StoredType dtype);
// Whether transformers' GPT-2 or a Llama-family layout holds the model (c, adapters
// aside); throws InteropError naming `folder` when not.
void check_peft_expressible(const nn::GPTConfig& c, const std::string& folder);

// The peft folder's adapter on a base of config `base`: every tensor one of base's modules,
// its A and B both there, shapes the module's, ranks r or rank_pattern's; DoRA, rsLoRA, biases
// and modules_to_save (what attograd's adapters do not compute) refused by their keys.
LoraAdapter read_peft(const std::string& folder, const nn::GPTConfig& base);

// Whether path is a peft adapter's folder (it has adapter_config.json).
bool is_peft_folder(const std::string& path);

}  // namespace interop
