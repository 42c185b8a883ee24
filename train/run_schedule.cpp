// TrainingRun's schedule: --epochs turned into steps, the warm-up checked against the run,
// the ETA from a measured micro-batch before the first step, and the watch of the
// validation metric (--early-stopping, --keep-best) with the best checkpoint it keeps.
#include "train/run_schedule.h"

#include <fmt/format.h>

#include <stdexcept>

#include "train/console.h"
#include "train/task.h"
#include "train/training_run.h"

namespace train {

int64_t epoch_steps(int64_t epochs, int64_t per_epoch, int64_t per_step) {
  if (epochs < 0 || per_epoch < 0 || per_step <= 0)
    throw std::invalid_argument("epoch_steps: counts must be >= 0 and a step positive");
  int64_t units = 0;
  if (__builtin_mul_overflow(epochs, per_epoch, &units) || units > INT64_MAX - per_step)
    throw std::invalid_argument(
        fmt::format("--epochs {} over {} units an epoch is more steps than a run can count", epochs,
                    per_epoch));
  return (units + per_step - 1) / per_step;
}

bool TrainingRun::has_validation() const {
  return data_.examples ? !data_.examples->val.empty() : !data_.val.empty();
}

// Once the data is known: --epochs becomes steps (a resume keeps its checkpoint's, counted
// when the run began), a warm-up asked for beyond the run is warned of, and what watches
// the validation metric needs validation data.
void TrainingRun::plan_schedule() {
  if (cfg_.epochs > 0 && !resumed_) {
    const int64_t sequences = cfg_.effective_batch() * world_.size();
    cfg_.steps = data_.examples
                     ? epoch_steps(cfg_.epochs, static_cast<int64_t>(data_.examples->train.size()),
                                   sequences)
                     : epoch_steps(cfg_.epochs, static_cast<int64_t>(data_.train.size()),
                                   sequences * cfg_.model.context_length);
  }
  if (cfg_.warmup_steps > cfg_.steps && !resumed_)
    warn(
        fmt::format("--warmup-steps {} is longer than the run's {} steps: the learning rate "
                    "never reaches --lr {}",
                    cfg_.warmup_steps, cfg_.steps, cfg_.lr));
  if ((cfg_.early_stopping > 0 || cfg_.keep_best) && !has_validation())
    throw std::invalid_argument(
        fmt::format("--{} watches the validation metric, but this run holds out no validation data "
                    "(--val-fraction is 0 or the data too small)",
                    cfg_.early_stopping > 0 ? "early-stopping" : "keep-best"));
}

// "schedule: 41 steps (3 epochs of 216 examples, 16 a step) | warm-up 4 | ..."
std::string TrainingRun::schedule_text() const {
  const int64_t sequences = cfg_.effective_batch() * world_.size();
  const std::string epochs =
      cfg_.epochs <= 0 ? ""
      : data_.examples
          ? fmt::format(" ({} epoch{} of {} training examples, {} a step)", cfg_.epochs,
                        cfg_.epochs == 1 ? "" : "s", data_.examples->train.size(), sequences)
          : fmt::format(" ({} epoch{} of {} training tokens, {} a step)", cfg_.epochs,
                        cfg_.epochs == 1 ? "" : "s", data_.train.size(),
                        sequences * cfg_.model.context_length);
  std::string text =
      fmt::format("schedule: {} steps{} | warm-up {} steps, then cosine to {:.2e}", cfg_.steps,
                  epochs, cfg_.effective_warmup(), cfg_.effective_min_lr());
  if (cfg_.early_stopping > 0 || cfg_.keep_best) {
    const ValidationMetric m = cfg_.task->validation_metric();
    text += fmt::format(" | watching {} every {} steps", m.name, cfg_.eval_interval);
  }
  if (cfg_.early_stopping > 0)
    text += fmt::format(": stop after {} without improvement", cfg_.early_stopping);
  if (cfg_.keep_best) text += fmt::format("; best kept in {}", cfg_.best_out());
  return text;
}

// Rank 0 times one micro-batch (after the kernels are chosen, so that their measuring is
// not in it) and prints the run's ETA from it before the first step.
void TrainingRun::print_eta() {
  const int64_t left = cfg_.steps - progress_.step;
  if (!world_.root() || left <= 0) return;
  const double seconds = engine_->time_micro_batch();
  const double per_step = seconds * static_cast<double>(cfg_.grad_accum_steps);
  sayf(
      "ETA {} for {} steps, from one measured micro-batch ({:.3f} s, {} a step); evaluations "
      "not counted\n",
      format_duration(per_step * static_cast<double>(left)), left, seconds, cfg_.grad_accum_steps);
}

// After an evaluation: a new best is noted (and saved after the report line, so that its
// history has the step's row); patience spent stops the run on every rank together.
void TrainingRun::watch_validation(const StepFigures& f) {
  if (!watch_) return;
  progress_.new_best = watch_->see(f);
  bool spent = watch_->patience_spent() && progress_.step < cfg_.steps;
  if (world_.distributed()) spent = world_.any(spent);
  if (spent) ending_.early_stop = watch_->stop_reason();
}

// --keep-best: the best evaluation's checkpoint, written as every save is (atomically); a
// failed save is warned of and the run goes on.
void TrainingRun::save_best() {
  try {
    save(progress_.step, cfg_.best_out());
  } catch (const io::CheckpointError& e) {
    warn(fmt::format("step {}: the best checkpoint: {}; training continues", progress_.step,
                     e.what()));
  }
}

}  // namespace train
