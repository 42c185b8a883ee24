#pragma once
// Task lm: next-token prediction on text (a UTF-8 file, a prepared folder or the built-in
// corpus), drawn as windows of context_length + 1 ids, evaluated on the held-out windows
// in nats and bits per byte, sampled from the start of the held-out text.
#include "train/task.h"

namespace train {

class LanguageModelTask final : public Task {
 public:
  const char* name() const override { return "lm"; }
  const char* help() const override { return "next-token prediction on text"; }
  bool reads_text() const override { return true; }
  void validate(const RunConfig& cfg) const override;
  void write_config(const RunConfig&, nlohmann::json&) const override {}
  void keep_from(const RunConfig&, RunConfig&) const override {}
  RunData load_data(const RunConfig& cfg, const io::TokenizerSection* saved,
                    const IdentityCheck& check_identity) const override;
  void shape_model(RunConfig&, const RunData&) const override {}
  void check_training_data(const RunConfig& cfg, const RunData& data) const override;
  std::unique_ptr<BatchSource> batches(const RunConfig& cfg, const RunData& data) const override;
  void evaluate(nn::GPT& model, const RunConfig& cfg, const RunData& data,
                StepFigures& f) const override;
  std::optional<TaskSample> evaluation_sample(nn::GPT& model, const RunConfig& cfg,
                                              const RunData& data) const override;
  std::optional<TaskSample> closing_sample(nn::GPT& model, const RunConfig& cfg,
                                           const RunData& data) const override;
};

// A language model's head: a num_classes set by hand is refused, naming the task.
void refuse_classifier_head(const RunConfig& cfg);

}  // namespace train
