#include "optim/schedule.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace optim {

WarmupCosineLR::WarmupCosineLR(double base_lr, double min_lr, int64_t warmup_steps,
                               int64_t total_steps)
    : base_(base_lr), min_(min_lr), warmup_(warmup_steps), total_(total_steps) {
  if (!(base_lr > 0) || !(min_lr >= 0) || min_lr > base_lr)
    throw std::invalid_argument(
        fmt::format("schedule: need 0 <= min_lr ({}) <= lr ({}), lr > 0", min_lr, base_lr));
  if (warmup_steps < 0 || total_steps < 0)
    throw std::invalid_argument("schedule: warmup and total steps must be >= 0");
}

double WarmupCosineLR::lr_at(int64_t step) const {
  if (warmup_ > 0 && step <= warmup_)
    return base_ * static_cast<double>(step) / static_cast<double>(warmup_);
  if (step >= total_) return total_ <= warmup_ ? base_ : min_;
  const double progress =
      static_cast<double>(step - warmup_) / static_cast<double>(total_ - warmup_);
  return min_ + 0.5 * (base_ - min_) * (1 + std::cos(M_PI * progress));
}

nlohmann::json WarmupCosineLR::to_json() const {
  return {{"type", "warmup_cosine"},
          {"lr", base_},
          {"min_lr", min_},
          {"warmup_steps", warmup_},
          {"total_steps", total_}};
}

StepLR::StepLR(double base_lr, int64_t step_size, double gamma)
    : base_(base_lr), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0)
    throw std::invalid_argument(
        fmt::format("StepLR: step_size must be positive, got {}", step_size));
}

double StepLR::lr_at(int64_t step) const {
  return base_ *
         std::pow(gamma_, static_cast<double>((std::max<int64_t>(step, 1) - 1) / step_size_));
}

nlohmann::json StepLR::to_json() const {
  return {{"type", "step"}, {"lr", base_}, {"step_size", step_size_}, {"gamma", gamma_}};
}

std::unique_ptr<LRSchedule> schedule_from_json(const nlohmann::json& j) {
  const std::string type = j.value("type", "");
  if (type == "constant") return std::make_unique<ConstantLR>(j.at("lr").get<double>());
  if (type == "warmup_cosine")
    return std::make_unique<WarmupCosineLR>(j.at("lr").get<double>(), j.at("min_lr").get<double>(),
                                            j.at("warmup_steps").get<int64_t>(),
                                            j.at("total_steps").get<int64_t>());
  if (type == "step")
    return std::make_unique<StepLR>(j.at("lr").get<double>(), j.at("step_size").get<int64_t>(),
                                    j.at("gamma").get<double>());
  throw std::invalid_argument(fmt::format("unknown schedule type '{}'", type));
}

}  // namespace optim
