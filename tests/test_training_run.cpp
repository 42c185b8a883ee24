// TrainingRun's steps, each driven alone.
#include <catch2/catch.hpp>
#include <filesystem>

#include "checkpoint_support.h"
#include "data/examples.h"
#include "support.h"
#include "train/task.h"
#include "train/train.h"

using ag_test::same_bits;
using ag_test::tiny_run;

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

namespace {

// Runs cfg's steps (up to --stop-at) from resumed, then its final save; returns the
// steps' training losses.
std::vector<double> train_through(const train::RunConfig& cfg,
                                  const io::Checkpoint* resumed = nullptr) {
  train::TrainingRun run(cfg, resumed);
  std::vector<double> losses;
  while (run.wants_another_step()) {
    const train::StepOutcome s = run.train_step();
    losses.push_back(s.figures.loss);
    run.after_step(s);
    if (run.stop_at_reached()) break;
  }
  REQUIRE(run.finish() == 0);
  return losses;
}

}  // namespace

TEST_CASE("every registered optimizer trains and a resume continues it exactly",
          "[training_run][optimizer]") {
  for (const std::string& name : optim::optimizer_names()) {
    INFO(name);
    ag_test::TempDir dir;
    train::RunConfig cfg = tiny_run(dir);
    cfg.optimizer.name = name;
    cfg.optimizer.momentum = name == "sgd" ? 0.9 : 0.0;
    cfg.lr = name == "sgd" ? 0.1 : 1e-2;
    cfg.warmup_steps = 0;
    cfg.steps = 8;
    const std::vector<double> losses = train_through(cfg);
    REQUIRE(losses.back() < losses.front() - 0.1);
    const io::Checkpoint straight = io::load_checkpoint(cfg.out);
    REQUIRE(straight.optimizer->type == name);
    REQUIRE(straight.config.at("optimizer") == name);

    train::RunConfig split = cfg;
    split.out = dir.file("split.h5");
    split.stop_at = 4;
    train_through(split);
    const io::Checkpoint half = io::load_checkpoint(split.out);
    REQUIRE(half.step == 4);
    train::RunConfig resumed = train::RunConfig::from_json(half.config);
    resumed.threads = 1, resumed.out = split.out;
    train_through(resumed, &half);
    const io::Checkpoint rest = io::load_checkpoint(split.out);
    REQUIRE(rest.step == 8);
    REQUIRE(ag_test::same_bits(rest.model, straight.model));
    REQUIRE(ag_test::same_bits(rest.optimizer->tensors, straight.optimizer->tensors));
    REQUIRE(rest.optimizer->scalars == straight.optimizer->scalars);
  }
}

TEST_CASE("the memory plan counts the state of the optimizer the run names", "[optimizer]") {
  train::RunConfig cfg;
  cfg.model.vocab_size = 32;
  const int64_t params = 1000;
  REQUIRE(train::plan_memory(cfg, params, 0, 1).optimizer == 8 * params);  // AdamW: m and v
  cfg.optimizer.name = "sgd";
  REQUIRE(train::plan_memory(cfg, params, 0, 1).optimizer == 0);  // no momentum: no state
  cfg.optimizer.momentum = 0.9;
  REQUIRE(train::plan_memory(cfg, params, 0, 1).optimizer == 4 * params);
  REQUIRE_THAT(train::plan_memory(cfg, params, 0, 1).describe(),
               Catch::Matchers::Contains("SGD state"));
}

TEST_CASE("a bf16 plan holds the weights' bfloat16 copies and the GEMM inputs' rounded copies",
          "[memory_plan]") {
  train::RunConfig cfg;
  cfg.model.vocab_size = 40, cfg.model.d_model = 16, cfg.model.n_heads = 2;
  cfg.model.n_layers = 2, cfg.model.context_length = 8;
  double matrices = 0;  // every weight matrix a GEMM reads, the tied head's included
  for (const auto& m : nn::GPT(cfg.model, 1).streamed_matrices())
    matrices += static_cast<double>(m.elements);
  const train::MemoryPlan fp32 = train::plan_memory(cfg, 1000, 0, 1);
  cfg.precision = ag::Precision::bf16;
  const train::MemoryPlan bf16 = train::plan_memory(cfg, 1000, 0, 1);
  REQUIRE(fp32.weight_copies == 0);
  REQUIRE(bf16.weight_copies == static_cast<int64_t>(2 * matrices));
  // per token of a block: ln1's and ln2's outputs, the context and GELU's output (4 C), at 2
  // bytes; the final norm's output; and no float32 stack of q, k and v's weights
  const double tokens = static_cast<double>(cfg.batch_size * cfg.model.context_length);
  const double stacked = 2 * 4.0 * 16 * 48;
  REQUIRE(static_cast<double>(bf16.activations - fp32.activations) ==
          tokens * 2 * (2 * (16 + 16 + 16 + 64) + 16) - stacked);
  REQUIRE_THAT(bf16.describe(), Catch::Matchers::Contains("bf16 weight copies"));
  REQUIRE(bf16.to_json().at("weight_copies") == bf16.weight_copies);
}

