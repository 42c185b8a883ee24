#pragma once
// What a training run prints as it goes: a progress bar on a terminal (step, loss, tokens/s,
// ETA), a report line at the log interval (the mean loss since the previous line, the
// validation loss and over how many windows it was measured, learning rate, gradient norm,
// tokens/s, ETA), the same figures as a row of the run's history (kept in its checkpoint,
// io/history.h) and as JSON lines in --metrics. Tokens/s and the ETA come from the rate of
// the recent steps after a warm-up (rate_meter.h).
//
// --metrics, one JSON object a line, appended (a resumed run adds to its own file); every
// record names its run ("run": the identity drawn when the run started, kept by resume)
// and the session's "first_step" (0: a fresh start; a resume's is its checkpoint's step):
//   {"event": "start", "run": "9f2c...", "name": "run", "first_step": 0, "resumed": false,
//    "config": {...}, "parameters": N, "memory_plan": {...}, ...}
//       once per session, before its first step (TrainingRun::run_record)
//   {"step": 50, "loss": 2.1, "loss_steps": 50, "lr": 0.001, "grad_norm": 0.8, "tokens_per_s":
//   41000,
//    "elapsed_s": 12.5, "eta_s": 480, "val_loss": 2.2, "val_bits_per_byte": 3.1,
//    "val_windows": 8, "run": ..., "first_step": 0}
//       at each report line: "loss" is the mean over the steps since the previous line,
//       "loss_steps" of them (a resumed run's first line: the steps since the resume; the
//       printed line says "(mean of N steps)" whenever N is not the log interval);
//       "tokens_per_s" counts real tokens (a task's padding excluded: Batch::tokens);
//       val_* only at evaluations (val_examples instead of val_windows for a task's
//       examples); eta_s once the rate is known; elapsed_s counts from the session's start
//   {"event": "stop", "step": 700, "reason": "early stopping: ...", "run": ..., ...}
//       when the run ends before its last step on its own account (--early-stopping)
//   {"event": "sample", "step": 250, "text": "...", "run": ..., "first_step": 0}
//       at each evaluation before the last when the run records a sample (Reporter::
//       wants_samples: --metrics or --report, a language model on text, sample_tokens > 0),
//       and the sample printed at the end
// Readers skip events they do not know (report/metrics_log.h reads it for `attograd report`).
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/history.h"
#include "train/config.h"
#include "train/console.h"
#include "train/rate_meter.h"

namespace train {

struct StepFigures {
  int64_t step = 0;
  double loss = 0, val_loss = NAN, lr = 0, grad_norm = 0;
  double val_bits_per_byte = NAN;  // the validation loss per byte of text
  double val_accuracy = NAN;       // a classifier's held-out accuracy
  int64_t val_windows = 0;         // the validation windows the val loss was measured over
  int64_t val_examples = 0;        // or a task's held-out examples
  int64_t tokens = 0;              // real tokens (no padding) trained on in this session so far
};

// Which run a session continues, and what it has recorded so far.
struct RunIdentity {
  std::string id;    // drawn at a fresh start (new_run_id), kept by resume
  std::string name;  // train --name (default: the output file's name without its extension)
  int64_t first_step = 0;
  bool resumed = false;
  std::vector<io::HistoryRow> history;  // a resumed checkpoint's rows
};

// 16 hexadecimal digits from the system's random source and the clock.
std::string new_run_id();

class Reporter {
 public:
  // keep_records: also keep this session's JSON lines in memory (for a live report).
  Reporter(const RunConfig& cfg, RunIdentity identity, bool keep_records = false);
  double elapsed() const;
  // What follows a progress bar on a terminal starts on a line of its own.
  const char* fresh_line() const { return tty_ ? "\n" : ""; }
  // Every step ends in one of these two: a report line, or (on a terminal) the bar.
  void progress(const StepFigures& f);
  void line(const StepFigures& f);
  void start(const nlohmann::json& run_record);        // {"event": "start", ...}
  void sample(int64_t step, const std::string& text);  // {"event": "sample", ...}
  void stop(int64_t step, const std::string& reason);  // {"event": "stop", ...}
  bool recording() const { return metrics_ || keep_records_; }
  // This session's lines, as written to --metrics (empty unless keep_records).
  const std::vector<std::string>& records() const { return records_; }
  const RunIdentity& identity() const { return identity_; }
  // The run's history: the resumed checkpoint's rows, then this session's report lines.
  const std::vector<io::HistoryRow>& history() const { return identity_.history; }

 private:
  void take_step(const StepFigures& f);
  void record(nlohmann::json j);

  const RunConfig& cfg_;
  RunIdentity identity_;
  std::optional<MetricsFile> metrics_;
  bool tty_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double elapsed_before_ = 0;  // the run's training time in earlier sessions (its history)
  double loss_sum_ = 0;        // since the previous report line, in step order
  int64_t loss_count_ = 0;
  RateMeter rate_;
  bool keep_records_ = false;
  std::vector<std::string> records_;
};

// "1:02:03", or "2:03" under an hour.
std::string format_duration(double seconds);

}  // namespace train
