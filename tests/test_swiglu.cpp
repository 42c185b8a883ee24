// ag::swiglu (autograd/ops/swiglu.cpp), SwiGLU's gating as one op: the values and gradients
// of silu then multiply, bit for bit, on a tensor large enough for a team of threads.
#include <catch2/catch.hpp>

#include "support.h"

TEST_CASE("swiglu gives silu(gate) * up's output and gradients bit for bit", "[swiglu]") {
  const auto dtype = GENERATE(ag::DType::Float32, ag::DType::Float64);
  ag::Generator gen(11);
  const ag::Shape shape{3, 97, 211};  // odd: the vector loops' tails run
  const ag::Tensor gate = ag::normal(shape, 0.0, 3.0, gen, dtype);
  const ag::Tensor up = ag::normal(shape, 0.0, 1.0, gen, dtype);
  const ag::Tensor weight = ag::normal(shape, 0.0, 1.0, gen, dtype);
  auto run = [&](bool fused) {
    const ag::Tensor g = gate.detach().clone().requires_grad_();
    const ag::Tensor u = up.detach().clone().requires_grad_();
    const ag::Tensor h = fused ? ag::swiglu(g, u) : ag::silu(g) * u;
    ag::sum(ag::mul(h, weight)).backward();
    return std::vector<ag::Tensor>{h.detach(), g.grad(), u.grad()};
  };
  const auto fused = run(true), composed = run(false);
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO("tensor " << i);
    CHECK(ag_test::bit_equal(fused[i], composed[i]));
  }
}

TEST_CASE("swiglu refuses gate and up of different shapes or dtypes", "[swiglu]") {
  const ag::Tensor a = ag::zeros({2, 3}), b = ag::zeros({3, 2});
  REQUIRE_THROWS_WITH(ag::swiglu(a, b), Catch::Matchers::Contains("swiglu: gate [2, 3] float32"));
  REQUIRE_THROWS_WITH(ag::swiglu(a, ag::zeros({2, 3}, ag::DType::Float64)),
                      Catch::Matchers::Contains("must be float32 or float64 of one shape"));
}
