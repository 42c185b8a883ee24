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
  const int64_t tokens = cfg.batch_size * m.context_length;
  const int64_t per_token = m.n_layers * (20 * m.d_model + 2 * m.ff_width()) * 2 +
                            3 * m.vocab_size + 4 * m.d_model;
  MemoryPlan p;
  p.parameters = 4 * num_parameters;
  p.gradients = 4 * num_parameters;
  p.optimizer = 8 * num_parameters;  // AdamW's two moments
  p.activations = 4 * tokens * per_token;
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
