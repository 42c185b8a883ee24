#include "train/evaluate_examples.h"

#include <cmath>

namespace train {

namespace {

// Adds a classifier's batch to the result: each row's softmax, argmax and correctness.
void add_predictions(const ag::Tensor& logits, const data::ExampleBatch& b, ExampleEval& r) {
  const ag::Tensor probs = ag::softmax(logits.to(ag::DType::Float64), -1).contiguous();
  const int64_t B = probs.shape()[0], K = probs.shape()[1];
  const double* p = probs.data<double>();
  const int64_t* labels = b.y.data<int64_t>();
  for (int64_t i = 0; i < B; ++i) {
    std::vector<double> row(p + i * K, p + (i + 1) * K);
    int64_t best = 0;
    for (int64_t k = 1; k < K; ++k)
      if (row[k] > row[best]) best = k;
    r.predicted.push_back(best);
    r.probabilities.push_back(std::move(row));
    r.correct += best == labels[i];
  }
}

}  // namespace

ExampleEval evaluate_examples(nn::GPT& model, const std::vector<data::Example>& examples,
                              int64_t batch_size, int64_t pad,
                              const std::function<bool()>& cancelled) {
  const nn::InferenceScope inference;  // dropout off, whatever mode the model is in
  ag::NoGradGuard no_grad;
  ExampleEval r;
  double nats = 0;
  const auto n = static_cast<int64_t>(examples.size());
  for (int64_t start = 0; start < n; start += batch_size) {
    if (cancelled && cancelled()) break;
    std::vector<const data::Example*> rows;
    for (int64_t i = start; i < std::min(n, start + batch_size); ++i) rows.push_back(&examples[i]);
    const data::ExampleBatch b = data::make_batch(rows, pad);
    const nn::GPT::Output out = model.forward(b.x, b.y, b.lengths);
    if (b.targets > 0) nats += out.loss.item() * static_cast<double>(b.targets);
    r.targets += b.targets;
    r.examples += static_cast<int64_t>(rows.size());
    if (b.y.dim() == 1) add_predictions(out.logits, b, r);
  }
  r.loss = r.targets > 0 ? nats / static_cast<double>(r.targets) : NAN;
  return r;
}

}  // namespace train
