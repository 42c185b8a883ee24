// The vectorised float32 exp and tanh that the kernels use instead of libm's.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "autograd/vec_math.h"

using ag::detail::exp_fast;
using ag::detail::tanh_fast;

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

TEST_CASE("tanh_fast is close to tanh and saturates exactly") {
  for (float u = -10.0f; u <= 10.0f; u += 1e-3f)
    REQUIRE_THAT(tanh_fast(u), Catch::Matchers::WithinAbs(std::tanh(u), 3e-7));
  REQUIRE(tanh_fast(50.0f) == 1.0f);
  REQUIRE(tanh_fast(-50.0f) == -1.0f);
}
