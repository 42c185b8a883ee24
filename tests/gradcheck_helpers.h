#pragma once
// Shared by the gradient-check tests: float64 inputs in a chosen memory layout, and a
// REQUIRE that prints gradcheck's worst element on failure.
#include <catch2/catch.hpp>

#include "autograd/autograd.h"
#include "autograd/op_cases.h"

namespace ag_test {

using ag::DType;
using ag::Shape;
using ag::Tensor;

// Tolerances for every float64 gradient check in the suite: the op table's, where they are
// stated once with the reasons for them (autograd/op_cases.h, Tolerance).
inline ag::GradcheckOptions tight() {
  return ag::Tolerance{}.gradcheck_options();
}

// contiguous, transposed or sliced, as the op table's inputs (autograd/op_cases.h)
using ag::Layout;

// A float64 leaf requiring grad with values from `draw`, laid out as asked:
// transposed = a transpose view of a contiguous buffer (last two dims swapped),
// sliced = a narrow view into a larger buffer (every dim padded by one on each side).
template <typename Draw>
Tensor leaf(const Shape& shape, Layout layout, ag::Generator& gen, Draw draw) {
  auto fill = [&](const Tensor& t) {
    std::vector<double> v(t.numel());
    for (auto& x : v) x = draw(gen);
    ag::copy_(t, ag::from_vector(v, t.shape(), DType::Float64));
  };
  Tensor view;
  if (layout == Layout::transposed && shape.size() >= 2) {
    Shape swapped = shape;
    std::swap(swapped[shape.size() - 1], swapped[shape.size() - 2]);
    Tensor base = ag::empty(swapped, DType::Float64);
    view = base.transpose(-1, -2);
  } else if (layout == Layout::sliced) {
    Shape padded = shape;
    for (auto& d : padded) d += 2;
    Tensor base = ag::zeros(padded, DType::Float64);
    view = base;
    for (size_t d = 0; d < shape.size(); ++d) view = view.narrow(d, 1, shape[d]);
  } else {
    view = ag::empty(shape, DType::Float64);
  }
  fill(view);
  return view.requires_grad_();
}

inline Tensor randn_leaf(const Shape& shape, ag::Generator& gen,
                         Layout layout = Layout::contiguous) {
  return leaf(shape, layout, gen, [](ag::Generator& g) { return g.normal(); });
}

// Values in [lo, hi] (e.g. positive for log/sqrt, away from relu's kink at 0).
inline Tensor uniform_leaf(const Shape& shape, double lo, double hi, ag::Generator& gen,
                           Layout layout = Layout::contiguous) {
  return leaf(shape, layout, gen,
              [lo, hi](ag::Generator& g) { return lo + (hi - lo) * g.uniform(); });
}

// Magnitudes in [0.2, 2] with random signs: no element near 0.
inline Tensor away_from_zero_leaf(const Shape& shape, ag::Generator& gen,
                                  Layout layout = Layout::contiguous) {
  return leaf(shape, layout, gen, [](ag::Generator& g) {
    double m = 0.2 + 1.8 * g.uniform();
    return g.uniform() < 0.5 ? -m : m;
  });
}

}  // namespace ag_test

// REQUIRE_GRADCHECK(fn, inputs): variadic so that lambdas with commas pass through.
#define REQUIRE_GRADCHECK(...)                                      \
  do {                                                              \
    auto gc_result_ = ag::gradcheck(__VA_ARGS__, ag_test::tight()); \
    INFO(gc_result_.message);                                       \
    REQUIRE(gc_result_.ok);                                         \
  } while (0)
