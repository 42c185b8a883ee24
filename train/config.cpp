#include "train/config.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include "train/task.h"

namespace train {

namespace {

void fail(const std::string& msg) {
  throw std::invalid_argument(msg);
}

// How long the run is and what ends it early, beside its steps.
void validate_length(const RunConfig& c) {
  if (c.warmup_steps < -1)
    fail(fmt::format("warmup_steps must be >= 0 (or -1: the default), got {}", c.warmup_steps));
  if (c.epochs < 0) fail(fmt::format("epochs must be >= 0, got {}", c.epochs));
  if (c.early_stopping < 0)
    fail(fmt::format("early_stopping must be >= 0, got {}", c.early_stopping));
  if (c.early_stopping > 0 && c.eval_interval == 0)
    fail("early_stopping needs evaluations during the run: set eval_interval above 0");
}

void validate_model(const RunConfig& cfg) {
  nn::GPTConfig m = cfg.model;
  if (m.vocab_size == 0) m.vocab_size = 1;  // filled from the tokenizer later
  // --init-from's checkpoint decides the architecture, which the adapters' targets name
  // Linears of (down_proj is a SwiGLU MLP's): they are checked once it is read
  // (training_run.cpp validates the model again), not against these defaults
  if (!cfg.init_from.empty()) m.lora_targets = nn::GPTConfig().lora_targets;
  m.validate();
}

// A packed base is what a run does not train: none without LoRA or freeze.
void validate_base_precision(const RunConfig& c) {
  if (c.base_precision != ag::quant::BasePrecision::fp32 && c.model.lora_rank == 0 &&
      c.freeze.empty())
    fail(
        fmt::format("base_precision {} holds the frozen weights packed, and this run trains "
                    "every weight: give it with lora_rank or freeze",
                    base::choice_name(c.base_precision)));
}

}  // namespace

void RunConfig::validate() const {
  if (model.vocab_size < 0) fail(fmt::format("vocab_size must be >= 0, got {}", model.vocab_size));
  if (!(val_fraction >= 0 && val_fraction < 1))
    fail(fmt::format("val_fraction must be in [0, 1), got {}", val_fraction));
  if (tokenizer == data::TokenizerKind::none)  // a model imported without one: nothing to train on
    fail("tokenizer must be 'char', 'byte', 'bpe' or 'gpt2', got 'none'");
  task->validate(*this);
  if (steps < 0) fail(fmt::format("steps must be >= 0, got {}", steps));
  if (!(max_time >= 0 && std::isfinite(max_time)))
    fail(fmt::format("max_time must be >= 0 and finite, got {}", max_time));
  if (name.size() > 1024) fail(fmt::format("name must be at most 1024 bytes, got {}", name.size()));
  if (batch_size <= 0) fail(fmt::format("batch_size must be positive, got {}", batch_size));
  if (grad_accum_steps < 1 || grad_accum_steps > kMaxGradAccumSteps)
    fail(fmt::format("grad_accum_steps must be in [1, {}], got {}", kMaxGradAccumSteps,
                     grad_accum_steps));
  if (!(lr > 0 && std::isfinite(lr)))
    fail(fmt::format("lr must be positive and finite, got {}", lr));
  if (!std::isfinite(min_lr)) fail(fmt::format("min_lr must be finite, got {}", min_lr));
  if (min_lr > lr) fail(fmt::format("min_lr ({}) must not exceed lr ({})", min_lr, lr));
  validate_length(*this);
  optimizer.validate();
  if (!(grad_clip >= 0 && std::isfinite(grad_clip)))
    fail(fmt::format("grad_clip must be >= 0 and finite (0 disables), got {}", grad_clip));
  if (eval_interval < 0) fail(fmt::format("eval_interval must be >= 0, got {}", eval_interval));
  if (checkpoint_interval < 0)
    fail(fmt::format("checkpoint_interval must be >= 0, got {}", checkpoint_interval));
  if (log_interval <= 0) fail(fmt::format("log_interval must be positive, got {}", log_interval));
  if (eval_windows < 0) fail(fmt::format("eval_windows must be >= 0, got {}", eval_windows));
  if (bucket_mb < 1 || bucket_mb > 1024)
    fail(fmt::format("bucket_mb must be in [1, 1024], got {}", bucket_mb));
  if (threads < 1 || threads > kMaxThreads)
    fail(fmt::format("threads must be in [1, {}], got {}", kMaxThreads, threads));
  if (sample_tokens < 0) fail(fmt::format("sample_tokens must be >= 0, got {}", sample_tokens));
  if (stop_at < 0) fail(fmt::format("stop_at must be >= 0, got {}", stop_at));
  if (out.empty()) fail("out (the checkpoint path) must not be empty");
  validate_base_precision(*this);
  validate_model(*this);
}

namespace {

// The model's keys (docs/model.md), top level, exactly as nn::config_fields() names them;
// d_ff as the width it stands for; a variant at its default left out, and the head's
// settings for a language model, the adapters' when there are none.
nlohmann::json model_json(const nn::GPTConfig& model) {
  nn::GPTConfig m = model;
  m.d_ff = m.ff_width();
  const nn::GPTConfig defaults;
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : nn::config_fields())
    std::visit(
        [&](auto member) {
          using Value = std::remove_cvref_t<decltype(m.*member)>;
          constexpr bool variant = !std::is_arithmetic_v<Value>;  // a string or a choice
          if ((variant || f.left_out_at_default) && m.*member == defaults.*member) return;
          if (f.adapter_setting && m.lora_rank == 0) return;
          if (f.head_setting && m.num_classes == 0) return;
          if constexpr (base::Choice<Value>)
            j[f.key] = base::choice_name(m.*member);
          else
            j[f.key] = m.*member;
        },
        f.member);
  return j;
}

// absent: float32, as in files from before packed bases
void write_base_precision(const RunConfig& c, nlohmann::json& j) {
  if (c.base_precision != ag::quant::BasePrecision::fp32)
    j["base_precision"] = base::choice_name(c.base_precision);
}

}  // namespace

