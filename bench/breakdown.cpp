#include "bench/breakdown.h"

#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

namespace bench {

namespace {

constexpr const char* kOutside = "outside every timer (graph bookkeeping, allocation, glue)";

double gflops_of(const ag::profile::Row& row) {
  return row.flops > 0 && row.seconds > 0 ? row.flops / row.seconds / 1e9 : 0.0;
}

void print_json(const BreakdownRun& run, const std::vector<ag::profile::Row>& rows, double timed_ms,
                double step_ms) {
  const double steps = static_cast<double>(run.steps);
  nlohmann::json out = nlohmann::json::array();
  for (const ag::profile::Row& row : rows)
    out.push_back({{"name", row.name},
                   {"kernel", row.kernel},
                   {"calls_per_step", static_cast<double>(row.calls) / steps},
                   {"ms_per_step", row.seconds * 1e3 / steps},
                   {"share", row.seconds * 1e3 / steps / step_ms},
                   {"gflops", gflops_of(row)}});
  std::cout << nlohmann::json{{"breakdown", run.title},
                              {"steps", run.steps},
                              {"step_ms", step_ms},
                              {"timed_ms", timed_ms},
                              {"outside_ms", step_ms - timed_ms},
                              {"onednn_lookups_per_step",
                               static_cast<double>(run.onednn_lookups) / steps},
                              {"onednn_made", run.onednn_made},
                              {"rows", out}}
                   .dump()
            << std::endl;
}

}  // namespace

void print_breakdown(const BreakdownRun& run, const std::vector<ag::profile::Row>& rows,
                     bool json) {
  const double steps = static_cast<double>(run.steps);
  const double step_ms = run.measured_seconds * 1e3 / steps;
  double timed_ms = 0;
  for (const ag::profile::Row& row : rows) timed_ms += row.seconds * 1e3 / steps;
  if (json) return print_json(run, rows, timed_ms, step_ms);
  fmt::print("where a step's time goes: {}, mean of {} steps, {:.2f} ms a step\n", run.title,
             run.steps, step_ms);
  fmt::print("{:>9} {:>6} {:>8} {:>8}  {:<44} {}\n", "ms/step", "share", "calls", "GFLOP/s", "row",
             "kernel");
  auto line = [&](double ms, double calls, double gflops, const std::string& name,
                  const std::string& kernel) {
    fmt::print("{:9.3f} {:5.1f}% {:8.1f} {:>8}  {:<44} {}\n", ms, 100 * ms / step_ms, calls,
               gflops > 0 ? fmt::format("{:.1f}", gflops) : "", name, kernel);
  };
  for (const ag::profile::Row& row : rows)
    line(row.seconds * 1e3 / steps, static_cast<double>(row.calls) / steps, gflops_of(row),
         row.name, row.kernel);
  line(step_ms - timed_ms, 0, 0, kOutside, "");
  fmt::print("the timers cover {:.1f}% of the measured step\n", 100 * timed_ms / step_ms);
  fmt::print("oneDNN matmuls: {:.0f} looked up a step, {} made in the timed steps\n",
             static_cast<double>(run.onednn_lookups) / steps, run.onednn_made);
}

}  // namespace bench
