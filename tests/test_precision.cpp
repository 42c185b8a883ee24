// The same op on the same numbers in float32 and float64 agrees to float32 precision,
// forward and backward: the kernels are one template instantiated twice.
#include <catch2/catch.hpp>
#include <functional>

#include "autograd/autograd.h"

using ag::DType;
using ag::Tensor;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

namespace {

// Runs fn on float64 inputs and on their float32 copies; compares the outputs and the
// gradient of sum(out * r) for a fixed random r, relative to each tensor's largest entry.
void require_float32_matches_float64(const Fn& fn, const std::vector<ag::Shape>& shapes,
                                     bool positive = false) {
  ag::Generator gen(42);
  std::vector<Tensor> in64, in32;
  for (const auto& s : shapes) {
    Tensor t = positive ? ag::uniform(s, 0.5, 2.0, gen, DType::Float64)
                        : ag::randn(s, gen, DType::Float64);
    in64.push_back(t.clone().requires_grad_());
    in32.push_back(t.to(DType::Float32).requires_grad_());
  }
  Tensor out64 = fn(in64), out32 = fn(in32);
  REQUIRE(out32.dtype() == DType::Float32);
  Tensor r = ag::randn(out64.shape(), gen, DType::Float64);
  ag::sum(out64 * r).backward();
  ag::sum(out32 * r.to(DType::Float32)).backward();
  auto compare = [](const Tensor& a, const Tensor& b) {
    auto x = a.to_vector(), y = b.to_vector();
    double scale = 1e-30;
    for (double v : x) scale = std::max(scale, std::fabs(v));
    for (size_t i = 0; i < x.size(); ++i) {
      INFO("element " << i << ": float64 " << x[i] << " float32 " << y[i]);
      REQUIRE(std::fabs(x[i] - y[i]) <= 2e-5 * scale);
    }
  };
  compare(out64, out32);
  for (size_t i = 0; i < in64.size(); ++i) compare(in64[i].grad(), in32[i].grad());
}

}  // namespace

TEST_CASE("float32 and float64 agree on elementwise ops", "[precision]") {
  require_float32_matches_float64([](auto& x) { return x[0] * x[1] + x[0] / (x[1] * x[1] + 1.0); },
                                  {{3, 4}, {4}});
  require_float32_matches_float64([](auto& x) { return ag::exp(x[0]) - ag::tanh(x[1]); },
                                  {{3, 4}, {3, 4}});
  require_float32_matches_float64([](auto& x) { return ag::gelu(x[0]) + ag::relu(x[0]); },
                                  {{5, 7}});
  require_float32_matches_float64(
      [](auto& x) { return ag::log(x[0]) * ag::sqrt(x[0]) + ag::pow(x[0], x[1]); },
      {{3, 4}, {3, 4}}, true);
}

TEST_CASE("float32 and float64 agree on reductions and matmul", "[precision]") {
  require_float32_matches_float64([](auto& x) { return ag::sum(x[0], {1}) + ag::max(x[0], 1); },
                                  {{4, 50}});
  require_float32_matches_float64(
      [](auto& x) {
        return ag::mean(x[0], {0, 2}, true);
      },
      {{3, 4, 5}});
  require_float32_matches_float64([](auto& x) { return ag::matmul(x[0], x[1].transpose(-1, -2)); },
                                  {{2, 8, 16}, {2, 8, 16}});
}

TEST_CASE("float32 and float64 agree on softmax and cross-entropy and layer_norm", "[precision]") {
  require_float32_matches_float64(
      [](auto& x) { return ag::softmax(x[0], -1) + ag::log_softmax(x[0], 0); }, {{6, 9}});
  Tensor targets = ag::from_vector(std::vector<int64_t>{0, 3, 5, 1, 2, 4}, {2, 3});
  require_float32_matches_float64([targets](auto& x) { return ag::cross_entropy(x[0], targets); },
                                  {{2, 3, 7}});
  require_float32_matches_float64([](auto& x) { return ag::layer_norm(x[0], x[1], x[2]); },
                                  {{4, 16}, {16}, {16}});
  Tensor ids = ag::from_vector(std::vector<int64_t>{1, 1, 0, 3}, {4});
  require_float32_matches_float64([ids](auto& x) { return ag::embedding(x[0], ids); }, {{4, 6}});
}
