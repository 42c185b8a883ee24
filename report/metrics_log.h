#pragma once
// A --metrics file read back for `attograd report` (the format: train/reporter.h). The file
// is data from elsewhere: a line that is not what train writes is an error naming the file
// and the line, except a last line without its newline that is not valid JSON yet (a run
// still writing it), which is skipped and noted. Events other than "start" and "sample"
// are skipped (later versions may add some).
//
// A resumed run appends to the same file; when its steps repeat steps already read (it
// continued from an earlier checkpoint), the later lines replace the earlier ones.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace report {

struct MetricsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct MetricsPoint {
  int64_t step = 0;
  double loss = NAN, lr = NAN, grad_norm = NAN, tokens_per_s = NAN, elapsed_s = NAN;
  double val_loss = NAN, val_bits_per_byte = NAN;  // at evaluations only
};

struct MetricsRun {
  std::string path;      // as given
  std::string name;      // for legends: the file name (more of the path when names clash)
  nlohmann::json start;  // the last session's run record; null when the file has none
  int sessions = 0;      // processes that wrote to it (a resume adds one)
  std::vector<MetricsPoint> points;  // by ascending step
  std::string sample;                // the last sample printed at a run's end, if any
  int64_t sample_step = -1;
  double wall_seconds = 0;         // summed over the sessions
  std::vector<std::string> notes;  // what was skipped, and why

  bool has(double MetricsPoint::*field) const;  // any point holds a finite value
};

// Throws MetricsError("NAME:LINE: ...").
MetricsRun parse_metrics(std::string_view text, const std::string& name);
// The file (a regular file, at most 1 GiB), parsed. Throws MetricsError or io's errors.
MetricsRun read_metrics(const std::string& path);
// The same from lines already split (a live run's records), without newlines.
MetricsRun parse_metrics_lines(const std::vector<std::string>& lines, const std::string& name);

// Legend names for several runs: each file's name, or as much of its path as tells it apart.
void name_runs(std::vector<MetricsRun>& runs);

}  // namespace report
