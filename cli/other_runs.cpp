#include "cli/other_runs.h"

#include <fmt/format.h>

#include <optional>

#include "base/posix_file.h"
#include "base/shell_quote.h"
#include "base/utf8.h"
#include "cli/options.h"
#include "io/files.h"
#include "report/metrics_log.h"
#include "train/world.h"

namespace cli {

namespace {

std::string& program() {
  static std::string path = "attograd";
  return path;
}

// Whether something is at `path` (an empty file is nothing: no run wrote it).
bool holds_something(const std::string& path) {
  try {
    return base::regular_file_size(path, "file") > 0;
  } catch (const std::exception&) {
    return false;  // missing; anything else claim_outputs has refused already
  }
}

std::string named(const std::string& name) {
  return name.empty() ? "" : fmt::format(" '{}'", base::printable(name));
}

// "run 'baseline', steps 1-600", of the runs a metrics file holds, or why it reads as none.
std::string runs_in(const std::vector<report::MetricsRun>& runs) {
  if (runs.empty()) return "no step lines";
  const report::MetricsRun& r = runs.back();
  const auto it = r.start.is_object() ? r.start.find("name") : r.start.end();
  const std::string name = it != r.start.end() && it->is_string() ? it->get<std::string>() : "";
  std::string what = fmt::format("run{}", named(name));
  if (!r.points.empty())
    what += fmt::format(", steps {} to {}", r.points.front().step, r.points.back().step);
  return runs.size() == 1 ? what : fmt::format("{} runs, the last {}", runs.size(), what);
}

void refuse_other_checkpoint(const std::string& out) {
  std::string held;
  try {
    const io::Checkpoint c = io::load_checkpoint(out, {.weights_only = true});
    const int64_t steps = c.config.value("steps", int64_t{0});
    held = fmt::format("holds the checkpoint of another run{} (step {}{})", named(c.run_name),
                       c.step, steps > 0 ? fmt::format(" of {}", steps) : "");
  } catch (const std::exception& e) {
    held = fmt::format("holds a file that is not a checkpoint this attograd reads ({})", e.what());
  }
  throw UsageError(fmt::format(
      "--out '{}' {}; continue that run with '{} resume --checkpoint {}', or start this run "
      "over it with --overwrite",
      base::printable(out), held, program(), base::shell_quote(out)));
}

// What a file given as --metrics holds when it is not metrics: a checkpoint named there by
// mistake is said to be one, not quoted as a JSON error about its first byte.
std::string not_metrics(const std::string& metrics, const std::exception& e) {
  if (io::is_hdf5_file(metrics)) return "an HDF5 file (a checkpoint?), not metrics";
  return fmt::format("lines that are not attograd metrics ({})", e.what());
}

void refuse_other_metrics(const std::string& metrics) {
  std::vector<report::MetricsRun> runs;
  try {
    runs = report::read_metrics_runs(metrics);
  } catch (const std::exception& e) {
    throw UsageError(
        fmt::format("--metrics '{}' holds {}; give another --metrics, or replace it "
                    "with --overwrite",
                    base::printable(metrics), not_metrics(metrics, e)));
  }
  throw UsageError(fmt::format(
      "--metrics '{}' already holds the metrics of another run ({}); continue that run with "
      "'{} resume --checkpoint <its checkpoint> --metrics {}', or start this run over it with "
      "--overwrite",
      base::printable(metrics), runs_in(runs), program(), base::shell_quote(metrics)));
}

}  // namespace

void set_program_path(const std::string& path) {
  if (!path.empty()) program() = path;
}

const std::string& program_path() {
  return program();
}

// Rank 0 alone checks, as it alone writes them: another rank looking later could find the
// lines rank 0 has begun to write (its failure is agreed on by every rank, report_failure).
void refuse_other_runs(const train::RunConfig& cfg) {
  if (cfg.overwrite || !train::World::current().root()) return;
  if (holds_something(cfg.out)) refuse_other_checkpoint(cfg.out);
  if (!cfg.metrics.empty() && holds_something(cfg.metrics)) refuse_other_metrics(cfg.metrics);
}

void refuse_other_run_metrics(const std::string& metrics, const io::Checkpoint& resumed) {
  if (metrics.empty() || !train::World::current().root() || !holds_something(metrics)) return;
  std::vector<report::MetricsRun> runs;
  try {
    runs = report::read_metrics_runs(metrics);
  } catch (const std::exception& e) {
    throw UsageError(fmt::format("--metrics '{}' holds {}; give another --metrics file",
                                 base::printable(metrics), not_metrics(metrics, e)));
  }
  for (const report::MetricsRun& r : runs)
    if (!r.run_id.empty() && r.run_id != resumed.run_id)
      throw UsageError(fmt::format(
          "--metrics '{}' holds the metrics of another run ({}, run {}), not of the run '{}' "
          "continues (run {}); give that run's metrics file, or a new one",
          base::printable(metrics), runs_in({r}), base::printable(r.run_id), resumed.source,
          resumed.run_id.empty() ? "not recorded" : resumed.run_id));
}

}  // namespace cli
