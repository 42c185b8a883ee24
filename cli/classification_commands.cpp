// `classify`: each label's probability for texts, from a classifier's checkpoint; and the
// classifier's side of `eval` (classification_commands.h).
#include "cli/classification_commands.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "base/utf8.h"
#include "cli/cli.h"
#include "cli/command_support.h"
#include "data/examples.h"
#include "io/tokenizer_section.h"
#include "train/console.h"
#include "train/gemm_agreement.h"
#include "train/model_loading.h"
#include "train/train.h"

namespace cli {

std::vector<std::string> classifier_labels(const io::Checkpoint& ckpt, const std::string& command) {
  const train::RunConfig cfg = train::RunConfig::from_json(ckpt.config);
  if (cfg.model.num_classes == 0)
    throw UsageError(fmt::format(
        "'{}' has no classification head (it is a language model): {} needs a checkpoint "
        "trained with --task classify (train --task classify --init-from it makes one)",
        base::printable(ckpt.source), command));
  if (static_cast<int64_t>(cfg.labels.size()) != cfg.model.num_classes)
    throw io::CheckpointError(
        fmt::format("'{}': its config has {} labels for a classifier of {} classes",
                    base::printable(ckpt.source), cfg.labels.size(), cfg.model.num_classes));
  return cfg.labels;
}

namespace {

// ------------------------------------------------------------------ eval

std::string label_column(const std::vector<std::string>& labels, size_t* width) {
  *width = 5;  // "label"
  for (const auto& l : labels) *width = std::max(*width, base::printable(l).size());
  return fmt::format("{:<{}}", "label", *width);
}

void print_metrics(const std::vector<std::string>& labels, const train::ExampleEval& r,
                   const train::ClassificationMetrics& m, int64_t truncated, int64_t context) {
  fmt::print("accuracy {:.4f} | loss {:.4f} | {} examples\n", m.accuracy, r.loss, m.examples);
  if (truncated > 0)
    fmt::print("{} texts were longer than the context: their first {} tokens were read\n",
               truncated, context);
  size_t w = 0;
  fmt::print("{}  precision  recall      f1  support\n", label_column(labels, &w));
  for (size_t k = 0; k < labels.size(); ++k) {
    const train::LabelMetrics& l = m.per_label[k];
    fmt::print("{:<{}}  {:9.4f}  {:6.4f}  {:6.4f}  {:7}\n", base::printable(labels[k]), w,
               l.precision, l.recall, l.f1, l.support);
  }
  fmt::print("confusion (rows: the true label; columns: the predicted one)\n{:<{}}", "", w);
  size_t cell = 6;
  for (const auto& l : labels) cell = std::max(cell, base::printable(l).size());
  for (const auto& l : labels) fmt::print("  {:>{}}", base::printable(l), cell);
  fmt::print("\n");
  for (size_t t = 0; t < labels.size(); ++t) {
    fmt::print("{:<{}}", base::printable(labels[t]), w);
    for (int64_t n : m.confusion[t]) fmt::print("  {:>{}}", n, cell);
    fmt::print("\n");
  }
}

nlohmann::json metrics_json(const std::vector<std::string>& labels, const train::ExampleEval& r,
                            const train::ClassificationMetrics& m, int64_t truncated,
                            const ClassifierEvalOptions& o) {
  nlohmann::json per_label = nlohmann::json::object();
  for (size_t k = 0; k < labels.size(); ++k) {
    const train::LabelMetrics& l = m.per_label[k];
    per_label[labels[k]] = {
        {"precision", l.precision}, {"recall", l.recall}, {"f1", l.f1}, {"support", l.support}};
  }
  return {{"accuracy", m.accuracy},         {"loss", r.loss},
          {"examples", m.examples},         {"labels", labels},
          {"per_label", per_label},         {"confusion", m.confusion},
          {"truncated", truncated},         {"checkpoint", base::printable(o.checkpoint)},
          {"data", base::printable(o.data)}};
}

}  // namespace

void eval_classifier(nn::GPT& model, const io::Checkpoint& ckpt, const ClassifierEvalOptions& o) {
  const std::vector<std::string> labels = classifier_labels(ckpt, "eval");
  const train::RunConfig cfg = train::RunConfig::from_json(ckpt.config);
  const auto tok = io::make_tokenizer(ckpt.tokenizer);
  const data::TaskOptions task = train::task_options(cfg, *tok);  // its labels: unknown ones fail
  const data::TaskExamples examples = data::read_classification_examples(o.data, *tok, task);
  train::end_setup(train::World::current());
  const train::ExampleEval r =
      train::evaluate_examples(model, examples.examples, o.batch_size, cfg.task->pad_id(*tok));
  std::vector<int64_t> truth;
  for (const data::Example& e : examples.examples) truth.push_back(e.label);
  const train::ClassificationMetrics m =
      train::classification_metrics(truth, r.predicted, static_cast<int64_t>(labels.size()));
  if (!train::World::current().root()) return;
  fmt::print("{}\n", examples.layout);
  print_metrics(labels, r, m, examples.truncated, task.context_length);
  if (o.json) fmt::print("{}\n", metrics_json(labels, r, m, examples.truncated, o).dump());
}

// ------------------------------------------------------------------ classify

namespace {

struct ClassifyOptions {
  std::string path, text;
  bool json = false;
  int threads = ag::kDefaultThreads;
};

po::options_description classify_options(ClassifyOptions& o) {
  po::options_description desc("classify options");
  auto add = desc.add_options();
  add("help,h", "show this help");
  add("checkpoint", po::value(&o.path)->required(),
      "a classifier's checkpoint (train --task classify; also the first bare argument)");
  add("text", po::value(&o.text),
      "the text to classify (default: each line of standard input is one text; empty lines "
      "are skipped)");
  add("json", po::bool_switch(&o.json),
      "one JSON object per text: {\"label\", \"probabilities\": {label: p}} (and \"line\")");
  add("threads", po::value(&o.threads)->default_value(ag::kDefaultThreads), "threads");
  return desc;
}

// Reads a text's probabilities over the labels and prints them: the labels from the
// likeliest down (ties in label order).
class Classifier {
 public:
  Classifier(const nn::GPT& model, const data::Tokenizer& tok, std::vector<std::string> labels,
             bool truncate, bool json)
      : model_(model), tok_(tok), labels_(std::move(labels)), truncate_(truncate), json_(json) {}

