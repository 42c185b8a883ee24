#pragma once
// What a training run will hold in memory, estimated before step 1 so that a run that
// cannot fit is refused up front instead of being killed half-way.
#include <cstdint>
#include <string>

#include "train/config.h"

namespace train {

struct MemoryPlan {
  int64_t parameters = 0, gradients = 0, optimizer = 0, activations = 0;
  int64_t available = 0;  // MemAvailable from /proc/meminfo, 0 when unknown
  int64_t total() const {  // saturates rather than overflows
    const double t = static_cast<double>(parameters) + gradients + optimizer + activations;
    return t < 9e18 ? static_cast<int64_t>(t) : static_cast<int64_t>(9e18);
  }
  bool fits() const { return available == 0 || total() < available; }
  std::string describe() const;
};

// Bytes, float32. Activations: what the graph saves per token and layer (attention and
// MLP inputs and outputs, dropout masks, LayerNorm statistics; about 20*d_model +
// 2*d_ff floats), doubled for backward's transients, plus three logits-sized buffers.
MemoryPlan plan_memory(const RunConfig& cfg, int64_t num_parameters);
std::string format_bytes(int64_t bytes);

}  // namespace train
