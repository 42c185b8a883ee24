#include "train/tasks/language_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "nn/generation.h"
#include "train/evaluate.h"
#include "train/model_loading.h"
#include "train/reporter.h"
#include "train/run_data.h"
#include "train/stop_signals.h"

namespace train {

namespace {

class WindowBatches final : public BatchSource {
 public:
  WindowBatches(const data::TokenStore* ids, int64_t batch_size, int64_t context_length)
      : sampler_(ids, batch_size, context_length) {}
  Batch next(ag::Generator& gen) const override {
    auto [x, y] = sampler_.next(gen);
    const int64_t tokens = x.numel();  // every window is whole: no padding
    return {std::move(x), std::move(y), ag::Tensor(), tokens};
  }
  void skip(ag::Generator& gen) const override { sampler_.skip(gen); }

 private:
  data::BatchSampler sampler_;
};

// The first token of the held-out text, continued by the one generation loop (the
// windows `attograd sample` uses), at temperature 0.8.
std::string sample_text(const nn::GPT& model, const RunConfig& cfg, const RunData& data,
                        int64_t tokens) {
  std::vector<int64_t> out = data.val.empty() ? data.train.slice(0, 1) : data.val.slice(0, 1);
  nn::GenerationOptions o;
  o.max_new_tokens = tokens;
  o.sampling.temperature = 0.8;
  o.seed = cfg.seed;
  const std::vector<std::vector<int64_t>> fresh = nn::generate_tokens(model, out, o);
  out.insert(out.end(), fresh[0].begin(), fresh[0].end());
  return data.tokenizer->decode(out);
}

}  // namespace

void refuse_classifier_head(const RunConfig& cfg) {
  if (cfg.model.num_classes != 0)
    throw std::invalid_argument(
        fmt::format("num_classes {} is for a classifier (--task classify, which sets it from "
                    "the labels); task {} has the language-model head",
                    cfg.model.num_classes, cfg.task));
}

void LanguageModelTask::validate(const RunConfig& cfg) const {
  refuse_classifier_head(cfg);
}

RunData LanguageModelTask::load_data(const RunConfig& cfg, const io::TokenizerSection* saved,
                                     const IdentityCheck& check_identity) const {
  RunData d = load_text_data(cfg, saved, check_identity);
  d.token_bytes = data::token_byte_lengths(*d.tokenizer);
  return d;
}

void LanguageModelTask::check_training_data(const RunConfig& cfg, const RunData& data) const {
  const int64_t T = cfg.model.context_length;
  if (static_cast<int64_t>(data.train.size()) < T + 1)
    throw std::invalid_argument(
        fmt::format("the training split has {} tokens, fewer than context_length + 1 = {}",
                    data.train.size(), T + 1));
}

std::unique_ptr<BatchSource> LanguageModelTask::batches(const RunConfig& cfg,
                                                        const RunData& data) const {
  return std::make_unique<WindowBatches>(&data.train, cfg.batch_size, cfg.model.context_length);
}

void LanguageModelTask::evaluate(nn::GPT& model, const RunConfig& cfg, const RunData& data,
                                 StepFigures& f) const {
  const EvalResult r =
      train::evaluate(model, data.val, data.token_bytes, cfg.eval_windows, StopSignals::requested,
                      std::min(kEvalWindowsPerForward, cfg.batch_size));
  f.val_loss = r.tokens ? r.loss : NAN;
  f.val_bits_per_byte = r.tokens ? r.bits_per_byte() : NAN;
  f.val_windows = r.tokens ? r.windows : 0;
}

// Short, so that evaluations stay cheap; without adapters only (the decoder runs merged
// weights, and the run goes on training the unmerged ones).
std::optional<TaskSample> LanguageModelTask::evaluation_sample(nn::GPT& model, const RunConfig& cfg,
                                                               const RunData& data) const {
  if (cfg.model.lora_rank > 0) return std::nullopt;
  model.eval();
  std::string text =
      sample_text(model, cfg, data, std::min(cfg.sample_tokens, kEvaluationSampleTokens));
  model.train();
  return TaskSample{"sample", std::move(text)};
}

std::optional<TaskSample> LanguageModelTask::closing_sample(nn::GPT& model, const RunConfig& cfg,
                                                            const RunData& data) const {
  model.eval();
  merge_adapters(model);  // the decoder runs plain Linears; the final save is written
  return TaskSample{"sample", sample_text(model, cfg, data, cfg.sample_tokens)};
}

}  // namespace train
