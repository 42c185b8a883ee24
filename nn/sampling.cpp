#include "nn/sampling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace nn {

void SamplingOptions::validate() const {
  if (!(temperature >= 0.0 && std::isfinite(temperature)))
    throw std::invalid_argument(
        fmt::format("temperature must be >= 0 and finite, got {}", temperature));
  if (top_k < 0) throw std::invalid_argument(fmt::format("top_k must be >= 0, got {}", top_k));
  if (!(top_p > 0.0 && top_p <= 1.0))
    throw std::invalid_argument(fmt::format("top_p must be in (0, 1], got {}", top_p));
}

TokenSampler::TokenSampler(int64_t vocab_size, SamplingOptions options)
    : weights_(static_cast<size_t>(vocab_size)),
      scratch_(static_cast<size_t>(vocab_size)),
      order_(static_cast<size_t>(vocab_size)),
      options_(options) {
  options_.validate();
}

int64_t TokenSampler::choose(std::span<const float> logits, ag::Generator& gen) {
  std::copy(logits.begin(), logits.end(), weights_.begin());
  return choose_scaled(gen);
}

int64_t TokenSampler::choose(std::span<const double> logits, ag::Generator& gen) {
  std::copy(logits.begin(), logits.end(), weights_.begin());
  return choose_scaled(gen);
}

// Logits below the k-th largest become -inf (weight 0 below).
void TokenSampler::keep_top_k() {
  const int64_t k = options_.top_k, V = static_cast<int64_t>(weights_.size());
  if (k <= 0 || k >= V) return;
  std::copy(weights_.begin(), weights_.end(), scratch_.begin());
  std::nth_element(scratch_.begin(), scratch_.begin() + (k - 1), scratch_.end(),
                   std::greater<double>());
  const double kth = scratch_[static_cast<size_t>(k - 1)];
  for (double& x : weights_)
    if (x < kth) x = -std::numeric_limits<double>::infinity();
}

// Zeroes every weight outside the smallest set of likeliest tokens whose weights reach
// top_p of `total`, and returns the kept total. The likeliest are found by sorting a
// prefix that grows until it is enough: a nucleus is usually far smaller than the
// vocabulary, and a BPE vocabulary is too large to sort for every token.
double TokenSampler::keep_top_p(double total) {
  const int64_t V = static_cast<int64_t>(weights_.size());
  const double target = options_.top_p * total;
  std::iota(order_.begin(), order_.end(), int64_t{0});
  auto likelier = [w = weights_.data()](int64_t a, int64_t b) {
    return w[a] > w[b] || (w[a] == w[b] && a < b);
  };
  int64_t sorted = std::min<int64_t>(V, 64), kept = 0;
  for (;;) {
    std::partial_sort(order_.begin(), order_.begin() + sorted, order_.end(), likelier);
    double sum = 0;
    kept = 0;
    while (kept < sorted && sum < target) sum += weights_[static_cast<size_t>(order_[kept++])];
    if (sum >= target || sorted == V) break;
    sorted = std::min(V, 4 * sorted);
  }
  for (int64_t i = kept; i < V; ++i) weights_[static_cast<size_t>(order_[i])] = 0.0;
  return std::accumulate(weights_.begin(), weights_.end(), 0.0);
}

int64_t TokenSampler::choose_scaled(ag::Generator& gen) {
  const int64_t V = static_cast<int64_t>(weights_.size());
  if (options_.temperature == 0.0)
    return std::max_element(weights_.begin(), weights_.end()) - weights_.begin();
  keep_top_k();
  const double m = *std::max_element(weights_.begin(), weights_.end());
  double total = 0;
  for (double& x : weights_) total += (x = std::exp((x - m) / options_.temperature));
  if (options_.top_p < 1.0) total = keep_top_p(total);
  double u = gen.uniform() * total;
  for (int64_t i = 0; i < V; ++i) {
    if (u < weights_[static_cast<size_t>(i)]) return i;
    u -= weights_[static_cast<size_t>(i)];
  }
  // rounding can leave u at the very end: the last token with any weight
  for (int64_t i = V - 1; i > 0; --i)
    if (weights_[static_cast<size_t>(i)] > 0) return i;
  return 0;
}

}  // namespace nn
