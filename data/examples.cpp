#include "data/examples.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "data/data_error.h"
#include "data/gpt2_tokenizer.h"
#include "data/hf_bpe.h"

namespace data {

int64_t end_of_text_id(const Tokenizer& tokenizer) {
  if (const auto reserved = tokenizer.reserved_end_of_text()) return *reserved;
  if (const auto* gpt2 = dynamic_cast<const Gpt2Tokenizer*>(&tokenizer))
    if (const auto id = gpt2->special_id("<|endoftext|>")) return *id;
  if (const auto* hf = dynamic_cast<const HfBpeTokenizer*>(&tokenizer))
    for (const AddedToken& t : hf->spec().added)
      if (t.content == "<|endoftext|>") return t.id;
  return tokenizer.vocab_size();
}

ExampleSplit split_examples(std::vector<Example> all, double val_fraction, uint64_t seed) {
  const auto n = static_cast<int64_t>(all.size());
  int64_t n_val = static_cast<int64_t>(static_cast<double>(n) * val_fraction);
  if (val_fraction > 0 && n >= 2) n_val = std::clamp<int64_t>(n_val, 1, n - 1);
  // a Fisher-Yates shuffle of the indices, from the seed: the first n_val are held out
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  ag::Generator gen(seed);
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(order[static_cast<size_t>(i)], order[gen.next_u64() % static_cast<uint64_t>(i + 1)]);
  std::vector<bool> held_out(static_cast<size_t>(n), false);
  for (int64_t i = 0; i < n_val; ++i) held_out[static_cast<size_t>(order[i])] = true;
  ExampleSplit s;
  for (int64_t i = 0; i < n; ++i)
    (held_out[static_cast<size_t>(i)] ? s.val : s.train).push_back(std::move(all[i]));
  return s;
}

ExampleBatch make_batch(std::span<const Example* const> rows, int64_t pad) {
  const auto B = static_cast<int64_t>(rows.size());
  int64_t L = 1;
  for (const Example* e : rows) L = std::max<int64_t>(L, static_cast<int64_t>(e->ids.size()));
  const bool labels = !rows.empty() && rows.front()->targets.empty();
  std::vector<int64_t> x(static_cast<size_t>(B * L), pad), lengths(static_cast<size_t>(B));
  std::vector<int64_t> y(static_cast<size_t>(labels ? B : B * L), kIgnoreTarget);
  ExampleBatch b;
  for (int64_t r = 0; r < B; ++r) {
    const Example& e = *rows[static_cast<size_t>(r)];
    if (e.targets.empty() != labels)
      throw std::invalid_argument("make_batch: a batch mixes labelled and token-target examples");
    const auto n = static_cast<int64_t>(e.ids.size());
    lengths[static_cast<size_t>(r)] = n;
    b.tokens += n;
    std::copy(e.ids.begin(), e.ids.end(), x.begin() + r * L);
    if (labels) {
      y[static_cast<size_t>(r)] = e.label;
      ++b.targets;
      continue;
    }
    std::copy(e.targets.begin(), e.targets.end(), y.begin() + r * L);
    b.targets += std::count_if(e.targets.begin(), e.targets.end(),
                               [](int64_t t) { return t != kIgnoreTarget; });
  }
  b.x = ag::from_vector(x, {B, L});
  b.y = labels ? ag::from_vector(y, {B}) : ag::from_vector(y, {B, L});
  b.lengths = ag::from_vector(lengths, {B});
  return b;
}

ExampleSampler::ExampleSampler(const std::vector<Example>* examples, int64_t batch_size,
                               int64_t pad)
    : examples_(examples), batch_(batch_size), pad_(pad) {
  if (examples_->empty()) throw std::invalid_argument("ExampleSampler: no examples to draw from");
}

ExampleBatch ExampleSampler::next(ag::Generator& gen) const {
  std::vector<const Example*> rows(static_cast<size_t>(batch_));
  for (auto& row : rows) row = &(*examples_)[gen.next_u64() % examples_->size()];
  return make_batch(rows, pad_);
}

void ExampleSampler::skip(ag::Generator& gen) const {
  for (int64_t b = 0; b < batch_; ++b) gen.next_u64();  // one draw per row, as next()
}

}  // namespace data
