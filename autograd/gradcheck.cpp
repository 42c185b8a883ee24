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

// hi - lo of one output element, or of the projection sum(out * r), taken element by
// element so that rounding scales with what moved rather than with the outputs. An output
// pinned at +-inf (a masked log-probability) does not move: slope 0.
double difference(const std::vector<double>& hi, const std::vector<double>& lo, int64_t element,
                  const std::vector<double>& projection) {
  auto moved = [&](size_t k) { return hi[k] == lo[k] ? 0.0 : hi[k] - lo[k]; };
  if (element >= 0) return moved(static_cast<size_t>(element));
  double sum = 0;
  for (size_t k = 0; k < hi.size(); ++k) sum += moved(k) * projection[k];
  return sum;
}

// Undefined inputs (an absent optional argument) and those not requiring grad pass through.
bool checked_input(const Tensor& t) {
  return t.defined() && t.requires_grad();
}

void require_float64(const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (checked_input(inputs[i]) && inputs[i].dtype() != DType::Float64)
      throw std::invalid_argument(
          fmt::format("gradcheck: input {} is {}; finite differences need float64", i,
                      dtype_name(inputs[i].dtype())));
}

// What backward says: per Jacobian row (an output element, or the one projection), the
// flattened gradient of every input (empty for inputs that are not checked).
struct Plan {
  bool full = true;  // one row per output element, else one row for the projection
  int64_t rows = 0;
  Tensor projection;                      // the seed r of backward
  std::vector<double> projection_values;  // and its values for the central differences
  std::vector<std::vector<std::vector<double>>> analytic;  // [row][input][element]
};

std::vector<std::vector<double>> analytic_row(const TensorFn& fn, const std::vector<Tensor>& inputs,
                                              int64_t element, const Tensor& projection) {
  for (const auto& t : inputs)
    if (t.defined()) t.zero_grad();
  Tensor out = fn(inputs);
  if (!out.requires_grad())
    throw std::logic_error("gradcheck: the function's output does not require grad");
  Tensor seed = projection;
  if (element >= 0) {
    seed = zeros(out.shape(), out.dtype());
    seed.reshape({-1}).set({element}, 1.0);
  }
  out.backward(seed);
  std::vector<std::vector<double>> per_input;
  for (const auto& t : inputs) {
    Tensor g = checked_input(t) ? t.grad() : Tensor();
    per_input.push_back(!checked_input(t) ? std::vector<double>{}
                        : g.defined()     ? g.to_vector()
                                          : std::vector<double>(t.numel(), 0.0));
  }
  return per_input;
}

Plan analytic_jacobian(const TensorFn& fn, const std::vector<Tensor>& inputs,
                       const GradcheckOptions& opt) {
  Tensor out0;
  {
    NoGradGuard ng;
    out0 = fn(inputs);
  }
  Plan plan;
  plan.full = out0.numel() <= opt.max_full_jacobian_outputs;
  plan.rows = plan.full ? out0.numel() : 1;
  if (!plan.full) {
    Generator gen(opt.projection_seed);
    plan.projection = randn(out0.shape(), gen, out0.dtype());
    plan.projection_values = plan.projection.to_vector();
  }
  for (int64_t j = 0; j < plan.rows; ++j)
    plan.analytic.push_back(analytic_row(fn, inputs, plan.full ? j : -1, plan.projection));
  for (const auto& t : inputs)
    if (t.defined()) t.zero_grad();
  return plan;
}

// Perturbs element k of input i both ways and holds the central difference of every
// Jacobian row against backward's, keeping the worst (by error over tolerance) in res.
void check_element(const TensorFn& fn, const std::vector<Tensor>& inputs, size_t i, int64_t k,
                   const Plan& plan, const GradcheckOptions& opt, GradcheckResult& res,
                   double& worst_ratio) {
  const Tensor& x = inputs[i];
  std::vector<int64_t> idx = unravel(k, x.shape());
  const double orig = x.at(idx);
  // copied out at once: an output that is a view of x (transpose, narrow) follows x
  x.set(idx, orig + opt.eps);
  const std::vector<double> plus = fn(inputs).to_vector();
  x.set(idx, orig - opt.eps);
  const std::vector<double> minus = fn(inputs).to_vector();
  x.set(idx, orig);
  for (int64_t j = 0; j < plan.rows; ++j) {
    const int64_t element = plan.full ? j : -1;
    const double numeric = difference(plus, minus, element, plan.projection_values) / (2 * opt.eps);
    const double a = plan.analytic[j][i][k];
    const double err = std::fabs(a - numeric);
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

std::string describe(const GradcheckResult& res, const GradcheckOptions& opt) {
  return fmt::format(
      "gradcheck {}: worst element is input {} at [{}]{}: analytic {:.10g}, numeric "
      "{:.10g}, error {:.3g} (tolerance {:.3g}; {} entries checked, eps {:g})",
      res.ok ? "passed" : "FAILED", res.input, fmt::join(res.index, ", "),
      res.output >= 0 ? fmt::format(" of output {}", res.output) : " (projected output)",
      res.analytic, res.numeric, res.error, opt.atol + opt.rtol * std::fabs(res.numeric),
      res.checked, opt.eps);
}

}  // namespace

GradcheckResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opt) {
  GradcheckResult res;
  try {
    require_float64(inputs);
    const Plan plan = analytic_jacobian(fn, inputs, opt);
    double worst_ratio = -1;
    NoGradGuard ng;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (checked_input(inputs[i]))
        for (int64_t k = 0; k < inputs[i].numel(); ++k)
          check_element(fn, inputs, i, k, plan, opt, res, worst_ratio);
    if (res.checked == 0) {
      res.ok = false;
      res.message = "gradcheck: no input requires grad, nothing was checked";
      return res;
    }
    res.ok = worst_ratio <= 1.0;
    res.message = describe(res, opt);
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
