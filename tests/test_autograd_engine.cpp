// The engine's contract: accumulation, explicit upstream gradients, freed graphs,
// no-grad scopes, detach, leaves vs non-leaves, gradients through views, deep graphs.
#include <catch2/catch.hpp>

#include "autograd/autograd.h"

using ag::DType;
using ag::Tensor;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;

TEST_CASE("gradients accumulate across backward calls until zeroed", "[engine]") {
  Tensor x = ag::tensor({1.0, 2.0, 3.0}, DType::Float64).requires_grad_();
  ag::sum(x * x).backward();
  REQUIRE(x.grad().to_vector() == std::vector<double>{2, 4, 6});
  ag::sum(x * x).backward();
  REQUIRE(x.grad().to_vector() == std::vector<double>{4, 8, 12});
  x.zero_grad();
  REQUIRE_FALSE(x.grad().defined());
  ag::sum(x * 3.0).backward();
  REQUIRE(x.grad().to_vector() == std::vector<double>{3, 3, 3});
}

TEST_CASE("backward takes an explicit upstream gradient for a non-scalar", "[engine]") {
  Tensor x = ag::tensor({1.0, 2.0}, DType::Float64).requires_grad_();
  Tensor y = x * x;
  REQUIRE_THROWS_WITH(y.backward(), Contains("one-element") && Contains("[2]"));
  y.backward(ag::tensor({10.0, -1.0}, DType::Float64));
  REQUIRE(x.grad().to_vector() == std::vector<double>{20, -4});
  Tensor z = x * 2.0;
  REQUIRE_THROWS_WITH(z.backward(ag::ones({3}, DType::Float64)),
                      Contains("[3]") && Contains("[2]"));
}

TEST_CASE("a second backward through a freed graph is an error unless retain_graph", "[engine]") {
  Tensor x = ag::tensor({0.5}, DType::Float64).requires_grad_();
  Tensor y = ag::sum(ag::exp(x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  REQUIRE_THAT(x.grad().item(), WithinAbs(2 * std::exp(0.5), 1e-15));
  REQUIRE_THROWS_WITH(y.backward(), Contains("second time") && Contains("retain_graph"));
}

TEST_CASE("NoGradGuard stops recording and restores the previous mode", "[engine]") {
  Tensor w = ag::ones({2}, DType::Float64).requires_grad_();
  {
    ag::NoGradGuard guard;
    REQUIRE_FALSE(ag::grad_enabled());
    Tensor y = w * 2.0;
    REQUIRE_FALSE(y.requires_grad());
    REQUIRE(y.is_leaf());
    { ag::NoGradGuard nested; }
    REQUIRE_FALSE(ag::grad_enabled());
  }
  REQUIRE(ag::grad_enabled());
  REQUIRE((w * 2.0).requires_grad());
}

TEST_CASE("detach shares data but cuts the graph", "[engine]") {
  Tensor x = ag::tensor({1.0, 2.0}, DType::Float64).requires_grad_();
  Tensor y = x * 3.0;
  Tensor d = y.detach();
  REQUIRE(d.shares_storage_with(y));
  REQUIRE_FALSE(d.requires_grad());
  REQUIRE(d.is_leaf());
  ag::sum(y * d).backward();  // d is a constant: dL/dx = 3 * d
  REQUIRE(x.grad().to_vector() == std::vector<double>{9, 18});
}

TEST_CASE("only leaves keep their gradient", "[engine]") {
  Tensor x = ag::tensor({2.0}, DType::Float64).requires_grad_();
  Tensor h = x * x;
  REQUIRE(x.is_leaf());
  REQUIRE_FALSE(h.is_leaf());
  REQUIRE(h.requires_grad());
  ag::sum(h * 5.0).backward();
  REQUIRE_FALSE(h.grad().defined());
  REQUIRE(x.grad().item() == 20.0);
}

TEST_CASE("gradients flow through views back to the base leaf", "[engine]") {
  Tensor x = ag::arange(6, DType::Float64).reshape({2, 3}).detach().requires_grad_();
  Tensor v = x.t().narrow(0, 1, 2);  // x[:, 1:3] transposed, shape [2, 2]
  ag::sum(v * ag::tensor({{1.0, 2.0}, {3.0, 4.0}}, DType::Float64)).backward();
  // v[i][j] = x[j][i+1]
  REQUIRE(x.grad().to_vector() == std::vector<double>{0, 1, 3, 0, 2, 4});
}

TEST_CASE("a tensor used twice receives the sum of both gradients", "[engine]") {
  Tensor x = ag::tensor({3.0}, DType::Float64).requires_grad_();
  Tensor a = x * 2.0, b = x * x;
  ag::sum(a * b).backward();  // d(2x^3)/dx = 6x^2
  REQUIRE(x.grad().item() == 54.0);
}

TEST_CASE("a 10000-op chain runs backward and is freed without deep recursion", "[engine]") {
  const int depth = GENERATE(10000, 200000);
  CAPTURE(depth);
  Tensor x = ag::tensor({1.0}, DType::Float64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < depth; ++i) y = y * 1.0 + 0.0;
  y.backward();
  REQUIRE(x.grad().item() == 1.0);
  // build again and drop it without backward: teardown alone must not recurse
  Tensor z = x;
  for (int i = 0; i < depth; ++i) z = ag::neg(z);
  z = Tensor();
  SUCCEED();
}

TEST_CASE("ops on inputs that need no grad record nothing", "[engine]") {
  Tensor a = ag::ones({2, 2}), b = ag::ones({2, 2});
  Tensor c = ag::matmul(a, b);
  REQUIRE_FALSE(c.requires_grad());
  REQUIRE(c.grad_fn() == nullptr);
  Tensor w = ag::ones({2, 2}).requires_grad_();
  Tensor d = ag::matmul(a, w);
  REQUIRE(d.requires_grad());
  REQUIRE(std::string(d.grad_fn()->name) == "MatmulBackward");
}

TEST_CASE("backward of a leaf seeds its own gradient", "[engine]") {
  Tensor x = ag::tensor({4.0}, DType::Float64).requires_grad_();
  x.backward();
  REQUIRE(x.grad().item() == 1.0);
}

TEST_CASE("a gradient stored on a leaf never aliases another tensor", "[engine]") {
  Tensor x = ag::tensor({1.0, 1.0}, DType::Float64).requires_grad_();
  Tensor upstream = ag::tensor({5.0, 6.0}, DType::Float64);
  (x + 0.0).backward(upstream);
  REQUIRE_FALSE(x.grad().shares_storage_with(upstream));
  (x + 0.0).backward(upstream);  // accumulates in place into x.grad, not into upstream
  REQUIRE(upstream.to_vector() == std::vector<double>{5, 6});
  REQUIRE(x.grad().to_vector() == std::vector<double>{10, 12});
}
