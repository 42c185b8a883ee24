#pragma once
// Fine-tuning data: a task file's records as examples (token ids and what they are trained
// to give), split into train and validation, drawn into padded batches. Two tasks make
// them (docs/finetuning.md):
//   classify  a TSV/CSV of text and label: one label per example (classification_data.cpp)
//   instruct  JSON/JSONL instruction records in a prompt template: a target per token, the
//             prompt's masked (instruction_data.cpp)
//   chat      JSONL conversations in a chat format: a target per token, all but the
//             assistant's replies masked (chat_data.cpp)
//
//   data::TaskOptions o;  o.context_length = 256;
//   data::TaskExamples all = data::read_classification_examples(path, tokenizer, o);
//   data::ExampleSplit split = data::split_examples(std::move(all.examples), 0.1, seed);
//   data::ExampleSampler sampler(&split.train, 8, /*pad=*/0);
//   data::ExampleBatch b = sampler.next(gen);   // b.x [B, L], b.y, b.lengths [B]
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/tensor.h"
#include "data/chat_format.h"
#include "data/tokenizer.h"

namespace data {

// A target the loss skips (ag::cross_entropy's ignore_index): prompt tokens and padding.
inline constexpr int64_t kIgnoreTarget = -100;

struct Example {
  std::vector<int64_t> ids;      // at most the context length
  std::vector<int64_t> targets;  // instruct: one per id (the next token, or kIgnoreTarget)
  int64_t label = -1;            // classify: the label's index (targets empty)
  int64_t line = 0;              // where the record starts in its file (1-based)
};

// How a task file becomes examples.
struct TaskOptions {
  int64_t context_length = 0;
  bool truncate = true;  // false: a record longer than the context is an error naming it
  // classify: the labels a checkpoint knows (an unknown one is an error naming its line);
  // empty: collected from the file and sorted
  std::vector<std::string> labels;
  std::string prompt_template;                  // instruct: the template's text; empty: Alpaca's
  int64_t end_of_text = -1;                     // instruct: the id appended after each response
  ChatFormat chat_format = ChatFormat::chatml;  // chat: how a conversation is written
};

struct TaskExamples {
  std::vector<Example> examples;    // in file order
  std::vector<std::string> labels;  // classify: index -> label
  int64_t truncated = 0;            // records cut to the context
  std::string layout;               // classify: which column is the text, which the label, why
};

// Each reads, tokenizes and checks every record of a task file; bad input is a
// data::DataError naming file, line and field. Its corpus_text is every text the examples
// of that file encode, joined: what a tokenizer learned from scratch (char, byte, bpe) must
// cover. (train/tasks/ chooses the reader by the run's task.)
TaskExamples read_classification_examples(const std::string& path, const Tokenizer& tokenizer,
                                          const TaskOptions& o);
std::string classification_corpus_text(const std::string& path);
TaskExamples read_instruction_examples(const std::string& path, const Tokenizer& tokenizer,
                                       const TaskOptions& o);
std::string instruction_corpus_text(const std::string& path, const TaskOptions& o);
TaskExamples read_chat_examples(const std::string& path, const Tokenizer& tokenizer,
                                const TaskOptions& o);
std::string chat_corpus_text(const std::string& path, const TaskOptions& o);

// A conversation's ids as an example: ids up to its last trained one (chat_format.h's
// `trained` flags), cut to the context; a position's target is the next id when that id is
// trained, else kIgnoreTarget. *truncated: whether the cut lost a trained id's target.
Example chat_example(std::span<const int64_t> ids, const std::vector<bool>& trained,
                     int64_t context_length, bool* truncated = nullptr);

// The id that ends a response: the tokenizer's <|endoftext|> when it has one, else one past
// its vocabulary (an instruction model then has vocab_size + 1 rows).
int64_t end_of_text_id(const Tokenizer& tokenizer);

// A fixed share of the examples held out, chosen by a seeded shuffle (task files are
// often sorted by label); each split keeps file order. With val_fraction > 0 and at least
// two examples, each side gets at least one.
struct ExampleSplit {
  std::vector<Example> train, val;
};
ExampleSplit split_examples(std::vector<Example> all, double val_fraction, uint64_t seed);

// Examples side by side, padded on the right to the longest: x [B, L] int64 ids, y the
// targets ([B, L], kIgnoreTarget on padding) or labels ([B]), lengths [B] int64 (the real
// tokens of each row: causal attention keeps padding out of them).
struct ExampleBatch {
  ag::Tensor x, y, lengths;
  int64_t targets = 0;  // targets the loss counts (labels for classify)
  int64_t tokens = 0;   // the real ids of x: the lengths' sum, padding not counted
};
ExampleBatch make_batch(std::span<const Example* const> rows, int64_t pad);

// batch_size examples drawn at random (with replacement) from the generator, as
// BatchSampler draws windows: one generator state reproduces every batch.
class ExampleSampler {
 public:
  ExampleSampler(const std::vector<Example>* examples, int64_t batch_size, int64_t pad);
  ExampleBatch next(ag::Generator& gen) const;
  void skip(ag::Generator& gen) const;  // advances gen as next() would

 private:
  const std::vector<Example>* examples_;
  int64_t batch_, pad_;
};

}  // namespace data
