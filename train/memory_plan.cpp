#include "train/memory_plan.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace train {

std::string format_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  return fmt::format("{:.1f} kB", b / 1e3);
}

namespace {
int64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string key;
    int64_t kb = 0;
    if (ss >> key >> kb && key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}
}  // namespace

MemoryPlan plan_memory(const RunConfig& cfg, int64_t num_parameters) {
  const auto& m = cfg.model;
  // in double: absurd sizes must give an absurd plan, not an overflowed one
  const double tokens = static_cast<double>(cfg.batch_size) * static_cast<double>(m.context_length);
  const double per_token = static_cast<double>(m.n_layers) * (20.0 * m.d_model + 2.0 * m.ff_width()) * 2 +
                           3.0 * m.vocab_size + 4.0 * m.d_model;
  auto bytes = [](double b) {
    return b < 9e18 ? static_cast<int64_t>(b) : static_cast<int64_t>(9e18);
  };
  MemoryPlan p;
  p.parameters = bytes(4.0 * num_parameters);
  p.gradients = bytes(4.0 * num_parameters);
  p.optimizer = bytes(8.0 * num_parameters);  // AdamW's two moments
  p.activations = bytes(4.0 * tokens * per_token);
  p.available = available_memory();
  return p;
}

std::string MemoryPlan::describe() const {
  return fmt::format(
      "memory plan: parameters {} + gradients {} + AdamW state {} + activations ~{} = ~{}{}",
      format_bytes(parameters), format_bytes(gradients), format_bytes(optimizer),
      format_bytes(activations), format_bytes(total()),
      available ? fmt::format(" of {} available", format_bytes(available)) : "");
}

}  // namespace train
