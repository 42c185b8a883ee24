#pragma once
// A classifier (train --task classify) in Hugging Face's layout: transformers'
// *ForSequenceClassification (GPT2ForSequenceClassification, LlamaForSequenceClassification,
// Qwen2ForSequenceClassification, Qwen3ForSequenceClassification). Their head is `score`, a
// Linear [num_labels, hidden] without a bias, over the hidden state of the last token that
// is not pad_token_id, after the final norm; the backbone keeps its causal LM's names
// (GPT-2's under "transformer.", the Llama family's under "model."). attograd's
// classifier.weight is score.weight; the labels are config.json's id2label.
//
//   check_hf_classifier(model, "out/");                      // what transformers cannot hold
//   add_classifier_keys(j, model, "GPT2LMHeadModel", eot);    // config.json's keys
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "interop/model_files.h"

namespace interop {

// "GPT2LMHeadModel" -> "GPT2ForSequenceClassification", "Qwen2ForCausalLM" ->
// "Qwen2ForSequenceClassification".
std::string sequence_classifier_of(const std::string& causal_architecture);

// Importing one back (the readers keep config.json's id2label and num_labels). The labels of
// config.json when its architectures name `classifier` (id2label's values in id order;
// transformers' LABEL_0, LABEL_1, ... for num_labels alone), each checked: 2 to 4096 of them, ids 0
// to n - 1 each once, distinct non-empty UTF-8 texts of at most 1 KiB, as many as num_labels says;
// an InteropError naming source and the key otherwise. Empty when architectures names no
// classifier.
std::vector<std::string> classifier_labels(const nlohmann::json& j, const std::string& source,
                                           const std::string& classifier);
// The config of a classifier of `labels` labels as transformers computes it: the last
// token's state, no bias.
void make_classifier(nn::GPTConfig& c, size_t labels);

// An InteropError naming `out` when the classifier computes what transformers would not:
// a mean pool (transformers reads the last token), a bias on its logits (score has none),
// labels that are not one per class.
void check_hf_classifier(const ModelFiles& model, const std::string& out);

// config.json as a sequence classifier: architectures, num_labels, id2label and label2id
// (the labels in the classifier's order), problem_type, and pad_token_id (the end-of-text
// id, which no text encodes, when the tokenizer has one; else null, and transformers then
// classifies one text at a time, its last token).
void add_classifier_keys(nlohmann::json& j, const ModelFiles& model,
                         const std::string& causal_architecture,
                         std::optional<int64_t> end_of_text);

}  // namespace interop
