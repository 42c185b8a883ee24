#include "train/tasks/chat.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/utf8.h"
#include "nn/generation.h"
#include "train/model_loading.h"
#include "train/run_data.h"
#include "train/tasks/language_model.h"

namespace train {

data::ChatFormat chat_format_of(const RunConfig& cfg) {
  return cfg.chat_format.value_or(data::ChatFormat::chatml);
}

void ChatTask::validate(const RunConfig& cfg) const {
  ExampleTask::validate(cfg);
  refuse_classifier_head(cfg);
}

// The format is written even when it is the default: sample --chat reads it.
void ChatTask::write_config(const RunConfig& cfg, nlohmann::json& j) const {
  ExampleTask::write_config(cfg, j);
  j["chat_format"] = base::choice_name(chat_format_of(cfg));
}

int64_t ChatTask::extra_ids(const RunConfig& cfg, const data::Tokenizer& tokenizer) const {
  return data::ChatTokens(chat_format_of(cfg), tokenizer).extra_ids();
}

data::TaskExamples ChatTask::read_examples(const std::string& path,
                                           const data::Tokenizer& tokenizer,
                                           const data::TaskOptions& o) const {
  return data::read_chat_examples(path, tokenizer, o);
}

std::string ChatTask::corpus_text(const std::string& path, const data::TaskOptions& o) const {
  return data::chat_corpus_text(path, o);
}

// The first held-out conversation (else the first training one) up to its first reply,
// answered greedily up to the end of the turn.
std::optional<TaskSample> ChatTask::closing_sample(nn::GPT& model, const RunConfig& cfg,
                                                   const RunData& data) const {
  GreedyAnswer greedy = answer_first_example(model, cfg, data);
  const data::Example& e = *greedy.example;
  std::vector<int64_t>& answer = greedy.answer;
  const data::ChatTokens tokens(chat_format_of(cfg), *data.tokenizer);
  const auto end = std::find_if(answer.begin(), answer.end(), [&](int64_t id) {
    return tokens.is_special(id) || id >= data.tokenizer->vocab_size();
  });
  answer.erase(end, answer.end());
  return TaskSample{fmt::format("sample (greedy) for the conversation of {} line {}",
                                base::printable(cfg.data), e.line),
                    data.tokenizer->decode(answer)};
}

}  // namespace train
