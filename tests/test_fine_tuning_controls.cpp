// A run's length and end as fine-tuning needs them: --epochs counted into steps, the
// default warm-up capped at a tenth of the run, --early-stopping on the validation metric
// (resumed exactly) and --keep-best's checkpoint.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "support.h"
#include "train/run_schedule.h"
#include "train/train.h"

using ag_test::same_bits;
using ag_test::tiny_run;

namespace {

nn::StateDict copy_of(const nn::StateDict& weights) {
  nn::StateDict copy;
  for (const auto& [name, t] : weights) copy.emplace_back(name, t.clone());
  return copy;
}

// A tiny run that evaluates at every step with a learning rate high enough that its
// validation loss stops improving within a few dozen steps.
train::RunConfig bouncing_run(const ag_test::TempDir& dir) {
  train::RunConfig cfg = tiny_run(dir);
  cfg.steps = 60;
  cfg.lr = 0.05;
  cfg.warmup_steps = 0;
  cfg.eval_interval = 1;
  cfg.early_stopping = 3;
  return cfg;
}

}  // namespace

TEST_CASE("an epoch is a whole pass: its steps are rounded up", "[fine_tuning_controls]") {
  REQUIRE(train::epoch_steps(3, 216, 16) == 41);  // 648 examples, the last step part-full
  REQUIRE(train::epoch_steps(1, 16, 16) == 1);
  REQUIRE(train::epoch_steps(1, 17, 16) == 2);
  REQUIRE(train::epoch_steps(2, 0, 16) == 0);
  REQUIRE_THROWS_AS(train::epoch_steps(INT64_MAX / 2, 1000, 16), std::invalid_argument);
}

TEST_CASE("epochs set a run's steps from its training tokens, batch and accumulation",
          "[fine_tuning_controls]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = tiny_run(dir);
  cfg.epochs = 2;
  cfg.steps = 2000;  // replaced
  cfg.grad_accum_steps = 3;
  train::TrainingRun run(cfg);
  const int64_t tokens = run.data().train.size();
  const int64_t per_step = cfg.batch_size * 3 * cfg.model.context_length;
  REQUIRE(run.config().steps == (2 * tokens + per_step - 1) / per_step);
  REQUIRE(run.config().to_json().at("epochs") == 2);
}

TEST_CASE("a resume keeps the steps --epochs gave when the run began", "[fine_tuning_controls]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = tiny_run(dir);
  cfg.epochs = 1;
  cfg.stop_at = 2;
  const int64_t steps = train::TrainingRun(cfg).config().steps;
  ag_test::run_to_end(cfg);
  const io::Checkpoint half = io::load_checkpoint(cfg.out);
  train::RunConfig resumed = train::RunConfig::from_json(half.config);
  REQUIRE(resumed.epochs == 1);
  resumed.batch_size = 1;  // a resume cannot change it, but the steps must not follow it
  resumed.threads = 1, resumed.out = cfg.out;
  REQUIRE(train::TrainingRun(resumed, &half).config().steps == steps);
}

TEST_CASE("the default warm-up is at most a tenth of the run; a given one stays",
          "[fine_tuning_controls]") {
  train::RunConfig cfg;
  cfg.steps = 20;
  REQUIRE(cfg.effective_warmup() == 2);
  cfg.steps = 2000;
  REQUIRE(cfg.effective_warmup() == train::kDefaultWarmupSteps);
  cfg.steps = 5;
  REQUIRE(cfg.effective_warmup() == 0);
  REQUIRE(cfg.to_json().at("warmup_steps") == 0);  // a checkpoint holds the warm-up it had
  cfg.warmup_steps = 50;
  REQUIRE(cfg.effective_warmup() == 50);
  cfg.warmup_steps = -2;
  REQUIRE_THROWS_AS(cfg.validate(), std::invalid_argument);
}

TEST_CASE("a run with the default warm-up reaches its learning rate within a tenth of it",
          "[fine_tuning_controls]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = tiny_run(dir);
  cfg.steps = 20;
  train::TrainingRun run(cfg);
  double lr = 0;
  for (int i = 0; i < 2; ++i) lr = run.train_step().figures.lr;
  REQUIRE(lr == cfg.lr);
}

TEST_CASE("early stopping stops at the evaluation that spends its patience",
          "[fine_tuning_controls]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = bouncing_run(dir);
  train::TrainingRun run(cfg);
  std::vector<double> vals;
  while (run.wants_another_step()) {
    run.after_step(run.train_step());
    vals.push_back(run.last_val_loss());
  }
  REQUIRE(run.finish() == 0);
  REQUIRE(run.step() < cfg.steps);
  REQUIRE_FALSE(run.early_stop().empty());
  // the best is the lowest loss seen, and the run ended the patience's evaluations after it
  const auto best = run.best_validation();
  REQUIRE(best);
  REQUIRE(best->value == *std::min_element(vals.begin(), vals.end()));
  REQUIRE(best->evaluations_since == cfg.early_stopping);
  REQUIRE(run.step() == best->step + cfg.early_stopping * cfg.eval_interval);
  for (int64_t step = best->step + 1; step <= run.step(); ++step)
    REQUIRE(vals[step - 1] >= best->value);
  const io::Checkpoint saved = io::load_checkpoint(cfg.out);
  REQUIRE(saved.step == run.step());
  REQUIRE(saved.best_validation == best);
}

