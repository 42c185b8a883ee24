#include "autograd/anomaly.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace ag {

namespace {

bool g_detect = false;
thread_local std::vector<std::string> g_paths;
FaultInjector g_injector = nullptr;

// "LinearBackward" -> "linear": how the op is known in forward.
std::string op_name(const char* node_name) {
  std::string s = node_name;
  const std::string suffix = "Backward";
  if (s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0)
    s.resize(s.size() - suffix.size());
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (std::isupper(static_cast<unsigned char>(c))) {
      if (i > 0) out += '_';
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out;
}

std::string where_text(const std::string& path) {
  return path.empty() ? "at the top level of the model" : fmt::format("in module {}", path);
}

}  // namespace

void set_detect_anomaly(bool on) {
  g_detect = on;
}
bool detect_anomaly() {
  return g_detect;
}
bool tracking_modules() {
  return g_detect || g_injector != nullptr;
}

AnomalyScope::AnomalyScope(const std::string& (*path_of)(const void*), const void* module) {
  if (!tracking_modules()) return;
  g_paths.push_back(path_of(module));
  pushed_ = true;
}
AnomalyScope::~AnomalyScope() {
  if (pushed_) g_paths.pop_back();
}

std::string current_module_path() {
  return g_paths.empty() ? "" : g_paths.back();
}

int64_t count_non_finite(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype())) return 0;
  int64_t bad = 0;
  for (double v : t.to_vector()) bad += !std::isfinite(v);
  return bad;
}

std::string describe_values(const Tensor& t) {
  if (!t.defined()) return "undefined";
  const std::string head = fmt::format("{} {}", shape_str(t.shape()), dtype_name(t.dtype()));
  if (!is_floating(t.dtype()) || t.numel() == 0) return head;
  const std::vector<double> v = t.to_vector();
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
  int64_t nan = 0, inf = 0, finite = 0, first = -1;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i]))
      ++nan;
    else if (std::isinf(v[i]))
      ++inf;
    else {
      lo = std::min(lo, v[i]), hi = std::max(hi, v[i]), sum += v[i], ++finite;
      continue;
    }
    if (first < 0) first = static_cast<int64_t>(i);
  }
  std::string stats = finite
                          ? fmt::format("min {:.4g} max {:.4g} mean {:.4g}", lo, hi, sum / finite)
                          : "no finite values";
  std::string bad = fmt::format("{} NaN, {} inf", nan, inf);
  if (first >= 0) bad += fmt::format(" (first at {})", index_str(t.shape(), first));
  return fmt::format("{}: {}, {}", head, stats, bad);
}

void check_forward(const char* node_name, const Tensor& out, const std::vector<Tensor>& inputs) {
  if (count_non_finite(out) == 0) return;
  std::string msg =
      fmt::format("anomaly: the forward of {} {} produced non-finite values: {}",
                  op_name(node_name), where_text(current_module_path()), describe_values(out));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined()) msg += fmt::format("; input {}: {}", i, describe_values(inputs[i]));
  throw AnomalyError(msg);
}

void check_backward(const char* node_name, const std::string& where, const Tensor& grad_out,
                    const std::vector<Tensor>& grads_in) {
  for (size_t i = 0; i < grads_in.size(); ++i) {
    if (count_non_finite(grads_in[i]) == 0) continue;
    throw AnomalyError(fmt::format(
        "anomaly: the backward of {} {} returned a non-finite gradient for its input {}: {}; "
        "the gradient it received: {}",
        op_name(node_name), where_text(where), i, describe_values(grads_in[i]),
        describe_values(grad_out)));
  }
}

void set_fault_injector(FaultInjector injector) {
  g_injector = injector;
}

bool inject_fault(bool backward, const std::string& where, Tensor& t,
                  const std::vector<Tensor>& inputs) {
  return g_injector != nullptr && g_injector(backward, where, t, inputs);
}

}  // namespace ag
