#pragma once
// What --early-stopping and --keep-best watch: the task's validation metric at each
// evaluation (task.h: a language model's loss, lower is better; a classifier's accuracy,
// higher is better), the best value so far, its step, and the evaluations since that did
// not improve on it. A checkpoint keeps that state (/best_validation), so a resumed run
// decides as the uninterrupted one would.
//
//   ValidationWatch watch(cfg.task->validation_metric(), cfg.early_stopping);
//   if (resumed) watch.restore(*resumed);        // the checkpoint's best, if it has one
//   if (watch.see(figures)) save_best();         // at each evaluation: a new best?
//   if (watch.patience_spent()) stop(watch.stop_reason());
#include <optional>
#include <string>

#include "io/checkpoint.h"
#include "train/task.h"

namespace train {

struct StepFigures;

class ValidationWatch {
 public:
  // patience 0: never spent (--keep-best alone).
  ValidationWatch(ValidationMetric metric, int64_t patience);
  // The checkpoint's state, when it has one; a state of another metric is a CheckpointError.
  void restore(const io::Checkpoint& c);
  // Into a checkpoint: the state after the last evaluation (none before the first).
  void record(io::Checkpoint& c) const;
  // One evaluation: returns whether its metric is better than every earlier one (the first
  // is). A NaN (an evaluation cut short) changes nothing.
  bool see(const StepFigures& f);
  bool patience_spent() const {
    return patience_ > 0 && best_ && best_->evaluations_since >= patience_;
  }
  // "val_loss has not improved on 1.2345 (step 40) for 3 evaluations (--early-stopping 3)"
  std::string stop_reason() const;
  const std::optional<io::BestValidation>& best() const { return best_; }
  const ValidationMetric& metric() const { return metric_; }

 private:
  ValidationMetric metric_;
  int64_t patience_;
  std::optional<io::BestValidation> best_;
};

}  // namespace train
