// PyTorch-style printing: tensor([[0.1385, 0.2379]]). Four decimals, or "1." when every
// value is an integer, or scientific notation when magnitudes span more than 1e3 (or
// exceed 1e8 or fall below 1e-4); columns aligned; more than 1000 elements summarised.
#include <fmt/format.h>

#include <cmath>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/tensor.h"

namespace ag {

namespace {

constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int64_t kLineWidth = 80;

struct Formatter {
  DType dtype;
  bool int_mode = true;
  bool sci_mode = false;
  size_t width = 1;

  explicit Formatter(DType dt, const std::vector<double>& values) : dtype(dt) {
    if (!is_floating(dt) && dt != DType::BFloat16) {
      for (double v : values) width = std::max(width, format(v).size());
      return;
    }
    double lo = INFINITY, hi = 0;
    for (double v : values) {
      if (!std::isfinite(v)) continue;
      if (v != std::ceil(v)) int_mode = false;
      double a = std::fabs(v);
      if (a != 0) lo = std::min(lo, a), hi = std::max(hi, a);
    }
    if (hi > 0) {
      if (int_mode)
        sci_mode = hi / lo > 1000.0 || hi > 1e8;
      else
        sci_mode = hi / lo > 1000.0 || hi > 1e8 || lo < 1e-4;
    }
    for (double v : values)
      if (std::isfinite(v) && v != 0) width = std::max(width, format(v).size());
  }

  std::string format(double v) const {
    if (dtype == DType::Bool) return v != 0 ? "True" : "False";
    if (dtype == DType::Int64) return fmt::format("{}", static_cast<int64_t>(v));
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_mode) return fmt::format("{:.4e}", v);
    if (int_mode) return fmt::format("{:.0f}.", v);
    return fmt::format("{:.4f}", v);
  }
  std::string pad(double v) const {
    std::string s = format(v);
    return std::string(width - std::min(width, s.size()), ' ') + s;
  }
};

// Values that will be shown (the edges of each dim when summarising), for the formatter.
void collect(const Tensor& t, bool summarize, std::vector<double>& out) {
  if (t.dim() == 0) {
    out.push_back(t.item());
    return;
  }
  const int64_t n = t.shape()[0];
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
    collect(t.select(0, i), summarize, out);
  }
}

void render(const Tensor& t, const Formatter& f, bool summarize, size_t indent, std::string& out) {
  if (t.dim() == 0) {
    out += f.format(t.item());
    return;
  }
  const int64_t n = t.shape()[0];
  out += '[';
  if (t.dim() == 1) {
    const int64_t per_line = std::max<int64_t>(
        1, (kLineWidth - static_cast<int64_t>(indent)) / static_cast<int64_t>(f.width + 2));
    std::vector<std::string> data;
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
        data.push_back(" ...");
        i = n - kEdgeItems;
      }
      data.push_back(f.pad(t.at({i})));
    }
    for (size_t i = 0; i < data.size(); ++i) {
      if (i > 0 && i % per_line == 0) {
        out += ",\n";
        out.append(indent + 1, ' ');
      } else if (i > 0) {
        out += ", ";
      }
      out += data[i];
    }
  } else {
    std::string sep(1, ',');
    sep.append(t.dim() - 1, '\n');  // a blank line between blocks of rank 3 and up
    sep.append(indent + 1, ' ');
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
        out += "...";
        out += sep;
        i = n - kEdgeItems;
      }
      render(t.select(0, i), f, summarize, indent + 1, out);
      if (i + 1 < n) out += sep;
    }
  }
  out += ']';
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(<undefined>)";
  Tensor data = detach();
  const bool summarize = numel() > kThreshold;
  std::string body;
  if (numel() == 0) {
    body = "[]";
  } else {
    std::vector<double> shown;
    collect(data, summarize, shown);
    Formatter f(dtype(), shown);
    render(data, f, summarize, 7, body);
  }
  std::vector<std::string> suffix;
  if (numel() == 0 && dim() != 1)
    suffix.push_back(fmt::format("size=({})", fmt::join(shape(), ", ")));
  if (dtype() == DType::Float64 || dtype() == DType::BFloat16 ||
      (numel() == 0 && dtype() != DType::Float32))
    suffix.push_back(std::string("dtype=torch.") + dtype_name(dtype()));
  if (requires_grad() && is_leaf()) suffix.push_back("requires_grad=True");
  if (!is_leaf()) suffix.push_back(fmt::format("grad_fn=<{}>", grad_fn()->name));
  std::string s = "tensor(" + body;
  for (const auto& x : suffix) s += ", " + x;
  return s + ")";
}

}  // namespace ag
