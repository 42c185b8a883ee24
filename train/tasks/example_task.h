#pragma once
// What the fine-tuning tasks that read a file of examples share (data/examples.h): the
// file read whole into examples and split by a seeded shuffle, batches of examples padded
// on the right, every held-out example evaluated once. A subclass says how a record
// becomes an example (read_examples, corpus_text) and what else it knows.
#include "data/examples.h"
#include "train/evaluate_examples.h"
#include "train/task.h"

namespace train {

class ExampleTask : public Task {
 public:
  void validate(const RunConfig& cfg) const override;
  void write_config(const RunConfig& cfg, nlohmann::json& j) const override;
  RunData load_data(const RunConfig& cfg, const io::TokenizerSection* saved,
                    const IdentityCheck& check_identity) const override;
  void shape_model(RunConfig&, const RunData&) const override {}
  void check_training_data(const RunConfig& cfg, const RunData& data) const override;
  std::unique_ptr<BatchSource> batches(const RunConfig& cfg, const RunData& data) const override;
  void evaluate(nn::GPT& model, const RunConfig& cfg, const RunData& data,
                StepFigures& f) const override;

  // Every record of the file as an example; bad input is a data::DataError naming file,
  // line and field.
  virtual data::TaskExamples read_examples(const std::string& path,
                                           const data::Tokenizer& tokenizer,
                                           const data::TaskOptions& o) const = 0;
  // Every text the examples encode, joined: what a tokenizer learned from scratch covers.
  virtual std::string corpus_text(const std::string& path, const data::TaskOptions& o) const = 0;

 protected:
  // The task's own figures from an evaluation of every held-out example.
  virtual void score(const ExampleEval&, StepFigures&) const {}

  // The closing sample of a task whose examples are a prompt and an answer: the first
  // held-out example (else the first training one) up to its first target, answered
  // greedily for cfg.sample_tokens, by the model made ready for the decoder (eval mode,
  // adapters merged); `answer` the generated ids, whole.
  struct GreedyAnswer {
    const data::Example* example;
    std::vector<int64_t> answer;
  };
  static GreedyAnswer answer_first_example(nn::GPT& model, const RunConfig& cfg,
                                           const RunData& data);
};

}  // namespace train
