#include "train/classification_metrics.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace train {

ClassificationMetrics classification_metrics(const std::vector<int64_t>& truth,
                                             const std::vector<int64_t>& predicted,
                                             int64_t num_labels) {
  if (truth.size() != predicted.size())
    throw std::invalid_argument(fmt::format("classification_metrics: {} labels but {} predictions",
                                            truth.size(), predicted.size()));
  const auto K = static_cast<size_t>(num_labels);
  ClassificationMetrics m;
  m.confusion.assign(K, std::vector<int64_t>(K, 0));
  for (size_t i = 0; i < truth.size(); ++i) {
    if (truth[i] < 0 || truth[i] >= num_labels || predicted[i] < 0 || predicted[i] >= num_labels)
      throw std::invalid_argument(fmt::format(
          "classification_metrics: example {} has label {} and prediction {}, outside [0, {})", i,
          truth[i], predicted[i], num_labels));
    ++m.confusion[static_cast<size_t>(truth[i])][static_cast<size_t>(predicted[i])];
    m.correct += truth[i] == predicted[i];
  }
  m.examples = static_cast<int64_t>(truth.size());
  m.accuracy =
      m.examples > 0 ? static_cast<double>(m.correct) / static_cast<double>(m.examples) : NAN;
  auto share = [](int64_t part, int64_t whole) {
    return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
  };
  m.per_label.resize(K);
  for (size_t k = 0; k < K; ++k) {
    int64_t predicted_k = 0;
    for (size_t t = 0; t < K; ++t) {
      m.per_label[k].support += m.confusion[k][t];
      predicted_k += m.confusion[t][k];
    }
    LabelMetrics& l = m.per_label[k];
    l.precision = share(m.confusion[k][k], predicted_k);
    l.recall = share(m.confusion[k][k], l.support);
    l.f1 = l.precision + l.recall > 0 ? 2 * l.precision * l.recall / (l.precision + l.recall) : 0;
  }
  return m;
}

}  // namespace train
