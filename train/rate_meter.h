#pragma once
// The speed of a run as it is now, for its tokens/s and ETA: steps and tokens per second
// over the last kWindowSteps steps, counted only once the session's first kWarmupSteps
// steps are behind it (a first step also pays for page faults, allocations and the GEMM
// kernels' choice: an ETA extrapolated from it was 13:48 for a run that took 3:00).
#include <cstdint>
#include <deque>
#include <optional>

namespace train {

class RateMeter {
 public:
  static constexpr int64_t kWarmupSteps = 2;
  static constexpr size_t kWindowSteps = 50;

  // A step of the session ended `seconds` after the session began, the session having
  // trained `tokens` tokens by then.
  void tick(int64_t step, int64_t tokens, double seconds);
  // Unknown (nullopt) until two steps after the warm-up have ended.
  std::optional<double> seconds_per_step() const;
  std::optional<double> tokens_per_second() const;
  // Seconds until step `last`, at the current rate.
  std::optional<double> eta(int64_t step, int64_t last) const;

 private:
  struct Tick {
    int64_t step, tokens;
    double seconds;
  };
  int64_t ticks_ = 0;
  std::deque<Tick> window_;  // the warm-up's last step first, then up to kWindowSteps more
};

}  // namespace train
