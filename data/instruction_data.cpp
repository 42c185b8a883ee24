// Placeholder until h-ins's reader lands: the instruct task's JSON/JSONL reader.
#include <stdexcept>

#include "data/examples.h"

namespace data {

TaskExamples read_instruction_examples(const std::string&, const Tokenizer&, const TaskOptions&) {
  throw std::logic_error("the instruct task's reader is not built yet");
}

std::string instruction_corpus_text(const std::string&, const TaskOptions&) {
  throw std::logic_error("the instruct task's reader is not built yet");
}

}  // namespace data
