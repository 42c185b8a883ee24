// A --metrics file read back for the report: what train writes, resumed runs, and lines
// that are not what train writes.
#include <catch2/catch.hpp>
#include <cmath>

#include "report/metrics_log.h"
#include "support.h"

using Catch::Matchers::Contains;

namespace {

const char* kStart = R"({"event": "start", "config": {"lr": 0.001}, "first_step": 0})";

std::string step_line(int64_t step, double loss, double elapsed) {
  return fmt::format(R"({{"step": {}, "loss": {}, "lr": 0.001, "elapsed_s": {}}})", step, loss,
                     elapsed);
}

}  // namespace

TEST_CASE("metrics lines, the run record and the sample are read back", "[metrics_log]") {
  const std::string text =
      std::string(kStart) + "\n" + step_line(1, 3.5, 1) + "\n" +
      R"({"step": 2, "loss": 3.0, "val_loss": 3.2, "val_bits_per_byte": 4.6, "elapsed_s": 2.5})" +
      "\n" + R"({"event": "sample", "step": 2, "text": "hello"})" + "\n" +
      R"({"event": "from the future", "x": 1})" + "\n\n";
  const report::MetricsRun r = report::parse_metrics(text, "run.jsonl");
  REQUIRE(r.points.size() == 2);
  REQUIRE(r.points[0].loss == 3.5);
  REQUIRE(std::isnan(r.points[0].val_loss));
  REQUIRE(r.points[1].val_bits_per_byte == 4.6);
  REQUIRE(r.start["config"]["lr"] == 0.001);
  REQUIRE(r.sample == "hello");
  REQUIRE(r.sample_step == 2);
  REQUIRE(r.sessions == 1);
  REQUIRE(r.wall_seconds == 2.5);
  REQUIRE(r.has(&report::MetricsPoint::val_loss));
  REQUIRE_FALSE(r.has(&report::MetricsPoint::grad_norm));
  REQUIRE(r.notes.empty());
}

TEST_CASE("a resumed run's lines replace the steps it repeats", "[metrics_log]") {
  // the first session reached step 3 but its last checkpoint was at step 2
  const std::string text = std::string(kStart) + "\n" + step_line(1, 3, 1) + "\n" +
                           step_line(2, 2.5, 2) + "\n" + step_line(3, 2.4, 3) + "\n" +
                           R"({"event": "start", "first_step": 2})" + "\n" +
                           step_line(3, 2.2, 0.5) + "\n" + step_line(4, 2.1, 1.5) + "\n";
  const report::MetricsRun r = report::parse_metrics(text, "run.jsonl");
  REQUIRE(r.points.size() == 4);
  REQUIRE(r.points[2].step == 3);
  REQUIRE(r.points[2].loss == 2.2);
  REQUIRE(r.sessions == 2);
  REQUIRE(r.wall_seconds == 4.5);
  REQUIRE(r.start["first_step"] == 2);
}

TEST_CASE("an old metrics file without run records still reads, restarts found by the clock",
          "[metrics_log]") {
  const std::string text =
      step_line(1, 3, 5) + "\n" + step_line(2, 2, 10) + "\n" + step_line(3, 1.5, 4) + "\n";
  const report::MetricsRun r = report::parse_metrics(text, "old.jsonl");
  REQUIRE(r.start.is_null());
  REQUIRE(r.sessions == 2);
  REQUIRE(r.wall_seconds == 14);
}

