#pragma once
// The evaluation of a fine-tuning task's examples (data/examples.h): every example once, in
// order, in padded batches, dropout off, no graph recorded. The loss is the mean over the
// targets the task counts (a label per example for classify; the response tokens for
// instruct); for a classifier, each example's predicted label and its probabilities.
#include <functional>
#include <vector>

#include "data/examples.h"
#include "nn/gpt.h"

namespace train {

struct ExampleEval {
  double loss = 0;       // nats per counted target (mean)
  int64_t targets = 0;   // targets counted (labels for classify, response tokens for instruct)
  int64_t examples = 0;  // examples evaluated
  // classify: per example in order, the argmax label (first of ties) and the softmax over
  // the labels
  std::vector<int64_t> predicted;
  std::vector<std::vector<double>> probabilities;
  int64_t correct = 0;  // classify: predicted == label
  double accuracy() const {
    return examples > 0 ? static_cast<double>(correct) / static_cast<double>(examples) : NAN;
  }
};

// batch_size examples per forward; pad is what padding positions read (data::pad_id).
// cancelled, asked between batches, abandons the evaluation (an ExampleEval of what was
// done so far, with examples < the count given).
ExampleEval evaluate_examples(nn::GPT& model, const std::vector<data::Example>& examples,
                              int64_t batch_size, int64_t pad,
                              const std::function<bool()>& cancelled = {});

}  // namespace train
