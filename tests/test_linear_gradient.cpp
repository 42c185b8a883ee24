// The gradient a linear's backward reads, made in one pass with the bias gradient
// (autograd/ops/linear_gradient.h): the same bits as the separate passes it replaced
// (dh, its rounding to bfloat16, ag::sum over the rows), on 1 and 2 threads.
#include <catch2/catch.hpp>
#include <cstring>

#include "autograd/autocast.h"
#include "autograd/autograd.h"
#include "autograd/ops/linear_gradient.h"
#include "autograd/threading.h"
#include "autograd/vec_math.h"

namespace {

template <typename T>
bool same_bits(const ag::Tensor& a, const ag::Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const ag::Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.const_data<T>(), cb.const_data<T>(), ca.numel() * sizeof(T)) == 0;
}

// dh = g gelu'(h16), as GELU's backward under autocast defines it, in a pass of its own
ag::Tensor gelu_gradient_unfused(const ag::Tensor& g, const ag::Tensor& h16) {
  ag::Tensor d = ag::empty(g.shape(), ag::DType::Float32);
  const float* gp = g.const_data<float>();
  const ag::bfloat16* hp = h16.const_data<ag::bfloat16>();
  float* dp = d.data<float>();
  for (int64_t i = 0; i < g.numel(); ++i) dp[i] = gp[i] * ag::detail::gelu_derivative(float(hp[i]));
  return d;
}

// rows not a multiple of the 64-row chunks, columns not of 16 lanes
constexpr int64_t kRows = 300, kCols = 75;

}  // namespace

TEST_CASE("GELU's backward under autocast writes dh16 and db with the separate passes' bits",
          "[bf16][linear]") {
  ag::Generator gen(5);
  const ag::Tensor g = ag::randn({kRows, kCols}, gen);
  const ag::Tensor h16 = ag::to_bfloat16(ag::randn({kRows, kCols}, gen) * 3.0);
  const ag::Tensor dh = gelu_gradient_unfused(g, h16);
  for (int threads : {1, 2}) {
    ag::OmpThreadsScope scope(threads);
    const auto fused = ag::detail::gelu_output_gradient(g, h16, true);
    INFO(threads << " threads");
    REQUIRE_FALSE(fused.dh.defined());  // only the rounded copy is written
    REQUIRE(same_bits<ag::bfloat16>(fused.dh16, ag::to_bfloat16(dh)));
    REQUIRE(same_bits<float>(fused.db, ag::sum(dh, {0})));
    REQUIRE_FALSE(ag::detail::gelu_output_gradient(g, h16, false).db.defined());
  }
}

TEST_CASE("GELU's float32 backward sums db from dh with ag::sum's bits", "[linear]") {
  ag::Generator gen(6);
  const ag::Tensor g = ag::randn({kRows, kCols}, gen), derivative = ag::randn({kRows, kCols}, gen);
  for (int threads : {1, 2}) {
    ag::OmpThreadsScope scope(threads);
    const auto fused = ag::detail::gelu_output_gradient(g, derivative, true);
    INFO(threads << " threads");
    REQUIRE(same_bits<float>(fused.dh, g * derivative));
    REQUIRE(same_bits<float>(fused.db, ag::sum(fused.dh, {0})));
  }
}

TEST_CASE(
    "A linear's incoming gradient is rounded to bfloat16 with db beside it, as rounded "
    "and summed apart",
    "[bf16][linear]") {
  ag::Generator gen(7);
  const ag::Tensor g = ag::randn({kRows, kCols}, gen);
  for (int threads : {1, 2}) {
    ag::OmpThreadsScope scope(threads);
    const auto with_bias = ag::detail::linear_output_gradient(g, true, true);
    INFO(threads << " threads");
    REQUIRE(same_bits<ag::bfloat16>(with_bias.dh16, ag::to_bfloat16(g)));
    REQUIRE(same_bits<float>(with_bias.db, ag::sum(g, {0})));
    const auto without = ag::detail::linear_output_gradient(g, true, false);
    REQUIRE(same_bits<ag::bfloat16>(without.dh16, ag::to_bfloat16(g)));
    REQUIRE_FALSE(without.db.defined());
    REQUIRE_FALSE(ag::detail::linear_output_gradient(g, false, true).dh16.defined());
  }
}

TEST_CASE("A fused linear and GELU's gradients have the bits of the linear and gelu composed",
          "[linear]") {
  ag::Generator gen(8);
  const ag::Tensor x = ag::randn({kRows, 24}, gen);
  const ag::Tensor w = ag::randn({kCols, 24}, gen).requires_grad_(),
                   b = ag::randn({kCols}, gen).requires_grad_();
  const ag::Tensor upstream = ag::randn({kRows, kCols}, gen);
  auto gradients = [&](bool fused) {
    w.zero_grad(), b.zero_grad();
    const ag::Tensor y =
        fused ? ag::linear(x, w, b, ag::Activation::Gelu) : ag::gelu(ag::linear(x, w, b));
    ag::sum(y * upstream).backward();
    return std::pair{w.grad().clone(), b.grad().clone()};
  };
  for (int threads : {1, 2}) {
    ag::OmpThreadsScope scope(threads);
    const auto [dw_fused, db_fused] = gradients(true);
    const auto [dw, db] = gradients(false);
    INFO(threads << " threads");
    REQUIRE(same_bits<float>(db_fused, db));
    REQUIRE(same_bits<float>(dw_fused, dw));
  }
}
