#pragma once
// Multiple-choice evaluation (HellaSwag and the like), scored as llm.c's hellaswag.py and
// lm-eval-harness score them: the context's tokens, then each ending's tokens as its
// continuation; an ending's score is the sum of its tokens' log-likelihoods given the
// context and the ending's earlier tokens. `acc` counts the items whose true ending has
// the highest sum, `acc_norm` those whose true ending has the highest mean per token
// (llm.c's length normalisation; lm-eval-harness divides by the ending's bytes instead).
// Ties go to the first ending.
//
//   data::ChoiceReader file(...) items (data/choice_items.h) ->
//   tokenize_choice_item -> score_choice_item -> ChoiceTally
//
//   train::ChoiceOptions o;  o.limit = 100;
//   train::check_choice_file(model, tok, "hellaswag_val.jsonl", o);   // every line, no scoring
//   train::ChoiceTally t = train::score_choice_file(model, tok, "hellaswag_val.jsonl", o);
//   fmt::print("acc {} +- {}\n", t.acc(), t.acc_stderr());
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/choice_items.h"
#include "data/tokenizer.h"
#include "nn/gpt.h"

namespace train {

// An item as token ids. The text is cut as lm-eval-harness cuts it, for every tokenizer:
// the context's trailing whitespace moves to the front of each continuation, and a
// continuation that starts without whitespace gets one space (" " + ending, as llm.c and
// lm-eval-harness give GPT-2); the context and each continuation are encoded apart. When
// the context and the longest ending do not fit the window (T tokens of input, so T + 1
// ids), the context's oldest tokens are dropped, the same for every ending; an ending of
// more than T tokens (no room for one token of context) is an error naming its line.
struct ChoiceTokens {
  std::vector<int64_t> context;
  std::vector<std::vector<int64_t>> endings;
  int64_t label = 0;
  int64_t dropped = 0;  // context tokens dropped to fit
};
// `name` names the file in messages (DataError "NAME: line N: 'FIELD' ...").
ChoiceTokens tokenize_choice_item(const data::ChoiceItem& item, const data::Tokenizer& tokenizer,
                                  int64_t T, const std::string& name);

// The index of the largest value, the first of equal ones.
int64_t first_max(std::span<const double> values);

struct ChoiceScores {
  std::vector<double> log_likelihood;  // per ending: the sum over its tokens, in nats
  std::vector<int64_t> tokens;         // per ending
  int64_t pick = 0, pick_norm = 0;     // first_max of the sums, of the means per token
};
// One item: its endings as padded rows of one forward (several forwards when the rows
// hold more than kChoicePositions positions), dropout off, no graph recorded. The rows
// and their batches depend on the item alone, so an item's scores are the same bits
// wherever it is scored.
inline constexpr int64_t kChoicePositions = 4096;
ChoiceScores score_choice_item(nn::GPT& model, const ChoiceTokens& item);

// The sample standard error of the mean of n values that are 0 or 1 with mean p, as
// lm-eval-harness computes it: sqrt(p (1 - p) / (n - 1)); NaN for fewer than 2 values.
double sample_stderr(double p, int64_t n);

struct ChoiceTally {
  int64_t n = 0, correct = 0, correct_norm = 0;
  int64_t truncated = 0;  // items whose context lost tokens to fit the window
  double guess = 0;       // the sum over items of 1 / endings: what guessing gets right
  void add(const ChoiceTokens& item, const ChoiceScores& scores);
  double acc() const { return n ? static_cast<double>(correct) / static_cast<double>(n) : NAN; }
  double acc_norm() const {
    return n ? static_cast<double>(correct_norm) / static_cast<double>(n) : NAN;
  }
  double acc_stderr() const { return sample_stderr(acc(), n); }
  double acc_norm_stderr() const { return sample_stderr(acc_norm(), n); }
  double chance() const { return n ? guess / static_cast<double>(n) : NAN; }
};

struct ChoiceOptions {
  int64_t limit = 0;           // the first `limit` items (0: all)
  int64_t context_length = 0;  // the window T (0: the model's)
};

// Reads and tokenizes every item (the first o.limit) without scoring any, so a bad line
// anywhere fails before the work: a DataError naming file, line and field (also: a file
// without items, a model whose head does not predict tokens). Returns the item count.
int64_t check_choice_file(const nn::GPT& model, const data::Tokenizer& tokenizer,
                          const std::string& path, const ChoiceOptions& o);

// Scores the items, a line at a time (memory does not grow with the file). Under mpirun
// item i is scored by rank i % size and the counts are gathered: the tally is the one of a
// single process, on every rank.
ChoiceTally score_choice_file(nn::GPT& model, const data::Tokenizer& tokenizer,
                              const std::string& path, const ChoiceOptions& o);

}  // namespace train
