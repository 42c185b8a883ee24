// A run's history in its checkpoint (io/history.h), the rate behind tokens/s and the ETA
// (train/rate_meter.h), the report line's mean loss (train/reporter.h) and the shell
// quoting of the command that continues an interrupted run (base/shell_quote.h).
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <sstream>

#include "base/shell_quote.h"
#include "io/checkpoint.h"
#include "io/history.h"
#include "report/metrics_log.h"
#include "support.h"
#include "train/rate_meter.h"
#include "train/reporter.h"

using Catch::Matchers::Contains;

namespace {

io::HistoryRow row(int64_t step, double loss, double val = NAN) {
  return {.step = step, .loss = loss, .val_loss = val, .lr = 1e-3, .elapsed_s = step * 0.5};
}

std::string history_error(const std::string& text) {
  try {
    io::parse_history(text, "x.h5");
  } catch (const io::CheckpointError& e) {
    return e.what();
  }
  return "no error";
}

io::Checkpoint history_small_checkpoint() {
  io::Checkpoint c;
  c.config = {{"vocab_size", 4}};
  c.step = 20;
  c.model = {{"w", ag::full({2, 2}, 0.5)}};
  c.tokenizer.type = "byte";
  return c;
}

}  // namespace

TEST_CASE("a history table is written as text and read back", "[history]") {
  const std::vector<io::HistoryRow> rows = {row(1, 4.25), row(50, 3.5, 3.25), row(100, 2.75)};
  const std::string text = io::history_text(rows);
  REQUIRE(text.rfind("step loss val_loss val_bits_per_byte lr grad_norm tokens_per_s elapsed_s\n",
                     0) == 0);
  REQUIRE_THAT(text, Contains("\n50 3.5 3.25 nan 0.001 nan nan 25\n"));
  const auto back = io::parse_history(text, "x.h5");
  REQUIRE(back.size() == 3);
  REQUIRE(back[1].step == 50);
  REQUIRE(back[1].val_loss == 3.25);
  REQUIRE(std::isnan(back[2].val_loss));
  REQUIRE(back[2].elapsed_s == 50);
  REQUIRE(io::parse_history("", "x.h5").empty());
  // columns a later writer adds are skipped; their order is the header's
  const auto later = io::parse_history("loss future step\n2.5 7 3\n", "x.h5");
  REQUIRE(later.size() == 1);
  REQUIRE(later[0].step == 3);
  REQUIRE(later[0].loss == 2.5);
}

TEST_CASE("a damaged history is refused naming the file and the line", "[history]") {
  REQUIRE_THAT(history_error("loss\n1\n"),
               Contains("'x.h5': root attribute 'history' line 1") && Contains("no 'step'"));
  REQUIRE_THAT(history_error("step step\n1 1\n"), Contains("named twice"));
  REQUIRE_THAT(history_error("step loss\n1\n"),
               Contains("line 2: 1 fields, but the header names 2"));
  REQUIRE_THAT(history_error("step loss\n1 low\n"), Contains("loss 'low' is not a number"));
  REQUIRE_THAT(history_error("step loss\n-1 2\n"), Contains("step '-1' is not a whole number"));
  REQUIRE_THAT(history_error("step loss\n1.5 2\n"), Contains("is not a whole number"));
  REQUIRE_THAT(history_error("step\n7\n2\n"),
               Contains("line 3: step 2 does not come after step 7"));
  REQUIRE_THAT(history_error("step\n1\n\n"), Contains("line 3"));
  std::string wide = "step";
  for (int i = 0; i < 100; ++i) wide += " c" + std::to_string(i);
  REQUIRE_THAT(history_error(wide + "\n"), Contains("more than 64 columns"));
  std::string tall = "step\n";
  for (size_t i = 0; i <= io::kMaxHistoryRows; ++i) tall += std::to_string(i) + "\n";
  REQUIRE_THAT(history_error(tall), Contains("more than 100000 rows"));
}

TEST_CASE("a long history thins its rows but keeps every evaluation and both ends", "[history]") {
  std::vector<io::HistoryRow> rows;
  for (int64_t s = 1; s <= static_cast<int64_t>(io::kMaxHistoryRows) + 1; ++s)
    io::append_history(rows, row(s, 1.0, s % 1000 == 0 ? 2.0 : NAN));
  REQUIRE(rows.size() <= io::kMaxHistoryRows);
  REQUIRE(rows.size() > io::kMaxHistoryRows / 3);
  REQUIRE(rows.front().step == 1);
  REQUIRE(rows.back().step == static_cast<int64_t>(io::kMaxHistoryRows) + 1);
  REQUIRE(std::count_if(rows.begin(), rows.end(), [](const io::HistoryRow& r) {
            return std::isfinite(r.val_loss);
          }) == static_cast<long>(io::kMaxHistoryRows / 1000));
  // a row for a step already there replaces it and what followed
  io::append_history(rows, row(5, 9.0));
  REQUIRE(rows.back().step == 5);
  REQUIRE(rows.back().loss == 9.0);
}