TEST_CASE("a resume refuses a checkpoint whose optimizer did not update once a step",
          "[training_run][optimizer]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = tiny_run(dir);
  cfg.steps = 2;
  train_through(cfg);
  io::Checkpoint edited = io::load_checkpoint(cfg.out);
  for (auto& [key, value] : edited.optimizer->scalars)
    if (key == "step") value = 7;
  io::save_checkpoint(dir.file("edited.h5"), edited);
  const io::Checkpoint back = io::load_checkpoint(dir.file("edited.h5"));
  train::RunConfig resumed = train::RunConfig::from_json(back.config);
  resumed.threads = 1, resumed.steps = 4, resumed.out = dir.file("edited.h5");
  REQUIRE_THROWS_WITH(train::TrainingRun(resumed, &back),
                      fmt::format("'{}': the optimizer's step count (7) disagrees with the "
                                  "checkpoint's step (2); a run updates once a step",
                                  dir.file("edited.h5")));
}

TEST_CASE("a resume that would stop at or before its checkpoint's step trains and writes nothing",
          "[training_run]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = tiny_run(dir);
  cfg.steps = 6;
  cfg.stop_at = 3;
  train_through(cfg);
  const io::Checkpoint half = io::load_checkpoint(cfg.out);
  REQUIRE(half.step == 3);
  const auto written = std::filesystem::last_write_time(cfg.out);
  for (int64_t stop_at : {2, 3}) {
    train::RunConfig resumed = train::RunConfig::from_json(half.config);
    resumed.threads = 1, resumed.stop_at = stop_at, resumed.out = dir.file("other.h5");
    resumed.metrics = dir.file("m.jsonl");
    REQUIRE(train::run_training(resumed, &half) == 0);
    REQUIRE_FALSE(std::filesystem::exists(dir.file("other.h5")));
    REQUIRE_FALSE(std::filesystem::exists(dir.file("m.jsonl")));
    resumed.out = cfg.out;
    REQUIRE(train::run_training(resumed, &half) == 0);
    REQUIRE(std::filesystem::last_write_time(cfg.out) == written);
    REQUIRE(io::load_checkpoint(cfg.out).step == 3);
  }
}

TEST_CASE("tokens/s counts the real tokens of a step's batches, padding left out",
          "[training_run][report]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = tiny_run(dir);
  cfg.grad_accum_steps = 2;
  SECTION("lm: every window is whole, batch x context per micro-batch") {
    train::TrainingRun run(cfg);
    CHECK(run.train_step().figures.tokens == 2 * 2 * 8);
    CHECK(run.train_step().figures.tokens == 2 * (2 * 2 * 8));  // the session's total
  }
  SECTION("classify: each text's ids, not the context (the count was batch x context)") {
    cfg.task = train::TaskHandle(train::task_named("classify"));
    cfg.tokenizer = data::TokenizerKind::chars;
    cfg.model.context_length = 16;
    cfg.data = dir.write("set.tsv", "abc\tx\nbca\ty\ncab\tx\nacb\ty\nbac\tx\n");
    train::TrainingRun run(cfg);
    CHECK(run.train_step().figures.tokens == 2 * 2 * 3);
  }
}

TEST_CASE("a batch of examples counts its real ids, not its padded slots", "[examples]") {
  data::Example a, b;
  a.ids = {1, 2}, b.ids = {3, 4, 5, 6, 7};
  a.label = 0, b.label = 1;
  const std::vector<const data::Example*> rows = {&a, &b};
  const data::ExampleBatch batch = data::make_batch(rows, 0);
  CHECK(batch.x.numel() == 10);
  CHECK(batch.tokens == 7);
}
