#include "train/multiple_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "data/data_error.h"
#include "nn/head.h"
#include "train/world.h"

namespace train {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::vector<int64_t> encode_field(const data::Tokenizer& tokenizer, const std::string& text,
                                  const std::string& where, const std::string& field) {
  try {
    return tokenizer.encode(text);
  } catch (const std::exception& e) {  // a character outside a char vocabulary, say
    throw data::DataError(fmt::format("{}'{}': {}", where, field, e.what()));
  }
}

// The log-probability of `target` under the logits z[0, V), in double.
double log_probability(const float* z, int64_t V, int64_t target) {
  const float top = *std::max_element(z, z + V);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(z[v]) - top);
  return static_cast<double>(z[target]) - top - std::log(sum);
}

// Endings [first, last) of an item as the rows of one forward: the context and each ending
// but its last token (right-padded with id 0, which causal attention never lets an earlier
// position see); each ending's log-likelihood into s.
void score_rows(const nn::GPT& model, const ChoiceTokens& item, size_t first, size_t last,
                ChoiceScores& s) {
  const auto c = static_cast<int64_t>(item.context.size());
  int64_t longest = 0;
  for (size_t j = first; j < last; ++j)
    longest = std::max(longest, static_cast<int64_t>(item.endings[j].size()));
  const int64_t L = c + longest - 1, rows = static_cast<int64_t>(last - first);
  std::vector<int64_t> ids(static_cast<size_t>(rows * L), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const auto& ending = item.endings[first + static_cast<size_t>(r)];
    auto row = ids.begin() + r * L;
    std::copy(item.context.begin(), item.context.end(), row);
    std::copy(ending.begin(), ending.end() - 1, row + c);
  }
  ag::Tensor logits = model.forward(ag::from_vector(ids, {rows, L})).logits;
  if (logits.dtype() != ag::DType::Float32) logits = logits.to(ag::DType::Float32);
  logits = logits.contiguous();
  const float* z = logits.data<float>();
  const int64_t V = logits.size(2);
  for (int64_t r = 0; r < rows; ++r) {
    const auto& ending = item.endings[first + static_cast<size_t>(r)];
    double sum = 0;  // token t of the ending is predicted at position c + t - 1
    for (size_t t = 0; t < ending.size(); ++t)
      sum += log_probability(z + (r * L + c + static_cast<int64_t>(t) - 1) * V, V, ending[t]);
    s.log_likelihood[first + static_cast<size_t>(r)] = sum;
  }
}

void require_token_head(const nn::GPT& model) {
  if (!dynamic_cast<const nn::LMHead*>(&model.head()))
    throw data::DataError(
        "multiple-choice scoring needs a model that predicts tokens; this checkpoint's model "
        "has another head (a classifier's)");
}

int64_t window_of(const nn::GPT& model, const ChoiceOptions& o) {
  const int64_t T = model.config().context_length;
  if (o.context_length < 0 || o.context_length > T)
    throw std::invalid_argument(fmt::format(
        "the context length {} must be between 1 and the model's {}", o.context_length, T));
  return o.context_length > 0 ? o.context_length : T;
}

}  // namespace

ChoiceTokens tokenize_choice_item(const data::ChoiceItem& item, const data::Tokenizer& tokenizer,
                                  int64_t T, const std::string& name) {
  const std::string where = fmt::format("{}: line {}: ", name, item.line);
  size_t kept = item.context.size();
  while (kept > 0 && is_space(item.context[kept - 1])) --kept;
  if (kept == 0)
    throw data::DataError(fmt::format("{}'{}' is only whitespace", where, item.context_key));
  const std::string moved = item.context.substr(kept);  // the context's trailing whitespace
  ChoiceTokens t;
  t.label = item.label;
  t.context = encode_field(tokenizer, item.context.substr(0, kept), where, item.context_key);
  size_t longest = 0;
  for (size_t i = 0; i < item.endings.size(); ++i) {
    const std::string& ending = item.endings[i];
    const std::string field = fmt::format("{}[{}]", item.endings_key, i);
    const std::string continuation = !moved.empty()        ? moved + ending
                                     : is_space(ending[0]) ? ending
                                                           : " " + ending;
    t.endings.push_back(encode_field(tokenizer, continuation, where, field));
    const auto n = static_cast<int64_t>(t.endings.back().size());
    if (n > T)
      throw data::DataError(fmt::format(
          "{}'{}' is {} tokens: with one token of context before it, more than the context "
          "length {}",
          where, field, n, T));
    longest = std::max(longest, t.endings.back().size());
  }
  const auto room = static_cast<size_t>(T + 1) - longest;  // context tokens that fit
  if (t.context.size() > room) {
    t.dropped = static_cast<int64_t>(t.context.size() - room);
    t.context.erase(t.context.begin(), t.context.begin() + t.dropped);
  }
  return t;
}

