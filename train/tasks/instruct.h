#pragma once
// Task instruct: instruction records (JSON/JSONL) in a prompt template, trained on the
// response's tokens only (data/instruction_data.cpp). Each response ends with an
// end-of-text id, the tokenizer's own or one more id past its vocabulary; padding reads it.
// Its sample at the end is the first held-out instruction answered greedily.
#include "train/tasks/example_task.h"

namespace train {

class InstructTask final : public ExampleTask {
 public:
  const char* name() const override { return "instruct"; }
  const char* help() const override { return "--data: JSON/JSONL instruction records"; }
  bool follows_instructions() const override { return true; }
  void validate(const RunConfig& cfg) const override;
  void write_config(const RunConfig& cfg, nlohmann::json& j) const override;
  void keep_from(const RunConfig& was, RunConfig& cfg) const override;
  int64_t extra_ids(const RunConfig& cfg, const data::Tokenizer& tokenizer) const override;
  const char* extra_ids_help() const override { return "an end-of-text id after each response"; }
  int64_t pad_id(const data::Tokenizer& tokenizer) const override;
  data::TaskExamples read_examples(const std::string& path, const data::Tokenizer& tokenizer,
                                   const data::TaskOptions& o) const override;
  std::string corpus_text(const std::string& path, const data::TaskOptions& o) const override;
  std::optional<TaskSample> closing_sample(nn::GPT& model, const RunConfig& cfg,
                                           const RunData& data) const override;
};

}  // namespace train
