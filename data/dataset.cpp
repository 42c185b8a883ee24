#include "data/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace data {

namespace {

// Inputs ids[s, s + T) into x and targets ids[s + 1, s + T + 1) into y, from one read of
// the T + 1 ids (one pread for a file store).
void copy_window(const TokenStore& ids, int64_t s, int64_t T, int64_t* x, int64_t* y) {
  thread_local std::vector<int64_t> window;
  window.resize(static_cast<size_t>(T) + 1);
  ids.copy(static_cast<size_t>(s), window.size(), window.data());
  std::copy(window.begin(), window.end() - 1, x);
  std::copy(window.begin() + 1, window.end(), y);
}

}  // namespace

Split split_tokens(const std::vector<int64_t>& ids, double val_fraction) {
  return split_tokens(std::vector<int64_t>(ids), val_fraction);
}

Split split_tokens(std::vector<int64_t>&& ids, double val_fraction) {
  if (!(val_fraction >= 0 && val_fraction < 1))
    throw std::invalid_argument(
        fmt::format("val_fraction must be in [0, 1), got {}", val_fraction));
  const size_t n_val = static_cast<size_t>(std::floor(ids.size() * val_fraction));
  const size_t n_train = ids.size() - n_val;
  Split split;
  split.val.assign(ids.begin() + n_train, ids.end());
  ids.resize(n_train);
  split.train = std::move(ids);  // the ids' own storage: no second copy of the corpus
  return split;
}

BatchSampler::BatchSampler(const std::vector<int64_t>* ids, int64_t batch_size, int64_t T)
    : ids_(ids), batch_(batch_size), T_(T) {
  if (batch_size <= 0 || T <= 0)
    throw std::invalid_argument(
        fmt::format("batch size {} and context length {} must be positive", batch_size, T));
  if (static_cast<int64_t>(ids->size()) < T + 1)
    throw std::invalid_argument(
        fmt::format("{} tokens cannot fill one window of {} + 1", ids->size(), T));
}

BatchSampler::BatchSampler(const TokenStore* ids, int64_t batch_size, int64_t T)
    : store_(ids), batch_(batch_size), T_(T) {
  if (batch_size <= 0 || T <= 0)
    throw std::invalid_argument(
        fmt::format("batch size {} and context length {} must be positive", batch_size, T));
  if (static_cast<int64_t>(ids->size()) < T + 1)
    throw std::invalid_argument(
        fmt::format("{}: {} tokens cannot fill one window of {} + 1", ids->name(), ids->size(), T));
}

std::pair<ag::Tensor, ag::Tensor> BatchSampler::next(ag::Generator& gen) const {
  ag::Tensor x = ag::empty({batch_, T_}, ag::DType::Int64),
             y = ag::empty({batch_, T_}, ag::DType::Int64);
  int64_t* xp = x.data<int64_t>();
  int64_t* yp = y.data<int64_t>();
  const uint64_t starts = size() - T_;  // s in [0, n - T - 1]
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t s = static_cast<int64_t>(gen.next_u64() % starts);
    if (store_) {
      copy_window(*store_, s, T_, xp + b * T_, yp + b * T_);
      continue;
    }
    for (int64_t t = 0; t < T_; ++t) {
      xp[b * T_ + t] = (*ids_)[s + t];
      yp[b * T_ + t] = (*ids_)[s + t + 1];
    }
  }
  return {x, y};
}

void BatchSampler::skip(ag::Generator& gen) const {
  for (int64_t b = 0; b < batch_; ++b) gen.next_u64();  // one draw per row, as next()
}

std::vector<std::pair<int64_t, int64_t>> eval_windows(size_t n_ids, int64_t T) {
  std::vector<std::pair<int64_t, int64_t>> w;
  if (T <= 0) return w;
  for (int64_t s = 0; s + T + 1 <= static_cast<int64_t>(n_ids); s += T) w.emplace_back(s, T);
  return w;
}

EvalWindows::EvalWindows(size_t n_ids, int64_t T) : T_(T) {
  if (T > 0 && n_ids >= static_cast<size_t>(T) + 1) count_ = static_cast<int64_t>((n_ids - 1) / T);
}

void EvalWindows::copy(const TokenStore& ids, int64_t first, int64_t n, int64_t* x,
                       int64_t* y) const {
  if (first < 0 || n < 0 || first > count_ || n > count_ - first)
    throw std::out_of_range(fmt::format("evaluation windows [{}, {}) of {}: there are {}", first,
                                        first + n, ids.name(), count_));
  for (int64_t b = 0; b < n; ++b) {
    const int64_t s = (first + b) * T_;
    copy_window(ids, s, T_, x + b * T_, y + b * T_);
  }
}

std::pair<ag::Tensor, ag::Tensor> EvalWindows::batch(const TokenStore& ids, int64_t first,
                                                     int64_t n) const {
  ag::Tensor x = ag::empty({n, T_}, ag::DType::Int64), y = ag::empty({n, T_}, ag::DType::Int64);
  copy(ids, first, n, x.data<int64_t>(), y.data<int64_t>());
  return {x, y};
}

double unigram_loss(const std::vector<int64_t>& ids, int64_t vocab) {
  std::vector<double> count(vocab, 0);
  for (int64_t id : ids) count.at(id) += 1;
  double loss = 0;
  for (double c : count)
    if (c > 0) loss -= c * std::log(c / ids.size());
  return ids.empty() ? 0 : loss / ids.size();
}

// The add-one counts are kept sparse, as the sorted keys of train's pairs: a dense V x V table
// would be 20 GB at GPT-2's vocabulary. Every count is a whole number, exact in a double, so
// the loss is the same to the bit as the dense table's.
double bigram_loss(const std::vector<int64_t>& train, const std::vector<int64_t>& val,
                   int64_t vocab) {
  auto key = [vocab](int64_t first, int64_t second) {
    if (first < 0 || first >= vocab || second < 0 || second >= vocab)
      throw std::out_of_range(
          fmt::format("bigram ({}, {}) outside a vocabulary of {}", first, second, vocab));
    return first * vocab + second;
  };
  std::vector<int64_t> pairs;
  std::vector<double> row(vocab, static_cast<double>(vocab));  // add-one
  pairs.reserve(train.empty() ? 0 : train.size() - 1);
  for (size_t i = 0; i + 1 < train.size(); ++i) {
    pairs.push_back(key(train[i], train[i + 1]));
    row.at(train[i]) += 1;
  }
  std::sort(pairs.begin(), pairs.end());
  double loss = 0;
  for (size_t i = 0; i + 1 < val.size(); ++i) {
    const auto [lo, hi] = std::equal_range(pairs.begin(), pairs.end(), key(val[i], val[i + 1]));
    loss -= std::log((1.0 + static_cast<double>(hi - lo)) / row.at(val[i]));
  }
  return val.size() < 2 ? 0 : loss / (val.size() - 1);
}

}  // namespace data