TEST_CASE("a line that is not what train writes is an error naming the file and line",
          "[metrics_log]") {
  auto error_of = [](const std::string& bad_line) {
    try {
      report::parse_metrics(
          std::string(kStart) + "\n" + bad_line + "\n" + step_line(9, 1, 1) + "\n",
          "dir/run.jsonl");
    } catch (const report::MetricsError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  REQUIRE_THAT(error_of("{\"step\": 1, \"loss\": "), Contains("dir/run.jsonl:2: not valid JSON"));
  REQUIRE_THAT(error_of("[1, 2]"), Contains("dir/run.jsonl:2: expected a JSON object, got [1,2]"));
  REQUIRE_THAT(error_of(R"({"step": 1, "loss": "low"})"),
               Contains(":2: 'loss' must be a number, got \"low\""));
  REQUIRE_THAT(error_of(R"({"step": -1})"), Contains("'step' must be a whole number >= 0"));
  REQUIRE_THAT(error_of(R"({"step": 1.5})"), Contains("'step' must be a whole number"));
  REQUIRE_THAT(error_of(R"({"loss": 1})"), Contains("no 'step'"));
  REQUIRE_THAT(error_of(R"({"event": "start", "config": 3})"),
               Contains("'config' must be an object"));
  REQUIRE_THAT(error_of(R"({"event": "sample", "text": 3})"), Contains("'text' as a string"));
  REQUIRE_THAT(error_of(R"({"event": 5})"), Contains("'event' must be a string"));
  REQUIRE_THAT(error_of(std::string(100000, '[') + std::string(100000, ']')),
               Contains(":2: JSON nested deeper than 8 levels"));
  REQUIRE_THAT(error_of(R"({"step": 1, "loss": "\u001b[2J"})"), Contains("got \"\\u001b[2J\""));
  // what the JSON parser quotes from a bad line is made printable too
  const std::string raw = error_of("{\"step\": 1, \"loss\": \"\x1b[2J\"}");
  REQUIRE_THAT(raw, Contains(":2: not valid JSON"));
  REQUIRE(raw.find('\x1b') == std::string::npos);
}

TEST_CASE("a last line still being written is skipped and noted", "[metrics_log]") {
  const report::MetricsRun r = report::parse_metrics(
      std::string(kStart) + "\n" + step_line(1, 3, 1) + "\n{\"step\": 2, \"lo", "live.jsonl");
  REQUIRE(r.points.size() == 1);
  REQUIRE(r.notes.size() == 1);
  REQUIRE_THAT(r.notes[0], Contains("line 3") && Contains("skipped"));
  // a complete last line without its newline is read
  REQUIRE(report::parse_metrics(step_line(1, 3, 1), "x").points.size() == 1);
}

TEST_CASE("a metrics file must be a regular file", "[metrics_log]") {
  ag_test::TempDir dir;
  REQUIRE_THROWS_WITH(report::read_metrics(dir.file("missing.jsonl")), Contains("missing.jsonl"));
  REQUIRE_THROWS_WITH(report::read_metrics(dir.path.string()), Contains("not a regular file"));
  const std::string path = dir.write("m.jsonl", step_line(1, 2, 3) + "\n");
  REQUIRE(report::read_metrics(path).points.size() == 1);
}

TEST_CASE("run names grow until they tell the files apart", "[metrics_log]") {
  std::vector<report::MetricsRun> runs(3);
  runs[0].path = "exp/a/run.jsonl", runs[1].path = "exp/b/run.jsonl", runs[2].path = "other.jsonl";
  report::name_runs(runs);
  REQUIRE(runs[0].name == "a/run.jsonl");
  REQUIRE(runs[1].name == "b/run.jsonl");
  REQUIRE(runs[2].name == "other.jsonl");
}

TEST_CASE("every sample a run records is kept, and a resume drops those it repeats",
          "[metrics_log]") {
  const std::string text =
      std::string(kStart) + "\n" + step_line(1, 3, 1) + "\n" +
      R"({"event": "sample", "step": 1, "text": "one"})" + "\n" + step_line(2, 2.5, 2) + "\n" +
      R"({"event": "sample", "step": 2, "text": "two"})" + "\n" +
      R"({"event": "start", "first_step": 1})" + "\n" + step_line(2, 2.2, 0.5) + "\n" +
      R"({"event": "sample", "step": 2, "text": "two again"})" + "\n" +
      R"({"event": "sample", "text": "no step"})" + "\n";
  const report::MetricsRun r = report::parse_metrics(text, "run.jsonl");
  REQUIRE(r.samples.size() == 3);
  REQUIRE(r.samples[0].step == 1);
  REQUIRE(r.samples[0].text == "one");
  REQUIRE(r.samples[1].step == 2);
  REQUIRE(r.samples[1].text == "two again");
  REQUIRE(r.samples[2].step == -1);
  REQUIRE(r.sample == "no step");  // the last, as before
}

TEST_CASE("tokens and wall time at each step come from each session's run record",
          "[metrics_log]") {
  // 4 x 8 tokens a micro-batch, 2 micro-batches, 3 processes: 192 a step; the resume runs
  // one micro-batch on one process: 32
  const std::string text =
      R"({"event": "start", "first_step": 0, "processes": 3, "config": {"batch_size": 4, "context_length": 8, "grad_accum_steps": 2}})"
      "\n" +
      step_line(1, 3, 1) + "\n" + step_line(2, 2.5, 2) + "\n" + step_line(3, 2.4, 3) + "\n" +
      R"({"event": "start", "first_step": 2, "config": {"batch_size": 4, "context_length": 8}})" +
      "\n" + step_line(3, 2.2, 0.5) + "\n" + step_line(4, 2.1, 1.5) + "\n";
  const report::MetricsRun r = report::parse_metrics(text, "run.jsonl");
  REQUIRE(r.points.size() == 4);
  REQUIRE(r.points[0].tokens == 192);
  REQUIRE(r.points[1].tokens == 384);
  REQUIRE(r.points[2].tokens == 384 + 32);
  REQUIRE(r.points[3].tokens == 384 + 64);
  REQUIRE(r.points[1].wall_s == 2);
  REQUIRE(r.points[2].wall_s == 3.5);  // the first session's 3 s, then 0.5 s more
  REQUIRE(r.points[3].wall_s == 4.5);
  // without a run record there is no way to know the tokens
  const report::MetricsRun old = report::parse_metrics(step_line(1, 3, 1), "old.jsonl");
  REQUIRE(std::isnan(old.points[0].tokens));
  REQUIRE(old.points[0].wall_s == 1);
  REQUIRE(std::isnan(
      report::tokens_per_step(nlohmann::json::parse(R"({"config": {"batch_size": 4}})"))));
}

TEST_CASE("a run record's name names the run, with its file when two share it", "[metrics_log]") {
  std::vector<report::MetricsRun> runs(4);
  runs[0].path = "exp/a/run.jsonl", runs[1].path = "exp/b/run.jsonl";
  runs[2].path = "x.jsonl", runs[3].path = "y.jsonl";
  runs[0].start = {{"name", "baseline"}};
  runs[2].start = {{"name", "lr sweep"}};
  runs[3].start = {{"name", "lr sweep"}};
  report::name_runs(runs);
  REQUIRE(runs[0].name == "baseline");
  REQUIRE(runs[1].name == "b/run.jsonl");
  REQUIRE(runs[2].name == "lr sweep (x.jsonl)");
  REQUIRE(runs[3].name == "lr sweep (y.jsonl)");
}

TEST_CASE("a fresh start appended to a file is a second run, drawn beside the first",
          "[metrics_log]") {
  // what an older attograd wrote when `train --metrics` was run twice on one file
  const std::string text = std::string(kStart) + "\n" + step_line(1, 3, 1) + "\n" +
                           step_line(600, 1, 60) + "\n" + kStart + "\n" + step_line(1, 3.1, 1) +
                           "\n";
  const auto runs = report::parse_metrics_runs(text, "m.jsonl");
  REQUIRE(runs.size() == 2);
  REQUIRE(runs[0].points.size() == 2);
  REQUIRE(runs[0].points.back().step == 600);
  REQUIRE(runs[1].points.size() == 1);
  REQUIRE(runs[1].first_step == 0);
  REQUIRE(runs[1].sessions == 1);
  REQUIRE_THROWS_WITH(report::parse_metrics(text, "m.jsonl"), Contains("holds 2 runs"));
  auto named = runs;
  report::name_runs(named);
  REQUIRE(named[0].name == "m.jsonl (run 1 of 2)");
  REQUIRE(named[1].name == "m.jsonl (run 2 of 2)");
}

TEST_CASE("records name their run: a resume joins it, another run is drawn apart",
          "[metrics_log]") {
  auto start = [](const char* run, int64_t first, const char* name) {
    return fmt::format(R"({{"event": "start", "run": "{}", "first_step": {}, "name": "{}"}})", run,
                       first, name);
  };
  auto step = [](const char* run, int64_t s, double elapsed) {
    return fmt::format(R"({{"step": {}, "loss": 2, "elapsed_s": {}, "run": "{}"}})", s, elapsed,
                       run);
  };
  const std::string text = start("a", 0, "base") + "\n" + step("a", 1, 1) + "\n" + step("a", 2, 2) +
                           "\n" + start("b", 0, "wide") + "\n" + step("b", 1, 1) + "\n" +
                           start("a", 2, "base") + "\n" + step("a", 3, 1) + "\n" + step("b", 2, 2) +
                           "\n";
  auto runs = report::parse_metrics_runs(text, "m.jsonl");
  REQUIRE(runs.size() == 2);
  REQUIRE(runs[0].run_id == "a");
  REQUIRE(runs[0].points.size() == 3);
  REQUIRE(runs[0].first_step == 0);
  REQUIRE(runs[0].resumed_at == std::vector<int64_t>{2});
  REQUIRE(runs[0].sessions == 2);
  REQUIRE(runs[1].points.size() == 2);
  REQUIRE(runs[1].resumed_at.empty());
  REQUIRE(runs[0].notes == std::vector<std::string>{"a fresh start at step 0, resumed at step 2"});
  report::name_runs(runs);
  REQUIRE(runs[0].name == "base");  // the names they record
  REQUIRE(runs[1].name == "wide");
  // a file that begins at a resume says so
  const auto later =
      report::parse_metrics_runs(start("c", 400, "c") + "\n" + step("c", 401, 1), "later.jsonl");
  REQUIRE(later[0].first_step == 400);
  REQUIRE_THAT(later[0].notes.at(0), Contains("begins with a resume from step 400"));
  REQUIRE_THAT(
      [] {
        try {
          report::parse_metrics(R"({"step": 1, "run": 5})", "x");
        } catch (const report::MetricsError& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      Contains("'run' must be a non-empty string"));
}

TEST_CASE("a file of more runs than a page draws is refused saying so", "[metrics_log]") {
  std::string text;
  for (size_t i = 0; i <= report::kMaxRuns; ++i) text += std::string(kStart) + "\n";
  REQUIRE_THROWS_WITH(report::parse_metrics_runs(text, "many.jsonl"),
                      Contains("many.jsonl:65: more than 64 runs in one file"));
}

TEST_CASE("a checkpoint's history reads as a run", "[metrics_log]") {
  const std::vector<io::HistoryRow> rows = {
      {.step = 1, .loss = 4, .elapsed_s = 0.5},
      {.step = 50, .loss = 3, .val_loss = 3.2, .elapsed_s = 9}};
  const report::MetricsRun r =
      report::run_of_checkpoint_history(rows, {{"steps", 50}}, "id", "mine", "run.h5");
  REQUIRE(r.points.size() == 2);
  REQUIRE(r.points[1].val_loss == 3.2);
  REQUIRE(r.wall_seconds == 9);
  REQUIRE(r.start["name"] == "mine");
  REQUIRE(r.start["config"]["steps"] == 50);
}