std::string RunConfig::best_out() const {
  const std::filesystem::path path(out);
  const std::string extension = path.has_extension() ? path.extension().string() : ".h5";
  return (path.parent_path() / (path.stem().string() + ".best" + extension)).string();
}

nlohmann::json RunConfig::to_json() const {
  nlohmann::json j = model_json(model);
  j.update({
      {"data", data},
      {"val_fraction", val_fraction},
      {"tokenizer", base::choice_name(tokenizer)},
      {"corpus_seed", corpus_seed},
      {"steps", steps},
      {"batch_size", batch_size},
      {"grad_accum_steps", grad_accum_steps},
      {"optimizer", optimizer.name},
      {"lr", lr},
      {"min_lr", effective_min_lr()},
      {"warmup_steps", effective_warmup()},
      {"schedule", "warmup_cosine"},
      {"grad_clip", grad_clip},
      {"precision", base::choice_name(precision)},
      {"seed", seed},
      {"eval_interval", eval_interval},
      {"checkpoint_interval", checkpoint_interval},
      {"log_interval", log_interval},
      {"eval_windows", eval_windows},
      {"sample_tokens", sample_tokens},
  });
  // what a chat model carries (absent: none, as in files from before chat formats)
  if (chat_format) j["chat_format"] = base::choice_name(*chat_format);
  if (!stop_token_ids.empty()) j["stop_token_ids"] = stop_token_ids;
  task->write_config(*this, j);
  if (!freeze.empty()) j["freeze"] = freeze;  // absent: nothing frozen by name
  write_base_precision(*this, j);
  // absent: steps were given, no early stopping, no best checkpoint
  if (epochs > 0) j["epochs"] = epochs;
  if (early_stopping > 0) j["early_stopping"] = early_stopping;
  if (keep_best) j["keep_best"] = true;
  // the settings its optimiser reads (adamw: weight_decay, beta1, beta2, eps)
  for (const std::string& key : optim::hyperparameters_of(optimizer.name))
    for (const optim::Hyperparameter& h : optim::hyperparameter_table())
      if (key == h.key) j[key] = optimizer.*h.field;
  return j;
}

namespace {

std::invalid_argument wrong_value(const nlohmann::json& v, const char* key, const char* expected) {
  return std::invalid_argument(
      fmt::format("config: key '{}' must be {}, got {}", key, expected, v.dump().substr(0, 80)));
}

// An integer field's value: a float only when it is a whole number that a double holds
// exactly, and in the field's range (-1 is no seed).
template <typename T>
T json_integer(const nlohmann::json& v, const char* key) {
  constexpr bool is_unsigned = std::is_unsigned_v<T>;
  const char* expected = is_unsigned ? "a non-negative integer" : "an integer";
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max()))
      throw wrong_value(v, key, expected);
    return static_cast<T>(v.get<uint64_t>());
  }
  if (v.is_number_integer()) {
    if (is_unsigned && v.get<int64_t>() < 0) throw wrong_value(v, key, expected);
    return static_cast<T>(v.get<int64_t>());
  }
  const double d = v.is_number_float() ? v.get<double>() : NAN;
  if (!(std::trunc(d) == d && std::fabs(d) <= 0x1p53 && (!is_unsigned || d >= 0)))
    throw wrong_value(v, key, expected);
  return static_cast<T>(d);
}

