#include "interop/hf_classifier.h"

#include <fmt/format.h>

#include "base/json.h"
#include "base/utf8.h"

namespace interop {

std::string sequence_classifier_of(const std::string& causal_architecture) {
  for (const std::string suffix : {"LMHeadModel", "ForCausalLM"})
    if (causal_architecture.ends_with(suffix))
      return causal_architecture.substr(0, causal_architecture.size() - suffix.size()) +
             "ForSequenceClassification";
  throw std::logic_error("sequence_classifier_of: " + causal_architecture);
}

namespace {

constexpr size_t kMaxLabels = 4096;      // read_hf_config's bound on a key's values
constexpr size_t kMaxLabelBytes = 1024;  // a label is a name

bool names_classifier(const nlohmann::json& j, const std::string& classifier) {
  const auto archs = j.find("architectures");
  if (archs == j.end() || !archs->is_array()) return false;
  for (const auto& a : *archs)
    if (a == classifier) return true;
  return false;
}

std::string checked_label(const nlohmann::json& v, const std::string& source,
                          const std::string& id) {
  const auto fail = [&](const std::string& what) {
    throw InteropError(fmt::format("{}: id2label[\"{}\"] {}", source, excerpt(id), what));
  };
  if (!v.is_string()) fail(fmt::format("is {}, not a string", base::json_kind(v)));
  const std::string label = v.get<std::string>();
  if (label.empty() || label.size() > kMaxLabelBytes) fail("is empty or longer than 1 KiB");
  try {
    base::check_utf8(label);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  return label;
}

// id2label: {"0": "ham", "1": "spam"}, every id from 0 once.
std::vector<std::string> labels_of(const nlohmann::json& id2label, const std::string& source) {
  if (!id2label.is_object() || id2label.size() < 2 || id2label.size() > kMaxLabels)
    throw InteropError(
        fmt::format("{}: id2label is not an object of 2 to {} labels", source, kMaxLabels));
  std::vector<std::string> labels(id2label.size());
  std::set<std::string> seen;
  for (const auto& [id, value] : id2label.items()) {
    size_t at = 0;
    const bool digits =
        !id.empty() && id.size() <= 4 && id.find_first_not_of("0123456789") == std::string::npos;
    if (digits) at = std::stoul(id);
    if (!digits || at >= labels.size() || !labels[at].empty())
      throw InteropError(
          fmt::format("{}: id2label's key \"{}\" is not one of the ids 0 to {} "
                      "(each once)",
                      source, excerpt(id), labels.size() - 1));
    labels[at] = checked_label(value, source, id);
    if (!seen.insert(labels[at]).second)
      throw InteropError(
          fmt::format("{}: id2label names \"{}\" twice", source, excerpt(labels[at])));
  }
  return labels;
}

}  // namespace

std::vector<std::string> classifier_labels(const nlohmann::json& j, const std::string& source,
                                           const std::string& classifier) {
  if (!names_classifier(j, classifier)) return {};
  const auto given = j.find("num_labels");
  int64_t n = -1;
  if (given != j.end() && !given->is_null()) {
    if (!given->is_number_integer() || *given < 2 || *given > static_cast<int64_t>(kMaxLabels))
      throw InteropError(
          fmt::format("{}: num_labels is not an integer from 2 to {}", source, kMaxLabels));
    n = given->get<int64_t>();
  }
  const auto id2label = j.find("id2label");
  std::vector<std::string> labels;
  if (id2label != j.end() && !id2label->is_null()) {
    labels = labels_of(*id2label, source);
  } else {
    if (n < 0)
      throw InteropError(fmt::format("{}: {} without id2label or num_labels", source, classifier));
    for (int64_t i = 0; i < n; ++i) labels.push_back(fmt::format("LABEL_{}", i));
  }
  if (n >= 0 && static_cast<size_t>(n) != labels.size())
    throw InteropError(
        fmt::format("{}: num_labels is {} but id2label has {} labels", source, n, labels.size()));
  return labels;
}

void make_classifier(nn::GPTConfig& c, size_t labels) {
  c.num_classes = static_cast<int64_t>(labels);
  c.pool = nn::Pooling::last;
  c.classifier_bias = false;
}

void check_hf_classifier(const ModelFiles& model, const std::string& out) {
  const nn::GPTConfig& c = model.config;
  if (c.num_classes == 0) return;
  if (c.pool != nn::Pooling::last)
    throw InteropError(fmt::format(
        "{}: the classifier reads the mean of its tokens' states (pool mean), and transformers' "
        "sequence classifiers read the last token's: they would give other probabilities "
        "(a classifier trained with --pool last exports)",
        out));
  if (c.classifier_bias)
    throw InteropError(fmt::format(
        "{}: the classifier adds a bias to its logits (classifier.bias), and transformers' "
        "sequence classifiers' score layer has none: they would give other probabilities "
        "(a classifier trained with --classifier-bias false, the default, exports)",
        out));
  if (static_cast<int64_t>(model.labels.size()) != c.num_classes)
    throw InteropError(fmt::format("{}: the classifier has {} classes but {} labels", out,
                                   c.num_classes, model.labels.size()));
}

void add_classifier_keys(nlohmann::json& j, const ModelFiles& model,
                         const std::string& causal_architecture,
                         std::optional<int64_t> end_of_text) {
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (size_t i = 0; i < model.labels.size(); ++i) {
    id2label[std::to_string(i)] = model.labels[i];
    label2id[model.labels[i]] = i;
  }
  j["architectures"] = {sequence_classifier_of(causal_architecture)};
  j["num_labels"] = model.labels.size();
  j["id2label"] = std::move(id2label);
  j["label2id"] = std::move(label2id);
  j["problem_type"] = "single_label_classification";
  j["pad_token_id"] = end_of_text ? nlohmann::json(*end_of_text) : nlohmann::json(nullptr);
}

}  // namespace interop
