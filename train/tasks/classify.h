#pragma once
// Task classify: one label per text, from a TSV/CSV file of text and label
// (data/classification_data.cpp). The model's head is a classifier with a class per label
// (nn::ClassificationHead); its evaluation adds the held-out accuracy; it shows no sample.
#include "train/tasks/example_task.h"

namespace train {

class ClassifyTask final : public ExampleTask {
 public:
  const char* name() const override { return "classify"; }
  const char* help() const override { return "--data: TSV/CSV of text and label"; }
  void write_config(const RunConfig& cfg, nlohmann::json& j) const override;
  void keep_from(const RunConfig& was, RunConfig& cfg) const override;
  void shape_model(RunConfig& cfg, const RunData& data) const override;
  data::TaskExamples read_examples(const std::string& path, const data::Tokenizer& tokenizer,
                                   const data::TaskOptions& o) const override;
  std::string corpus_text(const std::string& path, const data::TaskOptions& o) const override;
  ValidationMetric validation_metric() const override;
  std::optional<TaskSample> closing_sample(nn::GPT&, const RunConfig&,
                                           const RunData&) const override {
    return std::nullopt;  // a classifier gives labels, not text
  }

 protected:
  void score(const ExampleEval& r, StepFigures& f) const override;
};

}  // namespace train
