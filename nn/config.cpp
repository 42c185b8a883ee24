#include "nn/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace nn {

// The upper bounds are far beyond any model that fits in memory, so that size arithmetic
// (parameter counts, memory plans) cannot overflow on absurd input.
const std::vector<ConfigField>& config_fields() {
  using C = GPTConfig;
  static const std::vector<ConfigField> fields{
      {"vocab_size", "token ids (0: from the tokenizer)", &C::vocab_size, 1, 1 << 24},
      {"context_length", "longest sequence T", &C::context_length, 1, 1 << 20},
      {"d_model", "embedding width C", &C::d_model, 1, 1 << 20},
      {"n_heads", "attention heads", &C::n_heads, 1, 1 << 20},
      {"n_layers", "transformer blocks", &C::n_layers, 1, 1 << 14},
      {"d_ff", "MLP width (0: 4 * d-model)", &C::d_ff, 0, 1 << 22},
      {"dropout", "dropout probability", &C::dropout, 0, 1},
      {"qkv_bias", "bias in W_query/W_key/W_value", &C::qkv_bias},
      {"tie_weights", "lm_head shares tok_emb.weight", &C::tie_weights},
      {"norm",
       "the blocks' normalisation: layernorm or rmsnorm",
       &C::norm,
       0,
       0,
       {"layernorm", "rmsnorm"}},
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
       .choices = {"last", "mean"},
       .head_setting = true},
  };
  return fields;
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
  if (auto m = std::get_if<std::string GPTConfig::*>(&f.member)) {
    const std::string& v = cfg.**m;
    if (std::find(f.choices.begin(), f.choices.end(), v) == f.choices.end())
      refuse(fmt::format("{} must be {}, got '{}'", f.key, fmt::join(f.choices, " or "), v));
  }
}

}  // namespace

void GPTConfig::validate() const {
  for (const auto& f : config_fields()) check_field(f, *this);
  if (d_model % n_heads != 0)
    refuse(fmt::format("d_model ({}) must be divisible by n_heads ({})", d_model, n_heads));
  if (num_classes == 1)
    refuse("num_classes must be 0 (a language model) or at least 2 (a classifier), got 1");
}

}  // namespace nn
