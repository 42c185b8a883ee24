#include "train/validation_watch.h"

#include <fmt/format.h>

#include <cmath>

#include "train/reporter.h"

namespace train {

// A task watches its loss unless it says otherwise (task.h).
ValidationMetric Task::validation_metric() const {
  return {"val_loss", &StepFigures::val_loss, false};
}

ValidationWatch::ValidationWatch(ValidationMetric metric, int64_t patience)
    : metric_(metric), patience_(patience) {}

void ValidationWatch::restore(const io::Checkpoint& c) {
  if (!c.best_validation) return;
  if (c.best_validation->metric != metric_.name)
    throw io::CheckpointError(
        fmt::format("'{}': /best_validation watches {}, but this run's task watches {}", c.source,
                    c.best_validation->metric, metric_.name));
  best_ = c.best_validation;
}

void ValidationWatch::record(io::Checkpoint& c) const {
  c.best_validation = best_;
}

bool ValidationWatch::see(const StepFigures& f) {
  const double value = f.*metric_.field;
  if (std::isnan(value)) return false;
  const bool better =
      !best_ || (metric_.higher_is_better ? value > best_->value : value < best_->value);
  if (!better) {
    ++best_->evaluations_since;
    return false;
  }
  best_ = io::BestValidation{metric_.name, value, f.step, 0};
  return true;
}

std::string ValidationWatch::stop_reason() const {
  return fmt::format(
      "{} has not improved on {:.4f} (step {}) for {} evaluation{} (--early-stopping {})",
      metric_.name, best_->value, best_->step, best_->evaluations_since,
      best_->evaluations_since == 1 ? "" : "s", patience_);
}

}  // namespace train
