#include "train/tasks/classify.h"

#include "train/reporter.h"
#include "train/run_data.h"

namespace train {

void ClassifyTask::write_config(const RunConfig& cfg, nlohmann::json& j) const {
  ExampleTask::write_config(cfg, j);
  j["labels"] = cfg.labels;
}

// A classifier fine-tuned again keeps its labels: a label its file does not know is an
// error naming its line.
void ClassifyTask::keep_from(const RunConfig& was, RunConfig& cfg) const {
  cfg.labels = was.labels;
}

// A class per label of the file (or of the run it resumes).
void ClassifyTask::shape_model(RunConfig& cfg, const RunData& data) const {
  cfg.labels = data.labels;
  cfg.model.num_classes = static_cast<int64_t>(data.labels.size());
}

data::TaskExamples ClassifyTask::read_examples(const std::string& path,
                                               const data::Tokenizer& tokenizer,
                                               const data::TaskOptions& o) const {
  return data::read_classification_examples(path, tokenizer, o);
}

std::string ClassifyTask::corpus_text(const std::string& path, const data::TaskOptions&) const {
  return data::classification_corpus_text(path);
}

// A classifier is judged by its accuracy, which is what it is for (its loss may rise while
// its accuracy still improves).
ValidationMetric ClassifyTask::validation_metric() const {
  return {"val_accuracy", &StepFigures::val_accuracy, true};
}

void ClassifyTask::score(const ExampleEval& r, StepFigures& f) const {
  f.val_accuracy = r.accuracy();
}

}  // namespace train