  void classify(const std::string& text, int64_t line) const {
    const std::vector<double> p = probabilities(text, line);
    std::vector<size_t> order(p.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
    if (json_) {
      nlohmann::json probs = nlohmann::json::object();
      for (size_t k = 0; k < p.size(); ++k) probs[labels_[k]] = p[k];
      nlohmann::json j{{"label", labels_[order[0]]}, {"probabilities", probs}};
      if (line > 0) j["line"] = line;
      fmt::print("{}\n", j.dump());
    } else {
      std::vector<std::string> parts;
      for (size_t k : order)
        parts.push_back(fmt::format("{} {:.4f}", base::printable(labels_[k]), p[k]));
      fmt::print("{}\n", fmt::join(parts, "  "));
    }
    std::fflush(stdout);
  }

 private:
  std::string where(int64_t line) const {
    return line > 0 ? fmt::format("line {} of standard input", line) : "--text";
  }

  std::vector<double> probabilities(const std::string& text, int64_t line) const {
    try {
      base::check_utf8(text);
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("{}: {}", where(line), e.what()));
    }
    std::vector<int64_t> ids;
    try {
      ids = tok_.encode(text);
    } catch (const std::exception& e) {
      throw UsageError(fmt::format("{} cannot be tokenized: {}", where(line), e.what()));
    }
    const int64_t T = model_.config().context_length, n = static_cast<int64_t>(ids.size());
    if (n == 0) throw UsageError(fmt::format("{} has no tokens", where(line)));
    if (n > T && !truncate_)
      throw UsageError(
          fmt::format("{} is {} tokens, longer than the context of {} (the "
                      "checkpoint was trained with --no-truncate)",
                      where(line), n, T));
    if (n > T) {
      train::noticef("{} is {} tokens: its first {} were read\n", where(line), n, T);
      ids.resize(static_cast<size_t>(T));
    }
    ag::NoGradGuard no_grad;
    const int64_t len = static_cast<int64_t>(ids.size());
    const ag::Tensor logits = model_
                                  .forward(ag::from_vector(ids, {1, len}), ag::Tensor(),
                                           ag::from_vector(std::vector<int64_t>{len}, {1}))
                                  .logits;
    const ag::Tensor probs = ag::softmax(logits.to(ag::DType::Float64), -1).contiguous();
    const double* d = probs.data<double>();
    return {d, d + probs.numel()};
  }

  const nn::GPT& model_;
  const data::Tokenizer& tok_;
  std::vector<std::string> labels_;
  bool truncate_, json_;
};

// Standard input a line at a time, each bounded before it is held whole.
void classify_stdin(const Classifier& c) {
  constexpr size_t kMaxLineBytes = size_t{1} << 20;
  std::string line;
  int64_t number = 0;
  while (true) {
    line.clear();
    int ch;
    while ((ch = std::cin.get()) != EOF && ch != '\n') {
      if (line.size() == kMaxLineBytes)
        throw UsageError(
            fmt::format("line {} of standard input is longer than 1 MiB (the limit)", number + 1));
      line += static_cast<char>(ch);
    }
    if (ch == EOF && line.empty()) return;
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) c.classify(line, number);
    if (ch == EOF) return;
  }
}

}  // namespace

int classify_command(const Args& args) {
  return guarded("classify", [&] {
    ClassifyOptions o;
    auto desc = classify_options(o);
    auto vm = parse_options(args, desc, "checkpoint");
    if (wants_help(vm, "classify", desc, "CHECKPOINT")) return 0;
    check_threads(o.threads);
    if (vm.count("text") && o.text.empty()) throw UsageError("--text is empty");
    require_file(o.path, "checkpoint");
    ag::set_num_threads(o.threads);
    io::Checkpoint ckpt = io::load_checkpoint(o.path, io::LoadOptions{.weights_only = true});
    train::refuse_gradient_dump(ckpt);
    std::vector<std::string> labels = classifier_labels(ckpt, "classify");
    const auto model = train::model_from_checkpoint(ckpt);
    ckpt.model.clear();  // the model holds the weights now
    model->eval();
    const auto tok = io::make_tokenizer(ckpt.tokenizer);
    const Classifier c(*model, *tok, std::move(labels),
                       !train::RunConfig::from_json(ckpt.config).no_truncate, o.json);
    if (vm.count("text"))
      c.classify(o.text, 0);
    else
      classify_stdin(c);
    return 0;
  });
}

}  // namespace cli
