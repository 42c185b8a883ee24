#pragma once
// The token ids a run trains and evaluates on, split as the spec says, with the tokenizer
// that made them.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/data.h"
#include "io/checkpoint.h"
#include "train/config.h"

namespace train {

struct RunData {
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::vector<int64_t> train, val;
  double ideal_loss = -1;  // known for the built-in corpus, else negative
  std::string source;      // the file, or a description of the built-in corpus
  std::string identity;    // data::text_identity of the text
  int64_t text_bytes = 0;
};

// The size of the text a run will read, before reading it (for the memory plan).
int64_t text_bytes_of(const RunConfig& cfg);

// Reads cfg.data (or builds the built-in corpus) and tokenizes it; with a checkpoint's
// tokenizer section the same vocabulary is reused, otherwise it is built from the text.
// check_identity sees the text's identity before it is tokenized (and may throw).
RunData load_run_data(const RunConfig& cfg, const io::TokenizerSection* saved = nullptr,
                      const std::function<void(const std::string&)>& check_identity = {});

}  // namespace train
