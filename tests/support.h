#pragma once
// Small helpers shared by the test files.
#include <catch2/catch.hpp>
#include <vector>

#include "autograd/autograd.h"

namespace ag_test {

// Every element of t (in logical order) within tol of expected.
inline void require_values(const ag::Tensor& t, const std::vector<double>& expected, double tol) {
  auto got = t.to_vector();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << " of " << t);
    REQUIRE_THAT(got[i], Catch::Matchers::WithinAbs(expected[i], tol));
  }
}

}  // namespace ag_test