TEST_CASE("a resumed run with early stopping ends as the uninterrupted one, bit for bit",
          "[fine_tuning_controls]") {
  ag_test::TempDir dir;
  const train::RunConfig cfg = bouncing_run(dir);
  const int64_t end = ag_test::run_to_end(cfg);
  REQUIRE(end < cfg.steps);
  const io::Checkpoint straight = io::load_checkpoint(cfg.out);

  for (const int64_t stop_at : {end / 2, end - 1}) {
    INFO("stopped at " << stop_at);
    train::RunConfig split = cfg;
    split.out = dir.file("split.h5");
    split.stop_at = stop_at;
    REQUIRE(ag_test::run_to_end(split) == stop_at);
    const io::Checkpoint half = io::load_checkpoint(split.out);
    REQUIRE(half.best_validation);
    train::RunConfig resumed = train::RunConfig::from_json(half.config);
    REQUIRE(resumed.early_stopping == cfg.early_stopping);
    resumed.threads = 1, resumed.out = split.out;
    REQUIRE(ag_test::run_to_end(resumed, &half) == end);
    const io::Checkpoint rest = io::load_checkpoint(split.out);
    REQUIRE(same_bits(rest.model, straight.model));
    REQUIRE(same_bits(rest.optimizer->tensors, straight.optimizer->tensors));
    REQUIRE(rest.best_validation == straight.best_validation);
  }
}

TEST_CASE("keep-best holds the best evaluation's weights, step and metric",
          "[fine_tuning_controls]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = bouncing_run(dir);
  cfg.early_stopping = 0;
  cfg.steps = 30;
  cfg.keep_best = true;
  REQUIRE(cfg.best_out() == dir.file("run.best.h5"));
  train::TrainingRun run(cfg);
  std::vector<nn::StateDict> weights;  // after each step
  while (run.wants_another_step()) {
    run.after_step(run.train_step());
    weights.push_back(copy_of(run.model().named_parameters()));
  }
  REQUIRE(run.finish() == 0);
  const auto best = run.best_validation();
  REQUIRE(best);
  REQUIRE(best->step < cfg.steps);  // the run went past its best: the two files differ
  const io::Checkpoint kept = io::load_checkpoint(cfg.best_out());
  REQUIRE(kept.step == best->step);
  REQUIRE(same_bits(kept.model, weights[best->step - 1]));
  REQUIRE(kept.best_validation);
  REQUIRE(kept.best_validation->metric == "val_loss");
  REQUIRE(kept.best_validation->value == best->value);
  REQUIRE(kept.best_validation->evaluations_since == 0);
  const auto history = io::parse_history(kept.history, kept.source);
  REQUIRE(history.back().step == best->step);
  REQUIRE(history.back().val_loss == Approx(best->value).epsilon(1e-6));  // kept as text
  REQUIRE(io::load_checkpoint(cfg.out).step == cfg.steps);
}

TEST_CASE("early stopping and keep-best need validation data", "[fine_tuning_controls]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = tiny_run(dir);
  cfg.val_fraction = 0;
  cfg.keep_best = true;
  REQUIRE_THROWS_WITH(train::TrainingRun(cfg), Catch::Matchers::Contains("--keep-best watches"));
}

TEST_CASE("a classifier is watched by its accuracy, higher is better", "[fine_tuning_controls]") {
  const train::ValidationMetric m = train::task_named("classify").validation_metric();
  REQUIRE(std::string(m.name) == "val_accuracy");
  REQUIRE(m.higher_is_better);
  train::ValidationWatch watch(m, 2);
  train::StepFigures f;
  f.step = 1, f.val_accuracy = 0.5;
  REQUIRE(watch.see(f));
  f.step = 2, f.val_accuracy = 0.5;  // equal is no improvement
  REQUIRE_FALSE(watch.see(f));
  f.step = 3, f.val_accuracy = 0.75;
  REQUIRE(watch.see(f));
  f.step = 4, f.val_accuracy = 0.7;
  REQUIRE_FALSE(watch.see(f));
  REQUIRE_FALSE(watch.patience_spent());
  f.step = 5, f.val_accuracy = NAN;  // a cancelled evaluation counts for nothing
  REQUIRE_FALSE(watch.see(f));
  f.step = 6, f.val_accuracy = 0.1;
  REQUIRE_FALSE(watch.see(f));
  REQUIRE(watch.patience_spent());
  REQUIRE(watch.best()->step == 3);
  REQUIRE_THAT(watch.stop_reason(), Catch::Matchers::Contains("val_accuracy has not improved on "
                                                              "0.7500 (step 3) for 2 evaluations"));
}
