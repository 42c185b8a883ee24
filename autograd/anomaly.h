#pragma once
// Anomaly detection, like torch.autograd.detect_anomaly but pointing further: with it on,
// every recorded op's output is checked as it is made, and every backward's gradients as
// they come back. The first non-finite value stops the run with an AnomalyError that names
// the op, the module it ran in (nn modules open a scope with their dotted path, e.g.
// "blocks.0.mlp.fc2") and, for a forward, the statistics of each input, so the cause
// can be seen: a NaN weight, an input already overflowing, a division by zero.
//
//   ag::set_detect_anomaly(true);
//   try { loss = model.forward(x, y).loss; loss.backward(); }
//   catch (const ag::AnomalyError& e) { std::cerr << e.what(); }
//
// Off by default: the checks read every tensor once more.
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace ag {

struct AnomalyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void set_detect_anomaly(bool on);
bool detect_anomaly();
// Whether module scopes are being recorded (detection is on, or a fault injector installed).
bool tracking_modules();

// The module path of the current forward: modules open a scope around their forward.
// Costs one branch when anomaly detection is off.
class AnomalyScope {
 public:
  explicit AnomalyScope(const std::string& (*path_of)(const void*), const void* module);
  ~AnomalyScope();
  AnomalyScope(const AnomalyScope&) = delete;
  AnomalyScope& operator=(const AnomalyScope&) = delete;

 private:
  bool pushed_ = false;
};
// The innermost open scope's path, "" outside every module.
std::string current_module_path();

// "[3, 4] float32: min -1.2 max 3.4 mean 0.01, 2 NaN, 0 inf (first at [0, 2])"
std::string describe_values(const Tensor& t);
// Number of NaN and infinite elements (0 for non-float tensors).
int64_t count_non_finite(const Tensor& t);

// A fault injector: shown each recorded op's output as it is made (backward false, with the
// op's inputs) and each gradient a backward returns (backward true), with the module path
// the op ran in; it may replace or change the tensor, and returns whether it did (the
// engine then stops showing it that backward's other gradients). None by default; while
// one is installed, module scopes are recorded as under detection. The NaN injection of
// the autograd_testing library (test_hooks.h, set_nan_injection) installs one.
using FaultInjector = bool (*)(bool backward, const std::string& where, Tensor& t,
                               const std::vector<Tensor>& inputs);
void set_fault_injector(FaultInjector injector);  // nullptr removes it
// Called by the engine: the installed injector's answer, false without one.
bool inject_fault(bool backward, const std::string& where, Tensor& t,
                  const std::vector<Tensor>& inputs = {});

// Checks made by the engine (engine.cpp) when anomaly detection is on.
void check_forward(const char* op, const Tensor& out, const std::vector<Tensor>& inputs);
void check_backward(const char* op, const std::string& where, const Tensor& grad_out,
                    const std::vector<Tensor>& grads_in);

}  // namespace ag
