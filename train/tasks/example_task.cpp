#include "train/tasks/example_task.h"

#include <fmt/format.h>

#include "base/posix_file.h"
#include "base/utf8.h"
#include "io/tokenizer_section.h"
#include "nn/generation.h"
#include "train/model_loading.h"
#include "train/reporter.h"
#include "train/run_data.h"
#include "train/stop_signals.h"

namespace train {

namespace {

constexpr size_t kLabelsShown = 20;  // on the run's data line

class ExampleBatches final : public BatchSource {
 public:
  ExampleBatches(const std::vector<data::Example>* examples, int64_t batch_size, int64_t pad)
      : sampler_(examples, batch_size, pad) {}
  Batch next(ag::Generator& gen) const override {
    data::ExampleBatch b = sampler_.next(gen);
    return {std::move(b.x), std::move(b.y), std::move(b.lengths), b.tokens};
  }
  void skip(ag::Generator& gen) const override { sampler_.skip(gen); }

 private:
  data::ExampleSampler sampler_;
};

// A task's tokenizer: the checkpoint's, or learned from every text of the examples file.
std::unique_ptr<data::Tokenizer> task_tokenizer(const ExampleTask& task, const RunConfig& cfg,
                                                const io::TokenizerSection* saved) {
  if (saved) return io::make_tokenizer(*saved);
  if (cfg.tokenizer == data::TokenizerKind::gpt2)
    throw std::invalid_argument(
        "tokenizer gpt2 is GPT-2's own, read from its files: start from a checkpoint that holds "
        "it (--init-from, e.g. one made by 'attograd import')");
  if (cfg.tokenizer == data::TokenizerKind::bpe && cfg.model.vocab_size == 0)
    throw std::invalid_argument("tokenizer bpe needs vocab_size (--vocab-size)");
  data::TaskOptions o;
  o.prompt_template = cfg.prompt_template;
  o.chat_format = cfg.chat_format.value_or(data::ChatFormat::chatml);
  const std::string text = task.corpus_text(cfg.data, o);
  // the ids the task adds (a chat format's tokens) lie past the learned tokens; a tokenizer
  // learned here reserves its <|endoftext|>, as a byte tokenizer made now does
  const data::ByteTokenizer reserving(data::EndOfText::reserved);
  const int64_t bpe_vocab = cfg.tokenizer == data::TokenizerKind::bpe
                                ? cfg.model.vocab_size - task.extra_ids(cfg, reserving)
                                : 0;
  return data::prepare_text(text, cfg.tokenizer, bpe_vocab, 0.0, base::printable(cfg.data))
      .tokenizer;
}

// "; labels 0 ham, 1 spam" (their order: the classifier's outputs), or "" for a task without.
std::string label_list(const std::vector<std::string>& labels) {
  if (labels.empty()) return "";
  std::vector<std::string> shown;
  for (size_t i = 0; i < labels.size() && i < kLabelsShown; ++i)
    shown.push_back(fmt::format("{} {}", i, base::printable(labels[i])));
  if (labels.size() > kLabelsShown) shown.push_back(fmt::format("... ({} in all)", labels.size()));
  return fmt::format("; labels {}", fmt::join(shown, ", "));
}

}  // namespace

void ExampleTask::validate(const RunConfig& cfg) const {
  if (cfg.data.empty())
    throw std::invalid_argument(fmt::format("task {} needs --data, its examples file", name()));
}

void ExampleTask::write_config(const RunConfig& cfg, nlohmann::json& j) const {
  j["task"] = name();
  j["no_truncate"] = cfg.no_truncate;
}

RunData ExampleTask::load_data(const RunConfig& cfg, const io::TokenizerSection* saved,
                               const IdentityCheck& check_identity) const {
  RunData d;
  // the file's bytes are let go before its records are read
  d.identity = data::text_identity(base::read_input_file(cfg.data, "data file"));
  if (check_identity) check_identity(d.identity);
  d.tokenizer = task_tokenizer(*this, cfg, saved);
  data::TaskExamples all = read_examples(cfg.data, *d.tokenizer, task_options(cfg, *d.tokenizer));
  d.labels = std::move(all.labels);
  d.layout = std::move(all.layout);
  d.truncated = all.truncated;
  d.pad = pad_id(*d.tokenizer);
  const auto n = all.examples.size();
  d.examples =
      data::split_examples(std::move(all.examples), cfg.val_fraction, cfg.seed + ag::kSplitStream);
  d.source = fmt::format(
      "{} ({} task, {} examples: {} train, {} val{}{})", base::printable(cfg.data), name(), n,
      d.examples->train.size(), d.examples->val.size(),
      d.truncated ? fmt::format("; {} cut to the context", d.truncated) : "", label_list(d.labels));
  return d;
}

void ExampleTask::check_training_data(const RunConfig& cfg, const RunData& data) const {
  if (data.examples->train.empty())
    throw std::invalid_argument(
        fmt::format("'{}' leaves no example to train on", base::printable(cfg.data)));
}

std::unique_ptr<BatchSource> ExampleTask::batches(const RunConfig& cfg, const RunData& data) const {
  return std::make_unique<ExampleBatches>(&data.examples->train, cfg.batch_size, data.pad);
}

void ExampleTask::evaluate(nn::GPT& model, const RunConfig& cfg, const RunData& data,
                           StepFigures& f) const {
  const ExampleEval r = evaluate_examples(model, data.examples->val, cfg.batch_size, data.pad,
                                          StopSignals::requested);
  if (r.examples != static_cast<int64_t>(data.examples->val.size())) return;  // cancelled
  f.val_loss = r.loss;
  f.val_examples = r.examples;
  score(r, f);
}

ExampleTask::GreedyAnswer ExampleTask::answer_first_example(nn::GPT& model, const RunConfig& cfg,
                                                            const RunData& data) {
  model.eval();
  merge_adapters(model);  // the decoder runs plain Linears; the final save is written
  const auto& examples = data.examples->val.empty() ? data.examples->train : data.examples->val;
  const data::Example& e = examples.front();
  size_t prompt = 0;  // the prompt: ids up to the first that has a target
  while (prompt < e.targets.size() && e.targets[prompt] == data::kIgnoreTarget) ++prompt;
  std::vector<int64_t> ids(e.ids.begin(), e.ids.begin() + static_cast<int64_t>(prompt) + 1);
  nn::GenerationOptions o;
  o.max_new_tokens = cfg.sample_tokens;
  o.sampling.temperature = 0;
  o.seed = cfg.seed;
  return {&e, nn::generate_tokens(model, ids, o)[0]};
}

}  // namespace train