TEST_CASE("a checkpoint keeps its run's identity, name and history", "[history]") {
  io::Checkpoint c = history_small_checkpoint();
  c.run_id = "00112233aabbccdd";
  c.run_name = "my run";
  c.history = io::history_text({row(1, 4), row(20, 3, 3.5)});
  const io::Checkpoint back = io::load_checkpoint_image(io::checkpoint_image(c), "c.h5");
  REQUIRE(back.run_id == c.run_id);
  REQUIRE(back.run_name == "my run");
  REQUIRE(io::parse_history(back.history, back.source).size() == 2);
  // a file without them (older, or from elsewhere) reads as none
  const io::Checkpoint plain =
      io::load_checkpoint_image(io::checkpoint_image(history_small_checkpoint()), "p.h5");
  REQUIRE(plain.run_id.empty());
  REQUIRE(plain.history.empty());
  c.history = "step loss\n3 1\n2 1\n";
  REQUIRE_THROWS_WITH(io::load_checkpoint_image(io::checkpoint_image(c), "bad.h5"),
                      Contains("'bad.h5': root attribute 'history' line 3"));
}

TEST_CASE("the rate ignores the warm-up steps and follows the recent ones", "[history]") {
  train::RateMeter rate;
  rate.tick(1, 100, 10.0);  // a slow first step: allocation, kernel choice
  REQUIRE_FALSE(rate.eta(1, 100));
  rate.tick(2, 200, 10.5);
  REQUIRE_FALSE(rate.seconds_per_step());
  rate.tick(3, 300, 11.0);
  REQUIRE(*rate.seconds_per_step() == Approx(0.5));
  REQUIRE(*rate.eta(3, 103) == Approx(50.0));
  REQUIRE(*rate.tokens_per_second() == Approx(200.0));
  // only the last kWindowSteps steps count: the run got faster
  for (int64_t s = 4; s < 4 + static_cast<int64_t>(train::RateMeter::kWindowSteps); ++s)
    rate.tick(s, s * 100, 11.0 + 0.1 * static_cast<double>(s - 3));
  REQUIRE(*rate.seconds_per_step() == Approx(0.1));
}

TEST_CASE("a report line logs the mean loss of the steps since the previous line", "[history]") {
  ag_test::TempDir dir;
  train::RunConfig cfg;
  cfg.steps = 10;
  cfg.metrics = dir.file("m.jsonl");
  {
    train::Reporter reporter(
        cfg, {.id = "abc", .name = "n", .first_step = 0, .resumed = false, .history = {}});
    for (int64_t s = 1; s <= 4; ++s) {
      train::StepFigures f;
      f.step = s, f.loss = static_cast<double>(s), f.lr = 1e-3, f.tokens = s * 64;
      if (s == 1 || s == 4) {
        if (s == 4) f.val_loss = 2.0, f.val_windows = 7;
        reporter.line(f);
      } else {
        reporter.progress(f);
      }
    }
    REQUIRE(reporter.history().size() == 2);
    REQUIRE(reporter.history()[1].loss == 3.0);  // (2 + 3 + 4) / 3
  }
  std::ifstream in(cfg.metrics);
  std::stringstream text;
  text << in.rdbuf();
  const auto runs = report::parse_metrics_runs(text.str(), "m.jsonl");
  REQUIRE(runs.size() == 1);
  REQUIRE(runs[0].run_id == "abc");
  REQUIRE(runs[0].points.size() == 2);
  REQUIRE(runs[0].points[0].loss == 1.0);
  REQUIRE(runs[0].points[1].loss == 3.0);
  REQUIRE_THAT(text.str(), Contains("\"val_windows\":7") && Contains("\"first_step\":0"));
}

TEST_CASE("a word is quoted for the shell only when it needs it", "[history]") {
  REQUIRE(base::shell_quote("runs/a-1.h5") == "runs/a-1.h5");
  REQUIRE(base::shell_quote("my run.h5") == "'my run.h5'");
  REQUIRE(base::shell_quote("it's") == "'it'\\''s'");
  REQUIRE(base::shell_quote("$(rm -rf x)") == "'$(rm -rf x)'");
  REQUIRE(base::shell_quote("") == "''");
}

TEST_CASE("a resumed session's first report line says over how many steps its loss is a mean",
          "[history]") {
  ag_test::TempDir dir;
  train::RunConfig cfg;
  cfg.steps = 100;
  cfg.log_interval = 50;
  cfg.metrics = dir.file("m.jsonl");
  {
    train::Reporter reporter(
        cfg, {.id = "abc", .name = "n", .first_step = 37, .resumed = true, .history = {}});
    for (int64_t s = 38; s <= 100; ++s) {
      train::StepFigures f;
      f.step = s, f.loss = static_cast<double>(s), f.tokens = (s - 37) * 64;
      s % 50 == 0 ? reporter.line(f) : reporter.progress(f);
    }
  }
  std::ifstream in(cfg.metrics);
  std::stringstream text;
  text << in.rdbuf();
  // steps 38 to 50: 13 steps, not the log interval's 50; then 51 to 100, a whole interval
  REQUIRE_THAT(text.str(), Contains("\"loss\":44.0,\"loss_steps\":13") &&
                               Contains("\"loss\":75.5,\"loss_steps\":50"));
}