// A JSON value as the type of the field it fills, refusing anything that would change in
// the conversion: 16.9 or 1e19 for an integer, -1 for a seed, a string for a number, a
// name no choice has.
template <typename T>
T json_as(const nlohmann::json& v, const char* key) {
  if constexpr (base::Choice<T>) {
    return base::parse_choice<T>(json_as<std::string>(v, key));
  } else if constexpr (std::is_same_v<T, std::optional<data::ChatFormat>>) {
    return json_as<data::ChatFormat>(v, key);
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    if (!v.is_array() || v.size() > kMaxStopTokenIds)
      throw wrong_value(v, key,
                        fmt::format("an array of at most {} ids", kMaxStopTokenIds).c_str());
    std::vector<int64_t> ids;
    for (const auto& id : v) ids.push_back(json_integer<int64_t>(id, key));
    return ids;
  } else if constexpr (std::is_same_v<T, TaskHandle>) {
    return TaskHandle(task_named(json_as<std::string>(v, key)));
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    if (!v.is_array()) throw wrong_value(v, key, "an array");
    std::vector<std::string> texts;
    for (const auto& text : v) texts.push_back(json_as<std::string>(text, key));
    return texts;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) throw wrong_value(v, key, "true or false");
    return v.get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) throw wrong_value(v, key, "a string");
    return v.get<std::string>();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      throw wrong_value(v, key, "a finite number");
    return v.get<double>();
  } else {
    return json_integer<T>(v, key);
  }
}

// Reads a key into the field it fills, when the config has it.
struct ConfigReader {
  const nlohmann::json& j;
  template <typename T>
  void operator()(const char* key, T& field) const {
    if (j.contains(key)) field = json_as<T>(j.at(key), key);
  }
};

void read_run_settings(const ConfigReader& get, RunConfig& c) {
  get("data", c.data);
  get("val_fraction", c.val_fraction);
  get("tokenizer", c.tokenizer);
  get("corpus_seed", c.corpus_seed);
  get("steps", c.steps);
  get("batch_size", c.batch_size);
  get("grad_accum_steps", c.grad_accum_steps);
  get("lr", c.lr);
  get("min_lr", c.min_lr);
  get("warmup_steps", c.warmup_steps);
  get("optimizer", c.optimizer.name);
  for (const optim::Hyperparameter& h : optim::hyperparameter_table())
    get(h.key, c.optimizer.*h.field);
  get("grad_clip", c.grad_clip);
  get("precision", c.precision);
  get("seed", c.seed);
  get("eval_interval", c.eval_interval);
  get("checkpoint_interval", c.checkpoint_interval);
  get("log_interval", c.log_interval);
  get("eval_windows", c.eval_windows);
  get("sample_tokens", c.sample_tokens);
  get("freeze", c.freeze);
  get("base_precision", c.base_precision);
  get("epochs", c.epochs);
  get("early_stopping", c.early_stopping);
  get("keep_best", c.keep_best);
}

// The keys the tasks write (Task::write_config), whichever task wrote them.
void read_task_settings(const ConfigReader& get, RunConfig& c) {
  get("task", c.task);
  get("no_truncate", c.no_truncate);
  get("prompt_template", c.prompt_template);
  get("labels", c.labels);
  get("chat_format", c.chat_format);
  get("stop_token_ids", c.stop_token_ids);
}

}  // namespace

RunConfig RunConfig::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument("config: expected a JSON object");
  RunConfig c;
  const ConfigReader get{j};
  for (const auto& f : nn::config_fields())
    std::visit([&](auto member) { get(f.key, c.model.*member); }, f.member);
  // a classifier saved before the key existed has a bias (classifier.bias)
  if (c.model.num_classes > 0 && !j.contains("classifier_bias")) c.model.classifier_bias = true;
  read_run_settings(get, c);
  read_task_settings(get, c);
  return c;
}

}  // namespace train
