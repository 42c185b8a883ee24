#include "train/reporter.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "train/world.h"

namespace train {

std::string format_duration(double seconds) {
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60)
                   : fmt::format("{}:{:02d}", s / 60, s % 60);
}

std::string new_run_id() {
  std::random_device device;
  const uint64_t clock = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch() /
                                               std::chrono::nanoseconds(1));
  const uint64_t drawn = (uint64_t{device()} << 32) ^ device();
  return fmt::format("{:016x}", drawn ^ (clock * 0x9e3779b97f4a7c15ULL));
}

namespace {

std::string eta_text(const std::optional<double>& eta) {
  return eta ? format_duration(*eta) : "?";
}

// " | val 2.1234 (3.012 bits/byte) over 8 windows", or "" when the step had no evaluation.
std::string val_text(const StepFigures& f) {
  if (std::isnan(f.val_loss)) return "";
  std::string val = fmt::format(" | val {:.4f}", f.val_loss);
  if (!std::isnan(f.val_bits_per_byte))
    val += fmt::format(" ({:.3f} bits/byte)", f.val_bits_per_byte);
  if (f.val_windows > 0)
    val += fmt::format(" over {} window{}", f.val_windows, f.val_windows == 1 ? "" : "s");
  if (f.val_examples > 0)
    val += fmt::format(" over {} example{}", f.val_examples, f.val_examples == 1 ? "" : "s");
  if (!std::isnan(f.val_accuracy)) val += fmt::format(" | val accuracy {:.4f}", f.val_accuracy);
  return val;
}

// " (mean of 13 steps)" when a report line's loss is not the mean over a log interval (a
// resumed run's first line, the lines at an evaluation or the end), else "".
std::string mean_text(int64_t steps, int64_t log_interval) {
  return steps > 1 && steps != log_interval ? fmt::format(" (mean of {} steps)", steps) : "";
}

}  // namespace

Reporter::Reporter(const RunConfig& cfg, RunIdentity identity, bool keep_records)
    // mpirun gives its ranks a pseudo-terminal whatever its own output is: no live bar there
    : cfg_(cfg),
      identity_(std::move(identity)),
      tty_(isatty(STDOUT_FILENO) && !World::current().distributed()),
      keep_records_(keep_records) {
  if (!cfg_.metrics.empty()) metrics_.emplace(cfg_.metrics, cfg_.overwrite);
  if (!identity_.history.empty() && std::isfinite(identity_.history.back().elapsed_s))
    elapsed_before_ = identity_.history.back().elapsed_s;
}

double Reporter::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Reporter::take_step(const StepFigures& f) {
  loss_sum_ += f.loss;
  ++loss_count_;
  rate_.tick(f.step, f.tokens, elapsed());
}

void Reporter::progress(const StepFigures& f) {
  take_step(f);
  if (!tty_) return;
  const int width = 24;
  const int filled = static_cast<int>(width * f.step / std::max<int64_t>(cfg_.steps, 1));
  const auto tok_s = rate_.tokens_per_second();
  sayf("\r[{}{}] step {}/{} loss {:.4f} | {} tok/s | ETA {}\033[K", std::string(filled, '#'),
       std::string(width - filled, '.'), f.step, cfg_.steps,
       loss_sum_ / static_cast<double>(loss_count_), tok_s ? fmt::format("{:.0f}", *tok_s) : "?",
       eta_text(rate_.eta(f.step, cfg_.steps)));
}

void Reporter::line(const StepFigures& step) {
  take_step(step);
  StepFigures f = step;
  f.loss = loss_sum_ / static_cast<double>(loss_count_);  // the same on every rank
  const int64_t loss_steps = loss_count_;
  loss_sum_ = 0, loss_count_ = 0;
  const double secs = elapsed();
  const double tok_s = rate_.tokens_per_second().value_or(secs > 0 ? f.tokens / secs : 0);
  const std::optional<double> eta = rate_.eta(f.step, cfg_.steps);
  sayf("{}step {:>5}/{} | loss {:.4f}{}{} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | ETA {}\n",
       tty_ ? "\r\033[K" : "", f.step, cfg_.steps, f.loss, mean_text(loss_steps, cfg_.log_interval),
       val_text(f), f.lr, f.grad_norm, tok_s, eta_text(eta));
  io::append_history(identity_.history, {.step = f.step,
                                         .loss = f.loss,
                                         .val_loss = f.val_loss,
                                         .val_bits_per_byte = f.val_bits_per_byte,
                                         .lr = f.lr,
                                         .grad_norm = f.grad_norm,
                                         .tokens_per_s = tok_s,
                                         .elapsed_s = elapsed_before_ + secs});
  if (!recording()) return;
  nlohmann::json j = {{"step", f.step},   {"loss", f.loss},           {"loss_steps", loss_steps},
                      {"lr", f.lr},       {"grad_norm", f.grad_norm}, {"tokens_per_s", tok_s},
                      {"elapsed_s", secs}};
  if (eta) j["eta_s"] = *eta;
  if (!std::isnan(f.val_loss)) j["val_loss"] = f.val_loss;
  if (!std::isnan(f.val_bits_per_byte)) j["val_bits_per_byte"] = f.val_bits_per_byte;
  if (!std::isnan(f.val_accuracy)) j["val_accuracy"] = f.val_accuracy;
  if (f.val_windows > 0) j["val_windows"] = f.val_windows;
  if (f.val_examples > 0) j["val_examples"] = f.val_examples;
  record(std::move(j));
}

void Reporter::start(const nlohmann::json& run_record) {
  nlohmann::json j = run_record;
  j["event"] = "start";
  j["name"] = identity_.name;
  j["resumed"] = identity_.resumed;
  record(std::move(j));
}

void Reporter::sample(int64_t step, const std::string& text) {
  record({{"event", "sample"}, {"step", step}, {"text", text}});
}

void Reporter::stop(int64_t step, const std::string& reason) {
  record({{"event", "stop"}, {"step", step}, {"reason", reason}});
}

void Reporter::record(nlohmann::json j) {
  if (!recording()) return;
  j["run"] = identity_.id;
  j["first_step"] = identity_.first_step;
  // a byte tokenizer's sample may stop inside a character: never let that end the run
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (metrics_) metrics_->append(line);
  if (keep_records_) records_.push_back(line);
}

}  // namespace train
