#pragma once
// A --metrics file read back for `attograd report` (the format: train/reporter.h). The file
// is data from elsewhere: a line that is not what train writes is an error naming the file
// and the line, except a last line without its newline that is not valid JSON yet (a run
// still writing it), which is skipped and noted. Events other than "start" and "sample"
// are skipped (later versions may add some).
//
// One file may hold several runs (train --overwrite empties it, but older attograds
// appended a fresh run to whatever was there): each record names its run ("run", the
// identity drawn when the run started) and its session's "first_step". A start record of a
// run already read, or one without an identity whose first_step is above 0, is a resume of
// that run (of the run before it, for records without identities); any other start
// record begins a new run. Every run is read and drawn; a file of more than kMaxRuns runs
// is refused, saying so.
//
// A resumed run appends to the same file; when its steps repeat steps already read (it
// continued from an earlier checkpoint), the later lines replace the earlier ones.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "io/history.h"

namespace report {

struct MetricsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct MetricsPoint {
  int64_t step = 0;
  double loss = NAN, lr = NAN, grad_norm = NAN, tokens_per_s = NAN, elapsed_s = NAN;
  double val_loss = NAN, val_bits_per_byte = NAN;  // at evaluations only
  // The report's other x axes, worked out while reading (not in the file):
  double tokens = NAN;  // trained on up to this step: per session, the session's tokens per
                        // step (batch_size x context_length x grad_accum_steps x processes,
                        // from its run record) times its steps, added to the tokens the run
                        // had at its first step; NaN where a session has no run record
  double wall_s = NAN;  // elapsed_s plus the wall time of the sessions before this one
};

struct MetricsSample {  // an {"event": "sample"} record
  int64_t step = -1;    // -1 when the record has none
  std::string text;
};

struct MetricsRun {
  std::string path;                 // as given
  std::string run_id;               // the records' "run"; "" in files of older attograds
  int64_t first_step = 0;           // 0: the file holds its fresh start; else where it resumed
  std::vector<int64_t> resumed_at;  // the first step of each later session that resumed it
  std::string name;      // for legends: the file name (more of the path when names clash)
  nlohmann::json start;  // the last session's run record; null when the file has none
  int sessions = 0;      // processes that wrote to it (a resume adds one)
  std::vector<MetricsPoint> points;  // by ascending step
  std::string sample;                // the last sample recorded, if any
  int64_t sample_step = -1;
  std::vector<MetricsSample> samples;  // every sample recorded, in the file's order (a resume
                                       // that repeats steps replaces the repeated ones)
  double wall_seconds = 0;             // summed over the sessions
  std::vector<std::string> notes;      // what was skipped, and why; where it was resumed

  bool has(double MetricsPoint::*field) const;  // any point holds a finite value
};

// A file holds at most this many runs.
inline constexpr size_t kMaxRuns = 64;

// The tokens one step of a run trains on: batch_size x context_length x grad_accum_steps x
// processes of its run record (a missing accumulation or processes counts as 1); NaN when
// the record lacks batch_size or context_length.
double tokens_per_step(const nlohmann::json& start);

// Every run of a file, in the order they began. Throws MetricsError("NAME:LINE: ...").
std::vector<MetricsRun> parse_metrics_runs(std::string_view text, const std::string& name);
// The file (a regular file, at most 1 GiB), parsed. Throws MetricsError or io's errors.
std::vector<MetricsRun> read_metrics_runs(const std::string& path);
// The same from lines already split (a live run's records), without newlines.
std::vector<MetricsRun> parse_metrics_lines(const std::vector<std::string>& lines,
                                            const std::string& name);
// A file of one run: its run, or a MetricsError saying how many it holds.
MetricsRun parse_metrics(std::string_view text, const std::string& name);
MetricsRun read_metrics(const std::string& path);

// The history a checkpoint keeps (io/history.h) as a run: `report --checkpoint FILE` draws
// its curves without a metrics file. Its points have no val_loss where none was measured.
MetricsRun run_of_checkpoint_history(const std::vector<io::HistoryRow>& rows,
                                     const nlohmann::json& config, const std::string& run_id,
                                     const std::string& run_name, const std::string& path);

// Legend names for several runs: the run record's "name" (train --name) when it has one,
// else the file's name, or as much of its path as tells it apart; a name that two runs
// share is followed by that file name in parentheses, and runs of one file without names
// are told apart by their order.
void name_runs(std::vector<MetricsRun>& runs);

}  // namespace report
