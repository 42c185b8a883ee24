#pragma once
// A classifier's scores on labelled examples: accuracy, per label precision, recall, F1 and
// support, and the confusion matrix (rows the true label, columns the predicted one, both in
// label order), as `eval` prints them for a classify checkpoint.
//
//   train::ExampleEval r = train::evaluate_examples(model, examples, 16, pad);
//   train::ClassificationMetrics m = train::classification_metrics(truth, r.predicted, K);
//   m.per_label[k].recall;   m.confusion[true_label][predicted_label];
#include <cstdint>
#include <vector>

namespace train {

struct LabelMetrics {
  // precision: of the examples predicted as the label, the share that have it (0 when
  // none is); recall: of those that have it, the share predicted (0 when none has it);
  // f1 their harmonic mean (0 when both are 0); support: the examples that have it
  double precision = 0, recall = 0, f1 = 0;
  int64_t support = 0;
};

struct ClassificationMetrics {
  int64_t examples = 0, correct = 0;
  double accuracy = 0;                          // correct / examples (NaN without examples)
  std::vector<LabelMetrics> per_label;          // [num_labels]
  std::vector<std::vector<int64_t>> confusion;  // [true][predicted], num_labels x num_labels
};

// truth and predicted: one label index in [0, num_labels) per example, in the same order.
// Throws std::invalid_argument when the two differ in length or an index is out of range.
ClassificationMetrics classification_metrics(const std::vector<int64_t>& truth,
                                             const std::vector<int64_t>& predicted,
                                             int64_t num_labels);

}  // namespace train
