#pragma once
// Internal to interop/: the Llama family (nn/config.h's rope, swiglu, rmsnorm options) as
// llama.cpp's `llama`, `qwen2` and `qwen3` architectures in GGUF, as llama.cpp's converter
// (convert_hf_to_gguf.py) writes LlamaForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM:
//
//   keys     ARCH.context_length, embedding_length, feed_forward_length, block_count,
//            attention.head_count, attention.head_count_kv, attention.key_length and
//            value_length (when head_dim is not d_model / n_heads), rope.freq_base,
//            rope.dimension_count, attention.layer_norm_rms_epsilon, vocab_size; with Llama
//            3's rope scaling attograd.rope_scaling.* (llama.cpp reads the factors from
//            rope_freqs.weight; these keep the config's numbers exact)
//   tensors  token_embd, [rope_freqs], blk.N.attn_norm, attn_q, attn_k, attn_v (.bias with
//            qkv_bias), attn_q_norm, attn_k_norm (qk_norm), attn_output, ffn_norm, ffn_gate,
//            ffn_up, ffn_down, output_norm, output (untied only)
//
// llama's attn_q and attn_k rows are permuted per head into the interleaved pairs its rope
// turns (the converter's LlamaModel.permute); qwen2 and qwen3 turn halves as attograd does.
#include <set>
#include <string>
#include <vector>

#include "interop/gguf_model.h"
#include "nn/config.h"

namespace interop {

// The llama.cpp architecture that holds the config: "gpt2" (GPT-2's layout), "qwen3" (q/k
// norms), "qwen2" (qkv biases), "llama" (the rest of the family; with Llama 3's rope
// scaling, qkv biases too); "" when none does, with the reason in `why`.
std::string gguf_architecture(const nn::GPTConfig& c, std::string& why);
bool is_llama_family(const std::string& architecture);

std::vector<GgufTensor> llama_family_tensors(const nn::GPTConfig& c,
                                             const std::string& architecture);
// The architecture's keys (after general.*), for a config gguf_architecture gave it.
void add_llama_family_keys(const nn::GPTConfig& c, const std::string& architecture, gguf::File& f);
// Whether a reader keeps this key (the architecture's own and attograd's).
bool llama_family_key(const std::string& key);
// The config the keys and tensor infos state; errors name the file and the key or tensor.
nn::GPTConfig llama_family_config(const gguf::File& f, const std::string& architecture,
                                  const std::string& source, std::set<std::string>& used);

// Llama 3's rope factors, one per frequency (rope_freqs.weight): each frequency is divided
// by its factor, as llama.cpp's rope does with them.
std::vector<float> llama3_rope_factors(const nn::GPTConfig& c);
// The file's rope_freqs.weight values: the factor read off them when no key gave it (the
// largest), then each checked against llama3_rope_factors (to 1e-5: llama.cpp's converter
// computes the frequencies in float32); an InteropError naming the tensor otherwise.
void settle_rope_factors(const std::vector<float>& stored, const gguf::File& f,
                         const std::string& source, nn::GPTConfig& c);

}  // namespace interop
