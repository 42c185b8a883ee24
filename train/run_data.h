#pragma once
// The token ids a run trains and evaluates on (the last val_fraction of a text held out),
// with the tokenizer that made them: a prepared folder's token files (read or mapped, any size), or
// a text file or the built-in corpus tokenized in memory into the same structure.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/data.h"
#include "io/checkpoint.h"
#include "train/config.h"

namespace train {

struct RunData {
  std::unique_ptr<data::Tokenizer> tokenizer;
  data::TokenStore train, val;
  double ideal_loss = -1;             // known for the built-in corpus, else negative
  std::string source;                 // the folder or file, or a description of the built-in corpus
  std::string identity;               // what checkpoints record as data_identity
  std::vector<uint32_t> token_bytes;  // bytes of text per id, for bits per byte
  bool prepared = false;              // from a prepared folder
  // a fine-tuning task's examples (cfg.task classify or instruct; train and val above are
  // then empty), its labels (classify) and what padding reads
  std::optional<data::ExampleSplit> examples;
  std::vector<std::string> labels;
  std::string layout;     // classify: which column is the text, which the label, and why
  int64_t truncated = 0;  // records cut to the context
  int64_t pad = 0;
  // What reading a text cost at its peak, before the model existed: the text and the
  // buffers of its ids (0 for a prepared folder or a task's examples).
  int64_t reading_bytes = 0;
  // What holding the data costs: the stores' resident bytes.
  int64_t memory_bytes() const;
};

// What reading cfg.data will hold at its peak, before reading it (for the memory plan): a
// text's bytes and its ids; a prepared folder's stores, which do not grow with its size.
int64_t data_bytes_of(const RunConfig& cfg);

// A task's reading options from a run's config: its context, labels, template and the
// tokenizer's end-of-text (data::end_of_text_id).
data::TaskOptions task_options(const RunConfig& cfg, const data::Tokenizer& tokenizer);

// The data of cfg's task (Task::load_data): a language model's text, or a fine-tuning
// task's examples file (data/examples.h) read and split. With a checkpoint's tokenizer
// section, the data is encoded with that vocabulary (and a folder must have been prepared
// with the same tokenizer); otherwise the tokenizer is cfg's. check_identity sees the
// data's identity before any text meets the tokenizer (and may throw).
RunData load_run_data(const RunConfig& cfg, const io::TokenizerSection* saved = nullptr,
                      const std::function<void(const std::string&)>& check_identity = {});

// A language model's text: cfg.data opened when it is a prepared folder (data/prepared.h),
// else the text file read (or the built-in corpus built) and tokenized the way `prepare`
// would.
RunData load_text_data(const RunConfig& cfg, const io::TokenizerSection* saved,
                       const std::function<void(const std::string&)>& check_identity);

}  // namespace train
