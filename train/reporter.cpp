#include "train/reporter.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "train/world.h"

namespace train {

std::string format_duration(double seconds) {
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60)
                   : fmt::format("{}:{:02d}", s / 60, s % 60);
}

Reporter::Reporter(const RunConfig& cfg, int64_t first_step, bool keep_records)
    // mpirun gives its ranks a pseudo-terminal whatever its own output is: no live bar there
    : cfg_(cfg),
      tty_(isatty(STDOUT_FILENO) && !World::current().distributed()),
      first_step_(first_step),
      keep_records_(keep_records) {
  if (!cfg_.metrics.empty()) metrics_.emplace(cfg_.metrics);
}

double Reporter::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Reporter::progress(int64_t step, double loss) {
  if (!tty_) return;
  const int width = 24;
  const int filled = static_cast<int>(width * step / std::max<int64_t>(cfg_.steps, 1));
  sayf("\r[{}{}] step {}/{} loss {:.4f}\033[K", std::string(filled, '#'),
       std::string(width - filled, '.'), step, cfg_.steps, loss);
}

void Reporter::line(const StepFigures& f) {
  const double secs = elapsed();
  const double done = static_cast<double>(f.step - first_step_);
  const double tok_s = secs > 0 ? f.tokens / secs : 0;
  const double eta = done > 0 ? secs / done * (cfg_.steps - f.step) : 0;
  std::string val = std::isnan(f.val_loss) ? "" : fmt::format(" | val {:.4f}", f.val_loss);
  if (!std::isnan(f.val_bits_per_byte))
    val += fmt::format(" ({:.3f} bits/byte)", f.val_bits_per_byte);
  if (!std::isnan(f.val_accuracy)) val += fmt::format(" | val accuracy {:.4f}", f.val_accuracy);
  sayf("{}step {:>5}/{} | loss {:.4f}{} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | ETA {}\n",
       tty_ ? "\r\033[K" : "", f.step, cfg_.steps, f.loss, val, f.lr, f.grad_norm, tok_s,
       format_duration(eta));
  if (!metrics_ && !keep_records_) return;
  nlohmann::json j = {
      {"step", f.step},        {"loss", f.loss},    {"lr", f.lr},  {"grad_norm", f.grad_norm},
      {"tokens_per_s", tok_s}, {"elapsed_s", secs}, {"eta_s", eta}};
  if (!std::isnan(f.val_loss)) j["val_loss"] = f.val_loss;
  if (!std::isnan(f.val_bits_per_byte)) j["val_bits_per_byte"] = f.val_bits_per_byte;
  if (!std::isnan(f.val_accuracy)) j["val_accuracy"] = f.val_accuracy;
  record(j);
}

void Reporter::start(const nlohmann::json& run_record) {
  nlohmann::json j = run_record;
  j["event"] = "start";
  record(j);
}

void Reporter::sample(int64_t step, const std::string& text) {
  record({{"event", "sample"}, {"step", step}, {"text", text}});
}

void Reporter::record(const nlohmann::json& j) {
  if (!metrics_ && !keep_records_) return;
  // a byte tokenizer's sample may stop inside a character: never let that end the run
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (metrics_) metrics_->append(line);
  if (keep_records_) records_.push_back(line);
}

}  // namespace train
