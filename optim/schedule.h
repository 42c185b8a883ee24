#pragma once
// Learning-rate schedules: pure functions of the step (counted from 1), so a checkpoint
// needs only their settings and the step count to continue them exactly.
#include <memory>
#include <nlohmann/json.hpp>

namespace optim {

class LRSchedule {
 public:
  virtual ~LRSchedule() = default;
  virtual double lr_at(int64_t step) const = 0;
  virtual nlohmann::json to_json() const = 0;
};

class ConstantLR : public LRSchedule {
 public:
  explicit ConstantLR(double lr) : lr_(lr) {}
  double lr_at(int64_t) const override { return lr_; }
  nlohmann::json to_json() const override { return {{"type", "constant"}, {"lr", lr_}}; }

 private:
  double lr_;
};

// base * step / warmup for step <= warmup; then cosine from base down to min_lr at
// total; min_lr beyond total.
class WarmupCosineLR : public LRSchedule {
 public:
  WarmupCosineLR(double base_lr, double min_lr, int64_t warmup_steps, int64_t total_steps);
  double lr_at(int64_t step) const override;
  nlohmann::json to_json() const override;

 private:
  double base_, min_;
  int64_t warmup_, total_;
};

// base * gamma^floor((step - 1) / step_size)
class StepLR : public LRSchedule {
 public:
  StepLR(double base_lr, int64_t step_size, double gamma);
  double lr_at(int64_t step) const override;
  nlohmann::json to_json() const override;

 private:
  double base_;
  int64_t step_size_;
  double gamma_;
};

std::unique_ptr<LRSchedule> schedule_from_json(const nlohmann::json& j);

}  // namespace optim
