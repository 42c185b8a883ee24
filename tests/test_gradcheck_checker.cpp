// The gradient checker is itself tested: ops given a deliberately wrong backward must
// fail it, and the report must name the worst element. A green gradcheck means something
// only if a wrong one goes red.
#include "gradcheck_helpers.h"

// this file's own namespace keeps the directive from the files after it in a unity batch
namespace gradcheck_checker_test {
using namespace ag_test;
using In = const std::vector<Tensor>&;

namespace {

// mul whose backward is correct but for `tamper` applied to the gradient of a.
template <typename Tamper>
Tensor mul_with_wrong_backward(const Tensor& a, const Tensor& b, Tamper tamper) {
  Tensor out;
  {
    ag::NoGradGuard ng;
    out = ag::mul(a, b);
  }
  ag::attach_backward(
      out, "TamperedMulBackward", {a, b},
      [a = a.detach(), b = b.detach(), tamper](const Tensor& g) -> std::vector<Tensor> {
        return {tamper(ag::sum_to(ag::mul(g, b), a.shape())), ag::sum_to(ag::mul(g, a), b.shape())};
      });
  return out;
}

ag::GradcheckResult check_tampered(std::function<Tensor(const Tensor&)> tamper) {
  ag::Generator gen(7);
  Tensor a = randn_leaf({3, 4}, gen), b = randn_leaf({3, 4}, gen);
  return ag::gradcheck([tamper](In in) { return mul_with_wrong_backward(in[0], in[1], tamper); },
                       {a, b}, tight());
}

}  // namespace

TEST_CASE("gradcheck passes a correct hand-written backward", "[gradcheck][checker]") {
  auto r = check_tampered([](const Tensor& g) { return g; });
  INFO(r.message);
  REQUIRE(r.ok);
  REQUIRE(r.checked == 2 * 12 * 12);  // full Jacobian: 2 inputs x 12 elements x 12 outputs
  REQUIRE_THAT(r.message, Catch::Matchers::Contains("passed"));
}

TEST_CASE("gradcheck fails a backward with a flipped sign", "[gradcheck][checker]") {
  auto r = check_tampered([](const Tensor& g) { return ag::neg(g); });
  INFO(r.message);
  REQUIRE_FALSE(r.ok);
  REQUIRE(r.input == 0);
  REQUIRE_THAT(r.analytic, Catch::Matchers::WithinAbs(-r.numeric, 1e-8));
  REQUIRE_THAT(r.message,
               Catch::Matchers::Contains("FAILED") && Catch::Matchers::Contains("input 0"));
}

TEST_CASE("gradcheck fails a backward that is off by a factor of 1.01", "[gradcheck][checker]") {
  auto r = check_tampered([](const Tensor& g) { return ag::mul(g, 1.01); });
  INFO(r.message);
  REQUIRE_FALSE(r.ok);
  REQUIRE_THAT(r.analytic, Catch::Matchers::WithinRel(1.01 * r.numeric, 1e-6));
}

TEST_CASE("gradcheck names the one wrong element of a gradient", "[gradcheck][checker]") {
  auto r = check_tampered([](const Tensor& g) {
    Tensor wrong = g.clone();
    wrong.set({1, 2}, wrong.at({1, 2}) * 1.5);  // wrong only where out[1,2] is seeded
    return wrong;
  });
  INFO(r.message);
  REQUIRE_FALSE(r.ok);
  REQUIRE(r.input == 0);
  REQUIRE(r.index == std::vector<int64_t>{1, 2});
  REQUIRE(r.output == 1 * 4 + 2);  // d out[1,2] / d a[1,2] is the entry that was changed
  REQUIRE_THAT(r.message, Catch::Matchers::Contains("[1, 2]"));
}

TEST_CASE("gradcheck fails an add whose backward drops the broadcast reduction",
          "[gradcheck][checker]") {
  ag::Generator gen(8);
  Tensor a = randn_leaf({3, 4}, gen), b = randn_leaf({4}, gen);
  auto bad_add = [](In in) {
    Tensor out;
    {
      ag::NoGradGuard ng;
      out = ag::add(in[0], in[1]);
    }
    ag::attach_backward(out, "BadAddBackward", {in[0], in[1]},
                        [](const Tensor& g) -> std::vector<Tensor> {
                          return {g, g};
                        });
    return out;
  };
  auto r = ag::gradcheck(bad_add, {a, b}, tight());
  INFO(r.message);
  REQUIRE_FALSE(r.ok);
  REQUIRE_THAT(r.message, Catch::Matchers::Contains("BadAddBackward") &&
                              Catch::Matchers::Contains("[3, 4]") &&
                              Catch::Matchers::Contains("[4]"));
}

TEST_CASE("gradcheck over a random projection still fails a wrong backward",
          "[gradcheck][checker]") {
  ag::Generator gen(9);
  Tensor a = randn_leaf({10, 10}, gen), b = randn_leaf({10, 10}, gen);  // 100 outputs > 64
  auto sign_flip = [](In in) {
    return mul_with_wrong_backward(in[0], in[1], [](const Tensor& g) { return ag::neg(g); });
  };
  auto good = [](In in) {
    return mul_with_wrong_backward(in[0], in[1], [](const Tensor& g) { return g; });
  };
  auto bad_result = ag::gradcheck(sign_flip, {a, b}, tight());
  auto good_result = ag::gradcheck(good, {a, b}, tight());
  INFO(bad_result.message << "\n" << good_result.message);
  REQUIRE(bad_result.output == -1);
  REQUIRE_FALSE(bad_result.ok);
  REQUIRE(good_result.ok);
}

TEST_CASE("gradcheck refuses float32 inputs and inputs that need no grad", "[gradcheck][checker]") {
  ag::Generator gen(10);
  Tensor f32 = ag::randn({3}, gen).requires_grad_();
  auto r = ag::gradcheck([](In in) { return in[0] * 2.0; }, {f32});
  REQUIRE_FALSE(r.ok);
  REQUIRE_THAT(r.message, Catch::Matchers::Contains("float64"));
  Tensor plain = ag::randn({3}, gen, DType::Float64);
  auto r2 = ag::gradcheck([](In in) { return in[0] * 2.0; }, {plain});
  REQUIRE_FALSE(r2.ok);
}

TEST_CASE("gradcheck fails across a kink which is why samples avoid them", "[gradcheck][checker]") {
  // relu at exactly 0: the engine's one-sided derivative (0) against a central
  // difference (0.5) disagree, as they must
  Tensor x = ag::zeros({1}, DType::Float64).requires_grad_();
  auto r = ag::gradcheck([](In in) { return ag::relu(in[0]); }, {x}, tight());
  REQUIRE_FALSE(r.ok);
  REQUIRE_THAT(r.numeric, Catch::Matchers::WithinAbs(0.5, 1e-9));
}

}  // namespace gradcheck_checker_test
