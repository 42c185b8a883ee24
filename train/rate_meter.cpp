#include "train/rate_meter.h"

namespace train {

void RateMeter::tick(int64_t step, int64_t tokens, double seconds) {
  if (++ticks_ <= kWarmupSteps) window_.clear();  // the warm-up's end starts the window
  window_.push_back({step, tokens, seconds});
  while (window_.size() > kWindowSteps + 1) window_.pop_front();
}

std::optional<double> RateMeter::seconds_per_step() const {
  if (window_.size() < 2 || window_.back().step <= window_.front().step) return std::nullopt;
  return (window_.back().seconds - window_.front().seconds) /
         static_cast<double>(window_.back().step - window_.front().step);
}

std::optional<double> RateMeter::tokens_per_second() const {
  if (window_.size() < 2) return std::nullopt;
  const double seconds = window_.back().seconds - window_.front().seconds;
  if (!(seconds > 0)) return std::nullopt;
  return static_cast<double>(window_.back().tokens - window_.front().tokens) / seconds;
}

std::optional<double> RateMeter::eta(int64_t step, int64_t last) const {
  const auto per_step = seconds_per_step();
  if (!per_step) return std::nullopt;
  return *per_step * static_cast<double>(last > step ? last - step : 0);
}

}  // namespace train
