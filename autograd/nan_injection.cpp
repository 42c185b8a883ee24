// The NaN injection of test_hooks.h: a fault injector (anomaly.h) that plants one NaN where
// a spec names, for the anomaly tests and `train --inject-nan`. It lives in the
// autograd_testing library, so that attograd::core holds only the engine's injection point.
#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "autograd/anomaly.h"
#include "autograd/test_hooks.h"

namespace ag {

namespace {

std::string g_inject_phase, g_inject_path;
bool g_injected = false;

}  // namespace

void set_nan_injection(const std::string& spec) {
  g_inject_phase.clear(), g_inject_path.clear(), g_injected = false;
  set_fault_injector(nullptr);
  if (spec.empty()) return;
  const auto colon = spec.find(':');
  const std::string phase = spec.substr(0, colon);
  if (colon == std::string::npos || (phase != "forward" && phase != "backward") ||
      colon + 1 == spec.size())
    throw std::invalid_argument(
        fmt::format("NaN injection '{}': expected forward:MODULE or backward:MODULE (e.g. "
                    "backward:blocks.0.mlp.fc2)",
                    spec));
  g_inject_phase = phase;
  g_inject_path = spec.substr(colon + 1);
  set_fault_injector(maybe_inject_nan);
}

bool maybe_inject_nan(bool backward, const std::string& where, Tensor& t,
                      const std::vector<Tensor>& inputs) {
  if (g_injected || g_inject_path.empty() || where != g_inject_path ||
      (g_inject_phase == "backward") != backward || !t.defined() || !is_floating(t.dtype()) ||
      t.numel() == 0)
    return false;
  if (backward) {
    t = t.detach().clone();  // a gradient may be shared: plant the NaN in a copy
  } else {
    for (const auto& in : inputs)  // a view of an input: wait for an op with its own output
      if (in.defined() && t.shares_storage_with(in)) return false;
  }
  t.set(std::vector<int64_t>(t.dim(), 0), std::nan(""));
  g_injected = true;
  return true;
}

}  // namespace ag
