#pragma once
// What a run trains its model to do, one class per task (train/tasks/), the way optimisers
// are rows of optim/registry.cpp: tasks/registry.cpp is the one place a name becomes a
// task, and the trainer asks the task, never its name, whenever tasks differ. A task owns
//   - its config keys and their checks (write_config, validate, keep_from an init),
//   - its data: how it is read (load_data) and drawn into batches (batches), the ids it
//     adds to a tokenizer's (extra_ids) and what padding reads (pad_id),
//   - the model's shape it asks for (shape_model: a classifier's head),
//   - its evaluation, the figures it reports (evaluate) and the one that judges the model
//     (validation_metric: what --early-stopping and --keep-best watch),
//   - the samples it shows (evaluation_sample, closing_sample).
// Adding a task is its class and one row of the registry (docs/tasks.md walks through one).
//
//   const train::Task& task = train::task_named("classify");   // std::invalid_argument
//   cfg.task = train::TaskHandle(task);
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "train/batch_source.h"
#include "train/config.h"

namespace train {

struct RunData;
struct StepFigures;

// A sample recorded at an evaluation is at most this long (the end's is sample_tokens).
inline constexpr int64_t kEvaluationSampleTokens = 64;

// Sees a data source's identity before any text meets the tokenizer (and may throw).
using IdentityCheck = std::function<void(const std::string&)>;

// Text a task shows from its model: printed under its heading, and recorded by the report.
struct TaskSample {
  std::string heading;
  std::string text;
};

// The validation figure a task is judged by (--early-stopping, --keep-best): its name as
// --metrics writes it, where a step's figures hold it, and which way is better.
struct ValidationMetric {
  const char* name;
  double StepFigures::*field;
  bool higher_is_better;
};

class Task {
 public:
  virtual ~Task() = default;
  virtual const char* name() const = 0;
  // --task's help: what the task trains and what its --data holds
  virtual const char* help() const = 0;

  // --- configuration
  // The checks of this task's settings (RunConfig::validate asks them in its turn).
  virtual void validate(const RunConfig& cfg) const = 0;
  // The keys a checkpoint's config records beyond a language model's (none for lm: its
  // config reads as it did before tasks existed). RunConfig::from_json reads them back.
  virtual void write_config(const RunConfig& cfg, nlohmann::json& j) const = 0;
  // Fine-tuning a model already trained for this task keeps what the task knew (a
  // classifier's labels, an instruction model's template).
  virtual void keep_from(const RunConfig& was, RunConfig& cfg) const = 0;

  // --- what it is, for commands that treat its models differently
  // Its data is a text's windows (a language model's), not a file of examples.
  virtual bool reads_text() const { return false; }
  // Its model answers instruction records formatted with the run's prompt template
  // (`sample --instruction`, `eval` of records).
  virtual bool follows_instructions() const { return false; }

  // --- data
  virtual RunData load_data(const RunConfig& cfg, const io::TokenizerSection* saved,
                            const IdentityCheck& check_identity) const = 0;
  // Ids the model needs beyond the tokenizer's (an end-of-text id the tokenizer lacks).
  virtual int64_t extra_ids(const RunConfig&, const data::Tokenizer&) const { return 0; }
  // What those ids are, for a message ("an end-of-text id").
  virtual const char* extra_ids_help() const { return "ids past its vocabulary"; }
  // What padding positions read (no target or label reads them).
  virtual int64_t pad_id(const data::Tokenizer&) const { return 0; }
  // The model's shape from the data, before the config is validated (a classifier: a class
  // per label); then whether the data holds enough to train on (throws when it does not).
  virtual void shape_model(RunConfig& cfg, const RunData& data) const = 0;
  virtual void check_training_data(const RunConfig& cfg, const RunData& data) const = 0;
  virtual std::unique_ptr<BatchSource> batches(const RunConfig& cfg, const RunData& data) const = 0;

  // --- evaluation: fills f's validation figures (val_loss stays NaN when the evaluation
  // was cancelled); damaged data is a data::DataError
  virtual void evaluate(nn::GPT& model, const RunConfig& cfg, const RunData& data,
                        StepFigures& f) const = 0;
  // Which of those figures judges the model: its loss unless the task says (validation_watch.cpp).
  virtual ValidationMetric validation_metric() const;

  // --- samples (the model in training mode is left so)
  // At an evaluation, when the run records samples: none unless the task says.
  virtual std::optional<TaskSample> evaluation_sample(nn::GPT&, const RunConfig&,
                                                      const RunData&) const {
    return std::nullopt;
  }
  // After the last step; the model may be put in evaluation mode with adapters merged.
  virtual std::optional<TaskSample> closing_sample(nn::GPT& model, const RunConfig& cfg,
                                                   const RunData& data) const = 0;
};

// The task named `name`; any other name is a std::invalid_argument listing the names.
const Task& task_named(const std::string& name);
std::vector<std::string> task_names();
// "lm (next-token prediction on text), classify (...) or instruct (...)": --task's help.
std::string tasks_help();

}  // namespace train