int64_t first_max(std::span<const double> values) {
  return std::max_element(values.begin(), values.end()) - values.begin();  // the first largest
}

ChoiceScores score_choice_item(nn::GPT& model, const ChoiceTokens& item) {
  const nn::InferenceScope inference;  // dropout off, whatever mode the model is in
  ag::NoGradGuard no_grad;
  const size_t k = item.endings.size();
  ChoiceScores s;
  s.log_likelihood.assign(k, 0.0);
  const auto c = static_cast<int64_t>(item.context.size());
  for (size_t first = 0, last = 0; first < k; first = last) {
    // as many rows as fit kChoicePositions positions, at least one
    int64_t longest = static_cast<int64_t>(item.endings[first].size());
    for (last = first + 1; last < k; ++last) {
      const int64_t wider = std::max(longest, static_cast<int64_t>(item.endings[last].size()));
      if (static_cast<int64_t>(last - first + 1) * (c + wider - 1) > kChoicePositions) break;
      longest = wider;
    }
    score_rows(model, item, first, last, s);
  }
  std::vector<double> mean(k);
  for (size_t j = 0; j < k; ++j) {
    s.tokens.push_back(static_cast<int64_t>(item.endings[j].size()));
    mean[j] = s.log_likelihood[j] / static_cast<double>(s.tokens[j]);
  }
  s.pick = first_max(s.log_likelihood);
  s.pick_norm = first_max(mean);
  return s;
}

double sample_stderr(double p, int64_t n) {
  if (n < 2) return NAN;
  return std::sqrt(p * (1 - p) / static_cast<double>(n - 1));
}

void ChoiceTally::add(const ChoiceTokens& item, const ChoiceScores& scores) {
  ++n;
  correct += scores.pick == item.label;
  correct_norm += scores.pick_norm == item.label;
  truncated += item.dropped > 0;
  guess += 1.0 / static_cast<double>(item.endings.size());
}

int64_t check_choice_file(const nn::GPT& model, const data::Tokenizer& tokenizer,
                          const std::string& path, const ChoiceOptions& o) {
  require_token_head(model);
  const int64_t T = window_of(model, o);
  data::ChoiceReader reader(path);
  int64_t n = 0;
  for (; o.limit == 0 || n < o.limit; ++n) {
    const auto item = reader.next();
    if (!item) break;
    tokenize_choice_item(*item, tokenizer, T, reader.name());
  }
  if (n == 0)
    throw data::DataError(fmt::format("{}: no items (no line that is not blank)", reader.name()));
  return n;
}

ChoiceTally score_choice_file(nn::GPT& model, const data::Tokenizer& tokenizer,
                              const std::string& path, const ChoiceOptions& o) {
  require_token_head(model);
  const int64_t T = window_of(model, o);
  const World& world = World::current();
  const int ranks = world.distributed() ? world.size() : 1;
  const int rank = ranks > 1 ? world.rank() : 0;
  data::ChoiceReader reader(path);
  ChoiceTally tally;
  double guess = 0;  // over every item, in file order on every rank: the same bits
  for (int64_t i = 0; o.limit == 0 || i < o.limit; ++i) {
    const auto item = reader.next();
    if (!item) break;
    guess += 1.0 / static_cast<double>(item->endings.size());
    if (i % ranks != rank) continue;
    const ChoiceTokens tokens = tokenize_choice_item(*item, tokenizer, T, reader.name());
    tally.add(tokens, score_choice_item(model, tokens));
  }
  if (ranks > 1) {  // counts are whole numbers: their sum is exact in any order
    const std::vector<double> all = world.all_gather(
        {static_cast<double>(tally.n), static_cast<double>(tally.correct),
         static_cast<double>(tally.correct_norm), static_cast<double>(tally.truncated)});
    tally = ChoiceTally{};
    for (size_t r = 0; r < all.size(); r += 4) {
      tally.n += static_cast<int64_t>(all[r]);
      tally.correct += static_cast<int64_t>(all[r + 1]);
      tally.correct_norm += static_cast<int64_t>(all[r + 2]);
      tally.truncated += static_cast<int64_t>(all[r + 3]);
    }
  }
  tally.guess = guess;
  return tally;
}

}  // namespace train
