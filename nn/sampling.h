#pragma once
// Choosing the next token from a model's logits: greedy, or one draw from the softmax after
// temperature, top-k and top-p (nucleus) filtering, in that order.
//
//   nn::SamplingOptions o;  o.temperature = 0.8;  o.top_k = 40;  o.top_p = 0.95;
//   nn::TokenSampler sampler(vocab_size, o);   // scratch for vocab_size logits, kept
//   int64_t next = sampler.choose(logits, gen); // logits: vocab_size floats
//
// choose() allocates nothing (its buffers are sized once), draws one uniform from `gen`
// unless greedy, and depends only on the logits' values, so two paths that compute the
// same logits (the cached decoder and the full forward) choose the same tokens.
#include <cstdint>
#include <span>
#include <vector>

#include "autograd/generator.h"

namespace nn {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (the first largest logit, no draw)
  int64_t top_k = 0;         // keep the k largest logits (ties with the k-th kept); 0: all
  double top_p = 1.0;        // then the smallest set of likeliest tokens whose probability
                             // reaches top_p (ties broken by the lower id); 1: all
  // Throws std::invalid_argument naming the first bad value (temperature >= 0 and
  // finite, top_k >= 0, top_p in (0, 1]).
  void validate() const;
};

class TokenSampler {
 public:
  TokenSampler(int64_t vocab_size, SamplingOptions options);
  int64_t choose(std::span<const float> logits, ag::Generator& gen);
  int64_t choose(std::span<const double> logits, ag::Generator& gen);
  const SamplingOptions& options() const { return options_; }

 private:
  int64_t choose_scaled(ag::Generator& gen);  // from weights_ holding the logits
  void keep_top_k();
  double keep_top_p(double total);
  std::vector<double> weights_, scratch_;
  std::vector<int64_t> order_;
  SamplingOptions options_;
};

}  // namespace nn
