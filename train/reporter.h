#pragma once
// What a training run prints as it goes: a progress bar on a terminal, a report line at the
// log interval (loss, validation, learning rate, gradient norm, tokens/s, ETA), and the
// same figures as JSON lines in --metrics.
//
// --metrics, one JSON object a line, appended (a resumed run adds to the same file):
//   {"event": "start", "config": {...}, "parameters": N, "memory_plan": {...}, ...}
//       once per session, before its first step (TrainingRun::run_record)
//   {"step": 50, "loss": 2.1, "lr": 0.001, "grad_norm": 0.8, "tokens_per_s": 41000,
//    "elapsed_s": 12.5, "eta_s": 480, "val_loss": 2.2, "val_bits_per_byte": 3.1}
//       at each report line; val_* only at evaluations
//   {"event": "sample", "step": 2000, "text": "..."}   the sample printed at the end
// Readers skip events they do not know (report/metrics_log.h reads it for `attograd report`).
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "train/config.h"
#include "train/console.h"

namespace train {

struct StepFigures {
  int64_t step = 0;
  double loss = 0, val_loss = NAN, lr = 0, grad_norm = 0;
  double val_bits_per_byte = NAN;  // the validation loss per byte of text
  double val_accuracy = NAN;       // a classifier's held-out accuracy
  int64_t tokens = 0;              // trained on in this process so far
};

class Reporter {
 public:
  // keep_records: also keep this session's JSON lines in memory (for a live report).
  Reporter(const RunConfig& cfg, int64_t first_step, bool keep_records = false);
  double elapsed() const;
  // What follows a progress bar on a terminal starts on a line of its own.
  const char* fresh_line() const { return tty_ ? "\n" : ""; }
  void progress(int64_t step, double loss);
  void line(const StepFigures& f);
  void start(const nlohmann::json& run_record);        // {"event": "start", ...}
  void sample(int64_t step, const std::string& text);  // {"event": "sample", ...}
  // This session's lines, as written to --metrics (empty unless keep_records).
  const std::vector<std::string>& records() const { return records_; }

 private:
  void record(const nlohmann::json& j);

  const RunConfig& cfg_;
  std::optional<MetricsFile> metrics_;
  bool tty_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  int64_t first_step_ = 0;
  bool keep_records_ = false;
  std::vector<std::string> records_;
};

// "1:02:03", or "2:03" under an hour.
std::string format_duration(double seconds);

}  // namespace train
