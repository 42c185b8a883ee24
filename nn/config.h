#pragma once
// A GPT's configuration as data: one table (config_fields) declares every key once, with
// its meaning, its bounds or choices and where it lives in GPTConfig. validate() holds a
// config to that table; the checkpoint's config JSON (train/config.cpp) and the command
// line's model options (cli/run_options.cpp) are generated from it, so a new architecture
// variant is one row here plus the layer that reads it.
//
//   nn::GPTConfig cfg;  cfg.vocab_size = 65;  cfg.norm = nn::NormKind::rms_norm;
//   cfg.validate();     // throws naming the first bad key
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "autograd/shape.h"
#include "base/choice.h"

namespace nn {

// The blocks' normalisation (a config variant): LayerNorm, or RMSNorm.
enum class NormKind { layer_norm, rms_norm };
// How a token's position enters: a learned embedding added to the token's (GPT-2's), or
// rotary embeddings turning each head's queries and keys (RoPE: Llama's, Qwen's).
enum class PositionKind { learned, rope };
// RoPE's frequencies: as computed, or Llama 3's scaling for long contexts (rope_factor,
// rope_low_freq_factor, rope_high_freq_factor, rope_original_context).
enum class RopeScaling { none, llama3 };
// The feed-forward network: fc2(gelu(fc1 x)) (GPT-2's), or
// down_proj(silu(gate_proj x) * up_proj x) (SwiGLU: Llama's, Qwen's).
enum class MlpKind { gelu, swiglu };
// What a classifier reads of a right-padded row: the last real token's state, or the mean
// of the real tokens' states.
enum class Pooling { last, mean };

}  // namespace nn

template <>
struct base::ChoiceNames<nn::NormKind> {
  static constexpr const char* key = "norm";
  static constexpr std::array<std::pair<nn::NormKind, const char*>, 2> rows = {
      {{nn::NormKind::layer_norm, "layernorm"}, {nn::NormKind::rms_norm, "rmsnorm"}}};
};

template <>
struct base::ChoiceNames<nn::PositionKind> {
  static constexpr const char* key = "position";
  static constexpr std::array<std::pair<nn::PositionKind, const char*>, 2> rows = {
      {{nn::PositionKind::learned, "learned"}, {nn::PositionKind::rope, "rope"}}};
};

template <>
struct base::ChoiceNames<nn::RopeScaling> {
  static constexpr const char* key = "rope_scaling";
  static constexpr std::array<std::pair<nn::RopeScaling, const char*>, 2> rows = {
      {{nn::RopeScaling::none, "none"}, {nn::RopeScaling::llama3, "llama3"}}};
};

template <>
struct base::ChoiceNames<nn::MlpKind> {
  static constexpr const char* key = "mlp";
  static constexpr std::array<std::pair<nn::MlpKind, const char*>, 2> rows = {
      {{nn::MlpKind::gelu, "gelu"}, {nn::MlpKind::swiglu, "swiglu"}}};
};

template <>
struct base::ChoiceNames<nn::Pooling> {
  static constexpr const char* key = "pool";
  static constexpr std::array<std::pair<nn::Pooling, const char*>, 2> rows = {
      {{nn::Pooling::last, "last"}, {nn::Pooling::mean, "mean"}}};
};

namespace nn {

struct GPTConfig {
  int64_t vocab_size = 65;
  int64_t context_length = 64;
  int64_t d_model = 128;
  int64_t n_heads = 4;
  int64_t n_layers = 4;
  int64_t d_ff = 0;  // 0 means 4 * d_model
  double dropout = 0.1;
  bool qkv_bias = false;
  bool tie_weights = true;
  NormKind norm = NormKind::layer_norm;  // architecture variant: layernorm or rmsnorm
  // The Llama family's options (docs/models.md); their defaults are GPT-2's.
  double norm_eps = 1e-5;   // every norm's epsilon (Qwen's 1e-6)
  bool linear_bias = true;  // bias in attn.out_proj and the MLP's Linears (Llama: none)
  int64_t n_kv_heads = 0;   // key/value heads, each shared by n_heads / n_kv_heads query
                            // heads (grouped-query attention); 0 means n_heads
  int64_t head_dim = 0;     // each head's width; 0 means d_model / n_heads (Qwen3's differ)
  bool qk_norm = false;     // RMSNorm of each head's query and key (Qwen3's q_norm, k_norm)
  MlpKind mlp = MlpKind::gelu;
  PositionKind position = PositionKind::learned;
  double rope_theta = 10000;  // RoPE's base: frequencies theta^(-2i / head_dim)
  RopeScaling rope_scaling = RopeScaling::none;
  double rope_factor = 8, rope_low_freq_factor = 1, rope_high_freq_factor = 4;
  int64_t rope_original_context = 8192;
  // the head: 0 the language-model head; >= 2 a classifier of that many labels
  // (nn::ClassificationHead, registered as "classifier"), reading the hidden states pooled
  // by `pool`: last (the last real token's) or mean (over the real tokens)
  int64_t num_classes = 0;
  Pooling pool = Pooling::last;
  // whether the classifier adds a bias to its logits; without one it is the score layer of
  // transformers' *ForSequenceClassification (bias-free), which export writes (a classifier
  // saved before this key had a bias: train::RunConfig::from_json reads it so)
  bool classifier_bias = false;
  // LoRA adapters (Linear::add_adapter) on the Linears lora_targets names, scale
  // lora_alpha / lora_rank, dropout lora_dropout on their input; lora_rank 0: none
  int64_t lora_rank = 0;
  double lora_alpha = 16;
  std::string lora_targets = "attn.qkv,attn.out_proj,mlp.fc1,mlp.fc2";
  double lora_dropout = 0;

