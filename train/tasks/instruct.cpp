#include "train/tasks/instruct.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/utf8.h"
#include "nn/generation.h"
#include "train/model_loading.h"
#include "train/run_data.h"
#include "train/tasks/language_model.h"

namespace train {

void InstructTask::validate(const RunConfig& cfg) const {
  ExampleTask::validate(cfg);
  refuse_classifier_head(cfg);
}

void InstructTask::write_config(const RunConfig& cfg, nlohmann::json& j) const {
  ExampleTask::write_config(cfg, j);
  j["prompt_template"] = cfg.prompt_template;
}

// An instruction model fine-tuned again keeps its template unless --template names another.
void InstructTask::keep_from(const RunConfig& was, RunConfig& cfg) const {
  if (cfg.template_file.empty()) cfg.prompt_template = was.prompt_template;
}

int64_t InstructTask::extra_ids(const RunConfig&, const data::Tokenizer& tokenizer) const {
  return data::end_of_text_id(tokenizer) == tokenizer.vocab_size() ? 1 : 0;
}

int64_t InstructTask::pad_id(const data::Tokenizer& tokenizer) const {
  return data::end_of_text_id(tokenizer);
}

data::TaskExamples InstructTask::read_examples(const std::string& path,
                                               const data::Tokenizer& tokenizer,
                                               const data::TaskOptions& o) const {
  return data::read_instruction_examples(path, tokenizer, o);
}

std::string InstructTask::corpus_text(const std::string& path, const data::TaskOptions& o) const {
  return data::instruction_corpus_text(path, o);
}

// The first held-out instruction (else the first training one), answered greedily up to
// the end-of-text token.
std::optional<TaskSample> InstructTask::closing_sample(nn::GPT& model, const RunConfig& cfg,
                                                       const RunData& data) const {
  GreedyAnswer greedy = answer_first_example(model, cfg, data);
  const data::Example& e = *greedy.example;
  std::vector<int64_t>& answer = greedy.answer;
  const auto end = std::find(answer.begin(), answer.end(), data::end_of_text_id(*data.tokenizer));
  answer.erase(end, answer.end());
  return TaskSample{fmt::format("sample (greedy) for the instruction of {} line {}",
                                base::printable(cfg.data), e.line),
                    data.tokenizer->decode(answer)};
}

}  // namespace train
