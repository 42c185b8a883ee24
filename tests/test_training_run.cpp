// TrainingRun's steps, each driven alone.
#include <catch2/catch.hpp>
#include <filesystem>

#include "support.h"
#include "train/train.h"

namespace {

train::RunConfig tiny_run(const ag_test::TempDir& dir) {
  train::RunConfig cfg;
  cfg.model.context_length = 8;
  cfg.model.d_model = 16;
  cfg.model.n_heads = 2;
  cfg.model.n_layers = 1;
  cfg.batch_size = 2;
  cfg.steps = 6;
  cfg.threads = 1;
  cfg.sample_tokens = 0;
  cfg.eval_windows = 2;
  cfg.log_interval = 100;
  cfg.out = dir.file("run.h5");
  return cfg;
}

}  // namespace

TEST_CASE("one training step changes the weights and counts the step", "[training_run]") {
  ag_test::TempDir dir;
  train::TrainingRun run(tiny_run(dir));
  REQUIRE(run.step() == 0);
  const std::vector<double> before = run.model().named_parameters().front().second.to_vector();
  const train::StepOutcome s = run.train_step();
  REQUIRE(s.updated);
  REQUIRE(run.step() == 1);
  REQUIRE(s.figures.step == 1);
  REQUIRE(std::isfinite(s.figures.loss));
  REQUIRE(s.figures.grad_norm > 0);
  REQUIRE(run.model().named_parameters().front().second.to_vector() != before);
}

TEST_CASE("after a step the checkpoint is written at the interval only", "[training_run]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = tiny_run(dir);
  cfg.checkpoint_interval = 2;
  train::TrainingRun run(cfg);
  run.after_step(run.train_step());
  REQUIRE_FALSE(std::filesystem::exists(cfg.out));
  REQUIRE(run.last_saved() == -1);
  run.after_step(run.train_step());
  REQUIRE(std::filesystem::exists(cfg.out));
  REQUIRE(run.last_saved() == 2);
}

TEST_CASE("finish saves the last step and evaluates at the end", "[training_run]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = tiny_run(dir);
  train::TrainingRun run(cfg);
  while (run.wants_another_step()) run.after_step(run.train_step());
  REQUIRE(run.step() == cfg.steps);
  REQUIRE(std::isfinite(run.last_val_loss()));
  REQUIRE(run.finish() == 0);
  REQUIRE(run.last_saved() == -1);  // the final save is not a periodic one
  REQUIRE(io::load_checkpoint(cfg.out).step == cfg.steps);
}

TEST_CASE("the observer sees every evaluation and the end, with the run record first",
          "[training_run][report]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = tiny_run(dir);
  cfg.eval_interval = 2;
  cfg.metrics = dir.file("m.jsonl");
  std::vector<std::pair<int64_t, bool>> seen;
  train::TrainingRun run(cfg, nullptr, [&](const train::TrainingRun& r, bool final) {
    seen.emplace_back(r.step(), final);
  });
  REQUIRE(run.run() == 0);
  // before the first step, after the evaluations at 2 and 4, and once at the end (step 6)
  const std::vector<std::pair<int64_t, bool>> expected{
      {0, false}, {2, false}, {4, false}, {6, true}};
  REQUIRE(seen == expected);
  const std::vector<std::string>& lines = run.reporter().records();
  REQUIRE(lines.size() >= 4);
  const nlohmann::json start = nlohmann::json::parse(lines[0]);
  REQUIRE(start["event"] == "start");
  REQUIRE(start["config"]["d_model"] == 16);
  REQUIRE(start["parameters"] == run.model().num_parameters());
  REQUIRE(start["memory_plan"]["total"].get<int64_t>() > 0);
  REQUIRE(start["baselines"]["corpus_floor"].get<double>() > 0);  // the built-in corpus
  // the same lines went to --metrics
  std::ifstream in(cfg.metrics);
  std::string first;
  std::getline(in, first);
  REQUIRE(first == lines[0]);
}

TEST_CASE("without an observer no records are kept", "[training_run][report]") {
  ag_test::TempDir dir;
  train::TrainingRun run(tiny_run(dir));
  run.after_step(run.train_step());
  REQUIRE(run.reporter().records().empty());
}
