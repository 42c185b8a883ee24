#include "nn/generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

#include "nn/inference.h"

namespace nn {

void GenerationOptions::validate(const GPTConfig& cfg) const {
  auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
  if (max_new_tokens < 0) bad(fmt::format("max_new_tokens must be >= 0, got {}", max_new_tokens));
  if (num_samples < 1) bad(fmt::format("num_samples must be >= 1, got {}", num_samples));
  if (slide < 0 || slide > cfg.context_length)
    bad(fmt::format("slide must be between 1 and the context length {} (0: default), got {}",
                    cfg.context_length, slide));
  if (!(max_seconds >= 0.0 && std::isfinite(max_seconds)))
    bad(fmt::format("max_seconds must be >= 0 and finite, got {}", max_seconds));
  sampling.validate();
}

int64_t default_slide(int64_t context_length) {
  return std::max<int64_t>(1, context_length / 2);
}

int64_t window_start(int64_t n, int64_t context_length, int64_t slide) {
  if (n <= context_length) return 0;
  return (n - context_length + slide - 1) / slide * slide;
}

int64_t longest_window(int64_t prompt_tokens, int64_t max_new_tokens, int64_t context_length) {
  const int64_t kept = std::min(prompt_tokens, context_length);
  // the new tokens capped first: a count near INT64_MAX must not overflow the sum
  const int64_t more = std::clamp<int64_t>(max_new_tokens - 1, 0, context_length);
  return std::min(context_length, kept + more);
}

int64_t generation_memory_bytes(const GPTConfig& cfg, int64_t prompt_tokens,
                                const GenerationOptions& options, int threads) {
  const int64_t window = longest_window(prompt_tokens, options.max_new_tokens, cfg.context_length);
  const double B = static_cast<double>(options.num_samples),
               T = static_cast<double>(cfg.context_length), W = static_cast<double>(window),
               V = static_cast<double>(cfg.vocab_size), C = static_cast<double>(cfg.d_model);
  // History: 2T ids a sample, and the window's copy; the sampler's weights, scratch and order
  double bytes = B * 3 * T * sizeof(int64_t) + V * (2 * sizeof(double) + sizeof(int64_t));
  if (options.use_cache)
    bytes += static_cast<double>(
        CachedInference::memory_bytes(cfg, options.num_samples, threads, options.weights, window));
  else
    bytes += sizeof(float) * B *
             (V + W * (V + static_cast<double>(cfg.ff_width()) + 12 * C +
                       static_cast<double>(cfg.n_heads)));
  return bytes < 9e18 ? static_cast<int64_t>(bytes) : std::numeric_limits<int64_t>::max();
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Each row's latest tokens, enough for any window (the last T): a buffer of 2T per row,
// compacted when full, so that a generation of any length allocates nothing.
class History {
 public:
  History(int64_t rows, int64_t T, std::span<const int64_t> prompt)
      : rows_(rows), T_(T), cap_(2 * T), buf_(static_cast<size_t>(rows * 2 * T)) {
    const int64_t P = static_cast<int64_t>(prompt.size()), kept = std::min(P, T);
    first_ = P - kept;
    used_ = kept;
    for (int64_t r = 0; r < rows; ++r)
      std::copy(prompt.end() - kept, prompt.end(), buf_.begin() + r * cap_);
  }
  int64_t length() const { return first_ + used_; }
  int64_t last(int64_t row) const { return buf_[static_cast<size_t>(row * cap_ + used_ - 1)]; }
  void append(std::span<const int64_t> ids) {
    if (used_ == cap_) {  // keep the last T
      for (int64_t r = 0; r < rows_; ++r)
        std::copy_n(buf_.begin() + r * cap_ + cap_ - T_, T_, buf_.begin() + r * cap_);
      first_ += cap_ - T_;
      used_ = T_;
    }
    for (int64_t r = 0; r < rows_; ++r) buf_[static_cast<size_t>(r * cap_ + used_)] = ids[r];
    ++used_;
  }
  // Tokens [s, length()) of every row, [rows, length() - s] row-major.
  void window(int64_t s, std::vector<int64_t>& out) const {
    const int64_t w = length() - s, from = s - first_;
    out.resize(static_cast<size_t>(rows_ * w));  // capacity reserved: no allocation
    for (int64_t r = 0; r < rows_; ++r)
      std::copy_n(buf_.begin() + r * cap_ + from, w, out.begin() + r * w);
  }

 private:
  int64_t rows_, T_, cap_, first_ = 0, used_ = 0;
  std::vector<int64_t> buf_;
};

class Run {
 public:
  Run(const GPT& model, std::span<const int64_t> prompt, const GenerationOptions& o,
      const TokenCallback& on_token)
      : model_(model),
        o_(o),
        on_token_(on_token),
        T_(model.config().context_length),
        V_(model.config().vocab_size),
        B_(o.num_samples),
        slide_(o.slide > 0 ? o.slide : default_slide(T_)),
        history_(B_, T_, prompt),
        sampler_(V_, o.sampling),
        active_(static_cast<size_t>(B_), 1),
        ids_(static_cast<size_t>(B_)) {
    for (int64_t b = 0; b < B_; ++b)
      gens_.push_back(b == 0 ? ag::Generator(o.seed) : ag::Generator::substream(o.seed, b));
    if (o.generator) gens_[0] = *o.generator;
    window_.reserve(static_cast<size_t>(B_ * T_));
    if (o.use_cache)
      decoder_.emplace(model, B_, o.weights,
                       longest_window(static_cast<int64_t>(prompt.size()), o.max_new_tokens, T_));
    else
      full_logits_.resize(static_cast<size_t>(B_ * V_));
  }

  GenerationStats go() {
    const Clock::time_point t0 = Clock::now();
    int64_t s = window_start(history_.length(), T_, slide_);
    std::span<const float> logits = compute(s, true);
    st_.prompt_tokens = history_.length() - s;
    st_.prefill_seconds = seconds_since(t0);
    for (int64_t k = 0; k < o_.max_new_tokens; ++k) {
      if (o_.max_seconds > 0 && seconds_since(t0) >= o_.max_seconds) {
        st_.timed_out = true;
        break;
      }
      if (!choose_all(logits) || k + 1 == o_.max_new_tokens) break;
      const int64_t next = window_start(history_.length(), T_, slide_);
      const bool moved = next != s;
      st_.rebuilds += moved;
      s = next;
      logits = compute(s, moved);
    }
    st_.seconds = seconds_since(t0);
    if (o_.generator) *o_.generator = gens_[0];
    return st_;
  }

 private:
  // The logits [B, V] that predict the next token from the window [s, length()).
  std::span<const float> compute(int64_t s, bool window_moved) {
    if (decoder_ && !window_moved) {
      const Clock::time_point t0 = Clock::now();
      std::span<const float> logits = decoder_->step(ids_);
      ++st_.steps;
      st_.step_seconds += seconds_since(t0);
      return logits;
    }
    history_.window(s, window_);
    const int64_t w = history_.length() - s;
    if (decoder_) return decoder_->prefill(window_, w);
    ag::NoGradGuard no_grad;
    ag::Tensor logits = model_.forward(ag::from_vector(window_, {B_, w})).logits;
    ag::Tensor last = logits.select(1, w - 1).to(ag::DType::Float32).contiguous();
    std::copy_n(last.data<float>(), B_ * V_, full_logits_.begin());
    return full_logits_;
  }

  // Each active sample's next token, handed to the callback; finished rows repeat their
  // last token (their logits are computed and ignored). Whether any sample goes on.
  bool choose_all(std::span<const float> logits) {
    bool any = false;
    for (int64_t b = 0; b < B_; ++b) {
      const auto ub = static_cast<size_t>(b);
      if (!active_[ub]) {
        ids_[ub] = history_.last(b);
        continue;
      }
      ids_[ub] = sampler_.choose(
          logits.subspan(ub * static_cast<size_t>(V_), static_cast<size_t>(V_)), gens_[ub]);
      ++st_.new_tokens;
      active_[ub] = on_token_(b, ids_[ub]);
      any = any || active_[ub];
    }
    history_.append(ids_);
    return any;
  }

  const GPT& model_;
  const GenerationOptions& o_;
  const TokenCallback& on_token_;
  int64_t T_, V_, B_, slide_;
  History history_;
  TokenSampler sampler_;
  std::vector<ag::Generator> gens_;
  std::vector<char> active_;
  std::vector<int64_t> ids_, window_;
  std::optional<CachedInference> decoder_;
  std::vector<float> full_logits_;
  GenerationStats st_;
};

}  // namespace

GenerationStats generate(const GPT& model, std::span<const int64_t> prompt,
                         const GenerationOptions& options, const TokenCallback& on_token) {
  options.validate(model.config());
  if (prompt.empty()) throw std::invalid_argument("generate: the prompt must hold a token");
  if (options.max_new_tokens == 0) return GenerationStats{};
  InferenceScope inference;
  ag::NoGradGuard no_grad;
  Run run(model, prompt, options, on_token);
  return run.go();
}

std::vector<std::vector<int64_t>> generate_tokens(const GPT& model, std::span<const int64_t> prompt,
                                                  const GenerationOptions& options) {
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(options.num_samples));
  generate(model, prompt, options, [&](int64_t sample, int64_t id) {
    out[static_cast<size_t>(sample)].push_back(id);
    return true;
  });
  return out;
}

}  // namespace nn
