#include "train/config.h"

#include <fmt/format.h>

#include <stdexcept>

namespace train {

void RunConfig::validate() const {
  auto fail = [](const std::string& msg) { throw std::invalid_argument(msg); };
  if (model.vocab_size < 0) fail(fmt::format("vocab_size must be >= 0, got {}", model.vocab_size));
  if (!(val_fraction >= 0 && val_fraction < 1))
    fail(fmt::format("val_fraction must be in [0, 1), got {}", val_fraction));
  if (tokenizer != "char" && tokenizer != "byte")
    fail(fmt::format("tokenizer must be 'char' or 'byte', got '{}'", tokenizer));
  if (steps < 0) fail(fmt::format("steps must be >= 0, got {}", steps));
  if (batch_size <= 0) fail(fmt::format("batch_size must be positive, got {}", batch_size));
  if (!(lr > 0)) fail(fmt::format("lr must be positive, got {}", lr));
  if (min_lr > lr) fail(fmt::format("min_lr ({}) must not exceed lr ({})", min_lr, lr));
  if (warmup_steps < 0) fail(fmt::format("warmup_steps must be >= 0, got {}", warmup_steps));
  if (!(beta1 >= 0 && beta1 < 1)) fail(fmt::format("beta1 must be in [0, 1), got {}", beta1));
  if (!(beta2 >= 0 && beta2 < 1)) fail(fmt::format("beta2 must be in [0, 1), got {}", beta2));
  if (!(eps > 0)) fail(fmt::format("eps must be positive, got {}", eps));
  if (!(weight_decay >= 0)) fail(fmt::format("weight_decay must be >= 0, got {}", weight_decay));
  if (!(grad_clip >= 0)) fail(fmt::format("grad_clip must be >= 0 (0 disables), got {}", grad_clip));
  if (eval_interval < 0) fail(fmt::format("eval_interval must be >= 0, got {}", eval_interval));
  if (checkpoint_interval < 0)
    fail(fmt::format("checkpoint_interval must be >= 0, got {}", checkpoint_interval));
  if (log_interval <= 0) fail(fmt::format("log_interval must be positive, got {}", log_interval));
  if (eval_windows < 0) fail(fmt::format("eval_windows must be >= 0, got {}", eval_windows));
  if (threads < 1 || threads > 256) fail(fmt::format("threads must be in [1, 256], got {}", threads));
  if (sample_tokens < 0) fail(fmt::format("sample_tokens must be >= 0, got {}", sample_tokens));
  if (stop_at < 0) fail(fmt::format("stop_at must be >= 0, got {}", stop_at));
  if (out.empty()) fail("out (the checkpoint path) must not be empty");
  nn::GPTConfig m = model;
  if (m.vocab_size == 0) m.vocab_size = 1;  // filled from the tokenizer later
  m.validate();
}

nlohmann::json RunConfig::to_json() const {
  return {
      // the model keys of model.md, top level, exactly these names
      {"vocab_size", model.vocab_size},
      {"context_length", model.context_length},
      {"d_model", model.d_model},
      {"n_heads", model.n_heads},
      {"n_layers", model.n_layers},
      {"d_ff", model.ff_width()},
      {"dropout", model.dropout},
      {"qkv_bias", model.qkv_bias},
      {"tie_weights", model.tie_weights},
      {"data", data},
      {"val_fraction", val_fraction},
      {"tokenizer", tokenizer},
      {"corpus_seed", corpus_seed},
      {"steps", steps},
      {"batch_size", batch_size},
      {"optimizer", "adamw"},
      {"lr", lr},
      {"min_lr", effective_min_lr()},
      {"warmup_steps", warmup_steps},
      {"schedule", "warmup_cosine"},
      {"beta1", beta1},
      {"beta2", beta2},
      {"eps", eps},
      {"weight_decay", weight_decay},
      {"grad_clip", grad_clip},
      {"seed", seed},
      {"eval_interval", eval_interval},
      {"checkpoint_interval", checkpoint_interval},
      {"log_interval", log_interval},
      {"eval_windows", eval_windows},
      {"sample_tokens", sample_tokens},
  };
}

RunConfig RunConfig::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument("config: expected a JSON object");
  RunConfig c;
  auto get = [&](const char* key, auto& field) {
    if (!j.contains(key)) return;
    try {
      field = j.at(key).get<std::remove_reference_t<decltype(field)>>();
    } catch (const nlohmann::json::exception&) {
      throw std::invalid_argument(
          fmt::format("config: key '{}' has the wrong type ({})", key, j.at(key).dump()));
    }
  };
  get("vocab_size", c.model.vocab_size);
  get("context_length", c.model.context_length);
  get("d_model", c.model.d_model);
  get("n_heads", c.model.n_heads);
  get("n_layers", c.model.n_layers);
  get("d_ff", c.model.d_ff);
  get("dropout", c.model.dropout);
  get("qkv_bias", c.model.qkv_bias);
  get("tie_weights", c.model.tie_weights);
  get("data", c.data);
  get("val_fraction", c.val_fraction);
  get("tokenizer", c.tokenizer);
  get("corpus_seed", c.corpus_seed);
  get("steps", c.steps);
  get("batch_size", c.batch_size);
  get("lr", c.lr);
  get("min_lr", c.min_lr);
  get("warmup_steps", c.warmup_steps);
  get("beta1", c.beta1);
  get("beta2", c.beta2);
  get("eps", c.eps);
  get("weight_decay", c.weight_decay);
  get("grad_clip", c.grad_clip);
  get("seed", c.seed);
  get("eval_interval", c.eval_interval);
  get("checkpoint_interval", c.checkpoint_interval);
  get("log_interval", c.log_interval);
  get("eval_windows", c.eval_windows);
  get("sample_tokens", c.sample_tokens);
  return c;
}

}  // namespace train
