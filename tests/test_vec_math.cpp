// The vectorised float32 exp and GELU that the kernels use instead of libm's.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "autograd/vec_math.h"

using ag::detail::exp_fast;
using ag::detail::gelu_and_derivative;
using ag::detail::gelu_derivative;
using ag::detail::gelu_value;

TEST_CASE("exp_fast is within 2 ulp of exp over the whole float range") {
  double worst = 0;
  float worst_x = 0;
  for (float x = -87.0f; x < 88.7f; x += 3.7e-4f) {
    const double exact = std::exp(static_cast<double>(x));
    const float ulp =
        std::nextafter(static_cast<float>(exact), INFINITY) - static_cast<float>(exact);
    const double err = std::fabs(exp_fast(x) - exact) / ulp;
    if (err > worst) worst = err, worst_x = x;
  }
  INFO("worst " << worst << " ulp at x = " << worst_x);
  REQUIRE(worst <= 2.0);
}

TEST_CASE("exp_fast handles the edges as softmax needs") {
  REQUIRE(exp_fast(-std::numeric_limits<float>::infinity()) == 0.0f);
  REQUIRE(exp_fast(-100.0f) == 0.0f);
  REQUIRE(std::isinf(exp_fast(89.0f)));
  REQUIRE(std::isinf(exp_fast(std::numeric_limits<float>::infinity())));
  REQUIRE(std::isnan(exp_fast(std::numeric_limits<float>::quiet_NaN())));
  REQUIRE(exp_fast(0.0f) == 1.0f);
  REQUIRE(exp_fast(1.0) == std::exp(1.0));  // float64 is std::exp itself
}

// The float32 GELU (a sigmoid of one exp) against GPT-2's tanh form in float64, the form
// the float64 ops, the gradient checks and PyTorch compute: within 2e-7 max(1, |gelu|)
// (measured 1.53e-7, where the tanh_fast form this replaced was 3.1e-7) and its derivative
// within 2.5e-6 max(1, |gelu'|) (measured 2.0e-6, the float32 rounding of the polynomial's x^2
// terms, as the tanh form's own float32 evaluation gives).
TEST_CASE("float32 gelu and its derivative are close to the float64 tanh form") {
  double worst_value = 0, worst_derivative = 0;
  float at_value = 0, at_derivative = 0;
  for (float x = -12.0f; x <= 12.0f; x += 1e-4f) {
    const double exact = gelu_value(static_cast<double>(x));
    const double exact_d = gelu_derivative(static_cast<double>(x));
    const double e = std::fabs(gelu_value(x) - exact) / std::max(1.0, std::fabs(exact));
    const double ed = std::fabs(gelu_derivative(x) - exact_d) / std::max(1.0, std::fabs(exact_d));
    if (e > worst_value) worst_value = e, at_value = x;
    if (ed > worst_derivative) worst_derivative = ed, at_derivative = x;
  }
  INFO("gelu " << worst_value << " at " << at_value << ", gelu' " << worst_derivative << " at "
               << at_derivative);
  REQUIRE(worst_value <= 2e-7);
  REQUIRE(worst_derivative <= 2.5e-6);
}

TEST_CASE("float32 gelu_and_derivative gives gelu_value's and gelu_derivative's bits") {
  for (float x = -20.0f; x <= 20.0f; x += 3.3e-3f) {
    float value = 0, derivative = 0;
    gelu_and_derivative(x, value, derivative);
    REQUIRE(value == gelu_value(x));
    REQUIRE(derivative == gelu_derivative(x));
  }
}

TEST_CASE("float32 gelu reaches its limits as the tanh form does") {
  const float inf = std::numeric_limits<float>::infinity();
  REQUIRE(gelu_value(30.0f) == 30.0f);
  REQUIRE(gelu_derivative(30.0f) == 1.0f);
  REQUIRE(gelu_value(-30.0f) == 0.0f);
  REQUIRE(gelu_derivative(-30.0f) == 0.0f);
  REQUIRE(gelu_value(1e30f) == 1e30f);
  REQUIRE(gelu_value(0.0f) == 0.0f);
  REQUIRE(gelu_derivative(0.0f) == 0.5f);
  REQUIRE(gelu_value(inf) == inf);
  // -inf * 0.5 (1 + tanh(-inf)) = -inf * 0: NaN in both forms, as in PyTorch
  REQUIRE(std::isnan(gelu_value(-inf)));
  REQUIRE(std::isnan(gelu_value(std::numeric_limits<float>::quiet_NaN())));
  REQUIRE(std::isnan(gelu_derivative(std::numeric_limits<float>::quiet_NaN())));
}
