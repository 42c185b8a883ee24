#include "cli/option_aliases.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "cli/options.h"

namespace cli {

namespace {

constexpr const char* kNanoGpt = "nanoGPT's";
constexpr const char* kHf = "Hugging Face's";
constexpr const char* kLlamaCpp = "llama.cpp's";

// A name as compared: leading dashes dropped, '_' as '-', lower case.
std::string normalised(const std::string& name) {
  std::string out = name.substr(std::min(name.size(), name.find_first_not_of('-')));
  for (char& c : out) c = c == '_' ? '-' : static_cast<char>(std::tolower(c));
  return out;
}

bool has(const std::vector<std::string>& options, const std::string& name) {
  return std::find(options.begin(), options.end(), name) != options.end();
}

// Every alias, in the order tried.
constexpr OptionAlias kAliases[] = {
    // nanoGPT: train.py's and sample.py's configurator keys
    {"learning_rate", "lr", kNanoGpt},
    {"max_iters", "steps", kNanoGpt},
    {"lr_decay_iters", "steps", kNanoGpt},
    {"warmup_iters", "warmup-steps", kNanoGpt},
    {"block_size", "context-length", kNanoGpt},
    {"n_embd", "d-model", kNanoGpt},
    {"n_layer", "n-layers", kNanoGpt},
    {"n_head", "n-heads", kNanoGpt},
    {"eval_iters", "eval-windows", kNanoGpt},
    {"out_dir", "out", kNanoGpt},
    {"dataset", "data", kNanoGpt},
    {"dtype", "precision", kNanoGpt},
    {"max_new_tokens", "tokens", kNanoGpt},
    {"start", "prompt", kNanoGpt},
    {"bias", "linear-bias", kNanoGpt},
    // Hugging Face: TrainingArguments, PEFT's LoraConfig, generate(), config.json
    {"num_train_epochs", "epochs", kHf},
    {"num_train_epochs", "steps", kHf},
    {"max_steps", "steps", kHf},
    {"per_device_train_batch_size", "batch-size", kHf},
    {"train_batch_size", "batch-size", kHf},
    {"gradient_accumulation_steps", "grad-accum-steps", kHf},
    {"output_dir", "out", kHf},
    {"logging_steps", "log-interval", kHf},
    {"eval_steps", "eval-interval", kHf},
    {"save_steps", "checkpoint-interval", kHf},
    {"adam_beta1", "beta1", kHf},
    {"adam_beta2", "beta2", kHf},
    {"adam_epsilon", "eps", kHf},
    {"max_grad_norm", "grad-clip", kHf},
    {"bf16", "precision", kHf},
    {"model_name_or_path", "init-from", kHf},
    {"resume_from_checkpoint", "checkpoint", kHf},
    {"early_stopping_patience", "early-stopping", kHf},
    {"load_best_model_at_end", "keep-best", kHf},
    {"train_file", "data", kHf},
    {"max_seq_length", "context-length", kHf},
    {"max_length", "context-length", kHf},
    {"num_labels", "num-classes", kHf},
    {"r", "lora-rank", kHf},
    {"lora_r", "lora-rank", kHf},
    {"target_modules", "lora-targets", kHf},
    {"hidden_size", "d-model", kHf},
    {"num_hidden_layers", "n-layers", kHf},
    {"num_attention_heads", "n-heads", kHf},
    {"num_key_value_heads", "n-kv-heads", kHf},
    {"intermediate_size", "d-ff", kHf},
    {"max_position_embeddings", "context-length", kHf},
    {"n_positions", "context-length", kHf},
    {"n_ctx", "context-length", kHf},
    {"n_inner", "d-ff", kHf},
    {"rms_norm_eps", "norm-eps", kHf},
    {"layer_norm_epsilon", "norm-eps", kHf},
    {"hidden_dropout_prob", "dropout", kHf},
    {"num_return_sequences", "num-samples", kHf},
    // llama.cpp: llama-cli, llama-perplexity, finetune
    {"temp", "temperature", kLlamaCpp},
    {"n_predict", "tokens", kLlamaCpp},
    {"n", "tokens", kLlamaCpp},
    {"ctx_size", "context-length", kLlamaCpp},
    {"c", "context-length", kLlamaCpp},
    {"ctx", "context-length", kLlamaCpp},
    {"t", "threads", kLlamaCpp},
    {"s", "seed", kLlamaCpp},
    {"p", "prompt", kLlamaCpp},
    {"m", "checkpoint", kLlamaCpp},
    {"model", "checkpoint", kLlamaCpp},
    {"b", "batch-size", kLlamaCpp},
    {"ppl_stride", "stride", kLlamaCpp},
    {"adam_iter", "steps", kLlamaCpp},
    {"adam_alpha", "lr", kLlamaCpp},
};

}  // namespace

const std::vector<OptionAlias>& option_aliases() {
  static const std::vector<OptionAlias> table(std::begin(kAliases), std::end(kAliases));
  return table;
}

std::string option_suggestion(const std::string& given, const std::vector<std::string>& options) {
  const std::string name = normalised(given);
  for (const OptionAlias& alias : option_aliases())
    if (normalised(alias.name) == name && has(options, alias.option))
      return fmt::format(" (did you mean '--{}'? {} is {} name for it)", alias.option, alias.name,
                         alias.whose);
  if (has(options, name)) return fmt::format(" (did you mean '--{}'?)", name);
  const std::string best = closest_name(name, options);
  return best.empty() ? "" : fmt::format(" (did you mean '--{}'?)", best);
}

}  // namespace cli
