#pragma once
// What a training run prints as it goes: a progress bar on a terminal, a report line at the
// log interval (loss, validation, learning rate, gradient norm, tokens/s, ETA), and the
// same figures as JSON lines in --metrics.
#include <chrono>
#include <optional>

#include "train/config.h"
#include "train/console.h"

namespace train {

struct StepFigures {
  int64_t step = 0;
  double loss = 0, val_loss = NAN, lr = 0, grad_norm = 0;
  double val_bits_per_byte = NAN;  // the validation loss per byte of text
  int64_t tokens = 0;              // trained on in this process so far
};

class Reporter {
 public:
  Reporter(const RunConfig& cfg, int64_t first_step);
  double elapsed() const;
  // What follows a progress bar on a terminal starts on a line of its own.
  const char* fresh_line() const { return tty_ ? "\n" : ""; }
  void progress(int64_t step, double loss);
  void line(const StepFigures& f);

 private:
  const RunConfig& cfg_;
  std::optional<MetricsFile> metrics_;
  bool tty_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  int64_t first_step_ = 0;
};

// "1:02:03", or "2:03" under an hour.
std::string format_duration(double seconds);

}  // namespace train
