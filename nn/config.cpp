#include "nn/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "base/utf8.h"

namespace nn {

namespace {

// an option of the Llama family's, left out of a checkpoint's config at its default
ConfigField arch(ConfigField f) {
  f.left_out_at_default = true;
  return f;
}

// The Llama family's options (docs/model.md), after GPT-2's norm.
std::vector<ConfigField> llama_family_fields() {
  using C = GPTConfig;
  return {
      arch({"norm_eps", "every norm's epsilon", &C::norm_eps, 1e-12, 1}),
      arch({"linear_bias", "bias in attn.out_proj and the MLP's Linears", &C::linear_bias}),
      arch({"n_kv_heads", "key/value heads, shared by groups of query heads (0: n-heads)",
            &C::n_kv_heads, 0, 1 << 20}),
      arch({"head_dim", "each head's width (0: d-model / n-heads)", &C::head_dim, 0, 1 << 16}),
      arch({"qk_norm", "RMSNorm of each head's query and key (Qwen3's)", &C::qk_norm}),
      arch({"mlp", "the feed-forward network: gelu (GPT-2's) or swiglu (Llama's)", &C::mlp}),
      arch({"position", "positions: learned embeddings or rope (rotary)", &C::position}),
      arch({"rope_theta", "RoPE's base", &C::rope_theta, 1, 1e12}),
      arch({"rope_scaling", "RoPE's frequencies: none or llama3 (scaled)", &C::rope_scaling}),
      arch({"rope_factor", "llama3 scaling: the factor", &C::rope_factor, 1, 1e6}),
      arch({"rope_low_freq_factor", "llama3 scaling: low_freq_factor", &C::rope_low_freq_factor,
            1e-6, 1e6}),
      arch({"rope_high_freq_factor", "llama3 scaling: high_freq_factor", &C::rope_high_freq_factor,
            1e-6, 1e6}),
      arch({"rope_original_context", "llama3 scaling: original_max_position_embeddings",
            &C::rope_original_context, 1, 1 << 24}),
  };
}

// GPT-2's keys with the Llama family's after its norm, the order of --help
std::vector<ConfigField> with_llama_family(std::vector<ConfigField> fields) {
  const auto norm = std::find_if(fields.begin(), fields.end(), [](const ConfigField& f) {
    return std::string_view(f.key) == "norm";
  });
  const std::vector<ConfigField> llama = llama_family_fields();
  fields.insert(norm + 1, llama.begin(), llama.end());
  return fields;
}

}  // namespace

// The upper bounds are far beyond any model that fits in memory, so that size arithmetic
// (parameter counts, memory plans) cannot overflow on absurd input.
const std::vector<ConfigField>& config_fields() {
  using C = GPTConfig;
  static const std::vector<ConfigField> fields = with_llama_family({
      {"vocab_size", "token ids (0: from the tokenizer)", &C::vocab_size, 1, 1 << 24},
      {"context_length", "longest sequence T", &C::context_length, 1, 1 << 20},
      {"d_model", "embedding width C", &C::d_model, 1, 1 << 20},
      {"n_heads", "attention heads", &C::n_heads, 1, 1 << 20},
      {"n_layers", "transformer blocks", &C::n_layers, 1, 1 << 14},
      {"d_ff", "MLP width (0: 4 * d-model)", &C::d_ff, 0, 1 << 22},
      {"dropout", "dropout probability", &C::dropout, 0, 1},
      {"qkv_bias", "bias in W_query/W_key/W_value", &C::qkv_bias},
      {"tie_weights", "lm_head shares tok_emb.weight", &C::tie_weights},
      {"norm", "the blocks' normalisation: layernorm or rmsnorm", &C::norm},
      {.key = "num_classes",
       .help = "the head: 0 the language model's; N >= 2 a classifier of N labels (train "
               "--task classify sets it from the labels)",
       .member = &C::num_classes,
       .min = 0,
       .max = 1 << 16,
       .head_setting = true},
      {.key = "pool",
       .help = "the classifier reads the last real token's state (last) or their mean (mean)",
       .member = &C::pool,
       .head_setting = true},
      {.key = "classifier_bias",
       .help = "the classifier adds a bias to its logits (transformers' sequence classifiers, "
               "which export writes, have none)",
       .member = &C::classifier_bias,
       .head_setting = true},
      {.key = "lora_rank",
       .help = "LoRA adapters of this rank (0: none; train then freezes the base)",
       .member = &C::lora_rank,
       .min = 0,
       .max = 1 << 20,
       .adapter_setting = true},
      {.key = "lora_alpha",
       .help = "LoRA scale numerator: the adapters' scale is lora-alpha / lora-rank",
       .member = &C::lora_alpha,
       .min = 0,
       .max = 1e6,
       .adapter_setting = true},
      {.key = "lora_targets",
       .help = "the Linears given adapters: attn.qkv, attn.out_proj, mlp.fc1, mlp.fc2, or "
               "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, all-linear",
       .member = &C::lora_targets,
       .adapter_setting = true},
      {.key = "lora_dropout",
       .help = "dropout probability on the adapters' input",
       .member = &C::lora_dropout,
       .min = 0,
       .max = 1,
       .adapter_setting = true},
  });
  return fields;
}

const std::vector<std::string>& lora_target_names() {
  static const std::vector<std::string> names{
      "attn.qkv", "attn.out_proj", "mlp.fc1",   "mlp.fc2", "q_proj",    "k_proj",
      "v_proj",   "o_proj",        "gate_proj", "up_proj", "down_proj", "all-linear"};
  return names;
}

// The [in, out] of each Linear a LoRA target names in a model of cfg (the names
// TransformerBlock::lora_linears resolves); none when the target names no Linear of it.
std::vector<std::pair<int64_t, int64_t>> lora_target_shapes(const GPTConfig& cfg,
                                                            const std::string& target) {
  const int64_t C = cfg.d_model, F = cfg.ff_width(), Q = cfg.n_heads * cfg.head_width(),
                K = cfg.kv_heads() * cfg.head_width();
  const bool swiglu = cfg.mlp == MlpKind::swiglu;
  using Shapes = std::vector<std::pair<int64_t, int64_t>>;
  if (target == "attn.qkv") return {{C, Q}, {C, K}, {C, K}};
  if (target == "q_proj") return {{C, Q}};
  if (target == "k_proj" || target == "v_proj") return {{C, K}};
  if (target == "attn.out_proj" || target == "o_proj") return {{Q, C}};
  if (target == "mlp.fc1") return swiglu ? Shapes{{C, F}, {C, F}} : Shapes{{C, F}};
  if (target == "mlp.fc2") return {{F, C}};
  if (target == "gate_proj" || target == "up_proj") return swiglu ? Shapes{{C, F}} : Shapes{};
  if (target == "down_proj") return swiglu ? Shapes{{F, C}} : Shapes{};
  if (target == "all-linear") {
    Shapes all = {{C, Q}, {C, K}, {C, K}, {Q, C}, {C, F}, {F, C}};
    if (swiglu) all.push_back({C, F});
    return all;
  }
  return {};
}

namespace {

[[noreturn]] void refuse(const std::string& what) {
  throw std::invalid_argument("config: " + what);
}

void check_integer(const ConfigField& f, int64_t v) {
  if (v < static_cast<int64_t>(f.min))
    refuse(f.min == 1 ? fmt::format("{} must be positive, got {}", f.key, v)
                      : fmt::format("{} must be >= {}, got {}", f.key, f.min, v));
  if (v > static_cast<int64_t>(f.max))
    refuse(fmt::format("{} = {} is larger than the supported {}", f.key, v,
                       static_cast<int64_t>(f.max)));
}

void check_field(const ConfigField& f, const GPTConfig& cfg) {
  if (auto m = std::get_if<int64_t GPTConfig::*>(&f.member)) check_integer(f, cfg.**m);
  if (auto m = std::get_if<double GPTConfig::*>(&f.member)) {
    const double v = cfg.**m;
    if (!(v >= f.min && v < f.max))
      refuse(fmt::format("{} must be in [{}, {}), got {}", f.key, f.min, f.max, v));
  }
}

// A value from elsewhere, safe on a terminal: its first 64 bytes, escaped.
std::string shown(const std::string& text) {
  return base::printable(std::string_view(text).substr(0, 64));
}

// The adapters' settings: none without a rank; a rank each targeted Linear can hold.
void check_lora(const GPTConfig& cfg) {
  const GPTConfig plain;
  const std::vector<std::string> targets = cfg.lora_target_list();
  if (cfg.lora_rank == 0) {
    const char* set = cfg.lora_alpha != plain.lora_alpha       ? "lora_alpha"
                      : cfg.lora_targets != plain.lora_targets ? "lora_targets"
                      : cfg.lora_dropout != plain.lora_dropout ? "lora_dropout"
                                                               : nullptr;
    if (set)
      refuse(
          fmt::format("{} is set but lora_rank is 0: adapters need a rank (--lora-rank R)", set));
    return;
  }
  if (!(cfg.lora_alpha > 0))
    refuse(fmt::format("lora_alpha must be positive, got {}", cfg.lora_alpha));
  for (const std::string& t : targets) {
    const auto shapes = lora_target_shapes(cfg, t);
    if (shapes.empty())
      refuse(
          fmt::format("lora_targets: {} names a SwiGLU MLP's Linear; this model's MLP is {} "
                      "(its Linears: mlp.fc1, mlp.fc2)",
                      t, base::choice_name(cfg.mlp)));
    for (const auto& [in, out] : shapes)
      if (cfg.lora_rank > std::min(in, out))
        refuse(fmt::format("lora_rank {} is larger than {} ({} -> {}) allows: at most {}",
                           cfg.lora_rank, t, in, out, std::min(in, out)));
  }
}

// The Llama family's options: heads that group and rotate evenly, and no RoPE setting on
// learned positions (where nothing would read it).
void check_architecture(const GPTConfig& cfg) {
  if (cfg.kv_heads() > cfg.n_heads || cfg.n_heads % cfg.kv_heads() != 0)
    refuse(fmt::format("n_kv_heads ({}) must divide n_heads ({})", cfg.kv_heads(), cfg.n_heads));
  if (cfg.position == PositionKind::rope && cfg.head_width() % 2 != 0)
    refuse(fmt::format("rope needs an even head width, got {}", cfg.head_width()));
  if (cfg.rope_scaling == RopeScaling::llama3 &&
      !(cfg.rope_high_freq_factor > cfg.rope_low_freq_factor))
    refuse(fmt::format("rope_high_freq_factor ({}) must be larger than rope_low_freq_factor ({})",
                       cfg.rope_high_freq_factor, cfg.rope_low_freq_factor));
  if (cfg.position == PositionKind::learned && cfg.rope_scaling != RopeScaling::none)
    refuse("rope_scaling is set but position is learned: scaling applies to rope");
  if (cfg.n_heads * cfg.head_width() > (int64_t{1} << 22))
    refuse(fmt::format("n_heads * head_dim = {} is larger than the supported {}",
                       cfg.n_heads * cfg.head_width(), int64_t{1} << 22));
}

}  // namespace

std::vector<std::string> GPTConfig::lora_target_list() const {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= lora_targets.size()) {
    const size_t comma = std::min(lora_targets.find(',', start), lora_targets.size());
    const std::string name = lora_targets.substr(start, comma - start);
    const auto& known = lora_target_names();
    if (std::find(known.begin(), known.end(), name) == known.end())
      refuse(fmt::format("lora_targets: '{}' matches no Linear of the model (the targets are {})",
                         shown(name), fmt::join(known, ", ")));
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    start = comma + 1;
  }
  return out;
}

GPTConfig GPTConfig::without_adapters() const {
  const GPTConfig plain;
  GPTConfig base = *this;
  base.lora_rank = plain.lora_rank;
  base.lora_alpha = plain.lora_alpha;
  base.lora_targets = plain.lora_targets;
  base.lora_dropout = plain.lora_dropout;
  return base;
}

bool GPTConfig::same_adapters(const GPTConfig& other) const {
  if (lora_rank == 0 || other.lora_rank == 0) return lora_rank == other.lora_rank;
  return lora_rank == other.lora_rank && lora_alpha == other.lora_alpha &&
         lora_target_list() == other.lora_target_list() && lora_dropout == other.lora_dropout;
}

void GPTConfig::validate() const {
  for (const auto& f : config_fields()) check_field(f, *this);
  if (head_dim == 0 && d_model % n_heads != 0)
    refuse(fmt::format("d_model ({}) must be divisible by n_heads ({})", d_model, n_heads));
  check_architecture(*this);
  if (num_classes == 1)
    refuse("num_classes must be 0 (a language model) or at least 2 (a classifier), got 1");
  check_lora(*this);
}

}  // namespace nn
