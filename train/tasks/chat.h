#pragma once
// Task chat: conversations (JSONL of {"messages": [{"role", "content"}]}) written in the
// run's chat format (data/chat_format.h), trained on the assistant's replies only: their
// content and their end-of-turn token (data/chat_data.cpp). The format's special tokens are
// the tokenizer's own (an imported model's) or ids past its vocabulary (a tokenizer learned
// here). Its sample at the end is the first held-out conversation's first reply, greedy.
#include "train/tasks/example_task.h"

namespace train {

// The run's chat format: the one named or kept from --init-from, else ChatML.
data::ChatFormat chat_format_of(const RunConfig& cfg);

class ChatTask final : public ExampleTask {
 public:
  const char* name() const override { return "chat"; }
  const char* help() const override {
    return "--data: JSONL conversations, {\"messages\": [{\"role\", \"content\"}]} a line";
  }
  void validate(const RunConfig& cfg) const override;
  void write_config(const RunConfig& cfg, nlohmann::json& j) const override;
  void keep_from(const RunConfig&, RunConfig&) const override {}  // the format: by every task
  int64_t extra_ids(const RunConfig& cfg, const data::Tokenizer& tokenizer) const override;
  const char* extra_ids_help() const override { return "the chat format's special tokens"; }
  data::TaskExamples read_examples(const std::string& path, const data::Tokenizer& tokenizer,
                                   const data::TaskOptions& o) const override;
  std::string corpus_text(const std::string& path, const data::TaskOptions& o) const override;
  std::optional<TaskSample> closing_sample(nn::GPT& model, const RunConfig& cfg,
                                           const RunData& data) const override;
};

}  // namespace train
