#include "autograd/gradcheck.h"

#include <fmt/format.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/ops.h"

namespace ag {

namespace {

std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

// The scalar that backward starts from and the numeric side evaluates: either one output
// element or the projection sum(out * r).
double reduce_output(const Tensor& out, int64_t element, const Tensor& projection) {
  if (element >= 0) return out.reshape({-1}).at({element});
  return sum(mul(out, projection)).item();
}

struct Analytic {
  std::vector<std::vector<double>> per_input;  // flattened gradient per input
};

Analytic analytic_gradient(const TensorFn& fn, const std::vector<Tensor>& inputs, int64_t element,
                           const Tensor& projection) {
  for (const auto& t : inputs) t.zero_grad();
  Tensor out = fn(inputs);
  if (!out.requires_grad())
    throw std::logic_error("gradcheck: the function's output does not require grad");
  Tensor seed;
  if (element >= 0) {
    seed = zeros(out.shape(), out.dtype());
    seed.reshape({-1}).set({element}, 1.0);
  } else {
    seed = projection;
  }
  out.backward(seed);
  Analytic a;
  for (const auto& t : inputs) {
    if (!t.requires_grad()) {
      a.per_input.emplace_back();
      continue;
    }
    Tensor g = t.grad();
    a.per_input.push_back(g.defined() ? g.to_vector() : std::vector<double>(t.numel(), 0.0));
  }
  return a;
}

}  // namespace

GradcheckResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opt) {
  GradcheckResult res;
  try {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].requires_grad() && inputs[i].dtype() != DType::Float64)
        throw std::invalid_argument(
            fmt::format("gradcheck: input {} is {}; finite differences "
                        "need float64",
                        i, dtype_name(inputs[i].dtype())));
    Tensor out0;
    {
      NoGradGuard ng;
      out0 = fn(inputs);
    }
    const bool full = out0.numel() <= opt.max_full_jacobian_outputs;
    Tensor projection;
    if (!full) {
      Generator gen(opt.projection_seed);
      projection = randn(out0.shape(), gen, out0.dtype());
    }
    // analytic[j][i][k]: d out_j / d input_i[k] (j over outputs, or one projection)
    std::vector<Analytic> analytic;
    const int64_t rows = full ? out0.numel() : 1;
    for (int64_t j = 0; j < rows; ++j)
      analytic.push_back(analytic_gradient(fn, inputs, full ? j : -1, projection));
    for (const auto& t : inputs) t.zero_grad();

    double worst_ratio = -1;
    NoGradGuard ng;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& x = inputs[i];
      if (!x.requires_grad()) continue;
      for (int64_t k = 0; k < x.numel(); ++k) {
        std::vector<int64_t> idx = unravel(k, x.shape());
        const double orig = x.at(idx);
        x.set(idx, orig + opt.eps);
        Tensor plus = fn(inputs);
        x.set(idx, orig - opt.eps);
        Tensor minus = fn(inputs);
        x.set(idx, orig);
        for (int64_t j = 0; j < rows; ++j) {
          const int64_t element = full ? j : -1;
          const double hi = reduce_output(plus, element, projection);
          const double lo = reduce_output(minus, element, projection);
          // an output pinned at +-inf (a masked log-probability) does not move: slope 0
          double numeric = hi == lo ? 0.0 : (hi - lo) / (2 * opt.eps);
          double a = analytic[j].per_input[i][k];
          double err = std::fabs(a - numeric);
          double ratio = err / (opt.atol + opt.rtol * std::fabs(numeric));
          if (std::isnan(ratio)) ratio = INFINITY;
          ++res.checked;
          if (ratio > worst_ratio) {
            worst_ratio = ratio;
            res.input = static_cast<int64_t>(i);
            res.index = idx;
            res.output = element;
            res.analytic = a;
            res.numeric = numeric;
            res.error = err;
          }
        }
      }
    }
    res.ok = worst_ratio <= 1.0;
    if (res.checked == 0) {
      res.ok = false;
      res.message = "gradcheck: no input requires grad, nothing was checked";
      return res;
    }
    res.message = fmt::format(
        "gradcheck {}: worst element is input {} at [{}]{}: analytic {:.10g}, numeric "
        "{:.10g}, error {:.3g} (tolerance {:.3g}; {} entries checked, eps {:g})",
        res.ok ? "passed" : "FAILED", res.input, fmt::join(res.index, ", "),
        res.output >= 0 ? fmt::format(" of output {}", res.output) : " (projected output)",
        res.analytic, res.numeric, res.error, opt.atol + opt.rtol * std::fabs(res.numeric),
        res.checked, opt.eps);
  } catch (const std::exception& e) {
    res.ok = false;
    res.message = std::string("gradcheck FAILED with an error: ") + e.what();
  }
  return res;
}

GradcheckResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps,
                          double atol, double rtol) {
  GradcheckOptions o;
  o.eps = eps;
  o.atol = atol;
  o.rtol = rtol;
  return gradcheck(fn, inputs, o);
}

}  // namespace ag
