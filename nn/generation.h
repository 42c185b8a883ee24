#pragma once
// Text generation from a GPT: N continuations of one prompt, side by side, each token
// handed to a callback as soon as it is chosen.
//
//   nn::GenerationOptions o;
//   o.max_new_tokens = 500;  o.num_samples = 2;  o.sampling.temperature = 0.8;  o.seed = 1;
//   nn::GenerationStats st = nn::generate(model, prompt, o, [&](int64_t sample, int64_t id) {
//     out[sample].push_back(id);
//     return true;                       // false ends this sample
//   });
//
// The window. Positions are learned and absolute, so the model sees at most
// context_length (T) tokens. Token n (0-based, counting the prompt) is predicted from the
// window [window_start(n), n): all of the text while it fits, and past that a window
// that moves `slide` tokens at a time, so that it always holds between T - slide + 1 and
// T tokens. slide 1 is the window of the last T tokens for every token.
//
// The two paths compute the same windows:
//   use_cache (default)  nn::CachedInference: the prompt's window is prefilled once, then each
//                        token is one position through every layer; when the window moves
//                        the cache is rebuilt by prefilling the new window (once every
//                        `slide` tokens; logits equal the full forward of that window).
//   !use_cache           GPT::forward on the whole window for every token: the reference
//                        the cached path is checked against (`sample --no-cache`).
// Both choose with the same TokenSampler from logits equal to float32 rounding, so they
// give the same tokens (tests/test_generation.cpp).
//
// Randomness: sample b draws from its own generator, ag::Generator(seed) for sample 0 and
// ag::Generator::substream(seed, b) for the others, so a sample's text does not depend on
// how many are drawn beside it. GenerationOptions::generator replaces sample 0's.
//
// This is the one generation loop: `attograd sample`, the sample at the end of `train`,
// the report's sample and GPT::generate all run it, so their windows are the same.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "nn/gpt.h"
#include "nn/inference.h"
#include "nn/sampling.h"

namespace nn {

struct GenerationOptions {
  int64_t max_new_tokens = 200;  // per sample
  int64_t num_samples = 1;
  SamplingOptions sampling;
  uint64_t seed = 0;
  bool use_cache = true;
  int64_t slide = 0;         // tokens the window moves past the context; 0: default_slide()
  double max_seconds = 0.0;  // stop every sample after this long; 0: no limit
  // How the cached path's steps read the weights (inference.h); bf16 needs a model whose
  // matrices hold bfloat16 values (round_weights_to_bfloat16), which the full-window path
  // then runs as they are.
  WeightFormat weights = WeightFormat::fp32;
  // When set, sample 0 draws from this generator (advancing it) instead of one seeded
  // with `seed` (GPT::generate's callers hand theirs in).
  ag::Generator* generator = nullptr;
  // Throws std::invalid_argument naming the first bad value.
  void validate(const GPTConfig& cfg) const;
};

// Half the context, at least 1 (llama.cpp's context shift also drops half): a rebuild
// every T/2 tokens costs a prefill of T/2 + 1 positions, about one position per token,
// and every token still sees at least T/2 + 1 tokens. With T/4 the prefills cost three
// positions per token, as much again as the steps on the base config.
int64_t default_slide(int64_t context_length);
// The first token of the window that predicts token n (n >= 1).
int64_t window_start(int64_t n, int64_t context_length, int64_t slide);
// The longest window a generation of max_new_tokens >= 1 from a prompt of prompt_tokens
// runs: the prompt (its last context_length tokens) and every new token but the last,
// at most context_length. The cached path's decoder holds this many positions.
int64_t longest_window(int64_t prompt_tokens, int64_t max_new_tokens, int64_t context_length);

// The bytes generate() allocates for `options` and a prompt of prompt_tokens on `threads`
// OpenMP threads, computed without allocating: the cached path's decoder
// (CachedInference::memory_bytes over the longest window), or the full-window path's forward (its
// logits, the MLP's hidden rows and a dozen model-width rows per position of every
// sample), and every sample's token history and sampler. In double and saturated
// (INT64_MAX), so that an absurd count gives an absurd size, never an overflowed one.
int64_t generation_memory_bytes(const GPTConfig& cfg, int64_t prompt_tokens,
                                const GenerationOptions& options, int threads);

struct GenerationStats {
  int64_t prompt_tokens = 0;                // the prompt's window, prefilled once
  int64_t new_tokens = 0;                   // tokens handed to the callback, over all samples
  int64_t rebuilds = 0;                     // window moves (a prefill each with the cache)
  double prefill_seconds = 0, seconds = 0;  // the prompt's prefill; everything
  int64_t steps = 0;        // the cache's steps (each reads the weight matrices once)
  double step_seconds = 0;  // their time
  bool timed_out = false;   // max_seconds ended it
};

// Called with (sample, token id) for each new token, samples in order within a step;
// returning false ends that sample (it gets no more tokens).
using TokenCallback = std::function<bool(int64_t sample, int64_t id)>;

// prompt: at least one id. Runs as an inference (no graph, dropout off) whatever mode the
// model is in.
GenerationStats generate(const GPT& model, std::span<const int64_t> prompt,
                         const GenerationOptions& options, const TokenCallback& on_token);

// Every sample's new tokens (tests and small tools).
std::vector<std::vector<int64_t>> generate_tokens(const GPT& model, std::span<const int64_t> prompt,
                                                  const GenerationOptions& options);

}  // namespace nn
