// Placeholder until h-cls's reader lands: the classify task's TSV/CSV reader.
#include <stdexcept>

#include "data/examples.h"

namespace data {

TaskExamples read_classification_examples(const std::string&, const Tokenizer&,
                                          const TaskOptions&) {
  throw std::logic_error("the classify task's reader is not built yet");
}

std::string classification_corpus_text(const std::string&) {
  throw std::logic_error("the classify task's reader is not built yet");
}

}  // namespace data
