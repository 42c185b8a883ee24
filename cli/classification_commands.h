#pragma once
// What `eval` and `classify` do with a classifier's checkpoint (train --task classify):
// its labels, its evaluation on a labelled file, its predictions for texts.
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "nn/gpt.h"

namespace cli {

// The labels of a checkpoint with a classification head (config num_classes >= 2, labels
// one per class). One without a head is a UsageError saying so ("'<file>' has no
// classification head ... <command> needs a checkpoint trained with --task classify"); a
// config whose labels do not fit its head is a CheckpointError.
std::vector<std::string> classifier_labels(const io::Checkpoint& ckpt, const std::string& command);

struct ClassifierEvalOptions {
  std::string checkpoint, data;
  int64_t batch_size = 16;
  bool json = false;
};

// eval --data FILE on a classifier: FILE read with the checkpoint's labels and tokenizer
// (an unknown label is an error naming its line), every example evaluated once; printed:
// accuracy, loss, per-label precision/recall/F1/support and the confusion matrix (rows the
// true label, columns the predicted), and with json one JSON object as the last line.
void eval_classifier(nn::GPT& model, const io::Checkpoint& ckpt, const ClassifierEvalOptions& o);

}  // namespace cli