  int64_t ff_width() const { return d_ff > 0 ? d_ff : 4 * d_model; }
  int64_t kv_heads() const { return n_kv_heads > 0 ? n_kv_heads : n_heads; }
  int64_t head_width() const { return head_dim > 0 ? head_dim : d_model / n_heads; }
  // lora_targets as a list, each one of lora_target_names(); throws naming one that is not
  std::vector<std::string> lora_target_list() const;
  // This config without adapters (the lora_* keys at their defaults): the base model.
  GPTConfig without_adapters() const;
  // Whether the two configs' adapters are the same (rank, alpha, targets, dropout).
  bool same_adapters(const GPTConfig& other) const;
  // The name and shape of every parameter GPT(cfg) registers, in its order, read off a
  // shape-only description of the model (nothing allocated): a checkpoint's datasets are
  // compared with it before a model is built. The config must be valid.
  std::vector<std::pair<std::string, ag::Shape>> parameter_shapes() const;
  // What GPT(cfg).num_parameters() will be, from the same description, so that a run too
  // large for memory is refused before it is built. The config must be valid.
  int64_t num_parameters() const;
  // Throws std::invalid_argument naming the first value config_fields() refuses, or the
  // first inconsistency between values (d_model % n_heads != 0).
  void validate() const;
};

// One key of the configuration.
struct ConfigField {
  using Member =
      std::variant<int64_t GPTConfig::*, double GPTConfig::*, bool GPTConfig::*,
                   std::string GPTConfig::*, NormKind GPTConfig::*, Pooling GPTConfig::*,
                   PositionKind GPTConfig::*, RopeScaling GPTConfig::*, MlpKind GPTConfig::*>;
  const char* key;   // the checkpoint's config key; the command line's --key with '-' for '_'
  const char* help;  // for --help
  Member member;
  // numbers: the range validate() allows ([min, max], or [min, max) for doubles)
  double min = 0, max = 0;
  // A setting that is not a number (a variant's choice, a string) is left out of a
  // checkpoint's config at its default: files written before it existed read the same.
  // A choice's names are its enum's (base::ChoiceNames above).
  // a setting of the classification head (num_classes, pool): left out of a checkpoint's
  // config when the model has none (num_classes 0), so a language model's file reads as it
  // did before classifiers
  bool head_setting = false;
  // a setting of the adapters (lora_*): left out of a checkpoint's config when the model
  // has none (lora_rank 0), so files without adapters read as they did before them
  bool adapter_setting = false;
  // an architecture option added after GPT-2 (the Llama family's): left out of a
  // checkpoint's config at its default, numbers too, so GPT-2's files read and write as
  // they did before
  bool left_out_at_default = false;
};

// Every key, in the order the command line lists them.
const std::vector<ConfigField>& config_fields();

// The names lora_targets takes: attn.qkv (W_query, W_key and W_value), attn.out_proj,
// mlp.fc1, mlp.fc2; and the Llama family's module names, q_proj, k_proj, v_proj, o_proj,
// gate_proj, up_proj, down_proj (which name W_query ... out_proj on any model), and
// all-linear (every projection of the blocks).
const std::vector<std::string>& lora_target_names();

// The [in, out] of each Linear of a block that LoRA target `target` names in a model of
// cfg (TransformerBlock::lora_linears gives the Linears themselves); empty when it names
// none (gate_proj on a GELU MLP).
std::vector<std::pair<int64_t, int64_t>> lora_target_shapes(const GPTConfig& cfg,
                                                            const std::string& target);

}  // namespace nn
