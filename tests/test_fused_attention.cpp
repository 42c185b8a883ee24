// The fused scaled_dot_product_attention against the same computation composed from
// ops (matmul, masked_fill, softmax, dropout mask, matmul) in float64: forward and every
// input gradient agree to 1e-10, with and without the causal mask and dropout.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/autograd.h"
#include "autograd/test_hooks.h"
#include "gradcheck_helpers.h"

using ag::DType;
using ag::Tensor;
// this file's own namespace keeps the directive from the files after it in a unity batch
namespace fused_attention_test {
using namespace ag_test;

namespace {

struct Shapes {
  int64_t B, H, T, S, D, Dv;
};

// softmax(q k^T scale, masked) * keep @ v, with keep the fused op's own dropout mask
Tensor composed_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                          const Tensor& keep) {
  const int64_t T = q.shape()[q.dim() - 2], S = k.shape()[k.dim() - 2];
  Tensor scores = ag::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(q.shape().back()));
  if (causal) scores = ag::masked_fill(scores, ag::triu_mask(T, S, 1), -ag::kInf);
  Tensor w = ag::softmax(scores, -1);
  if (keep.defined()) w = w * keep.reshape(w.shape());
  return ag::matmul(w, v);
}

void require_close(const Tensor& a, const Tensor& b, double tol) {
  REQUIRE(a.shape() == b.shape());
  auto x = a.to_vector(), y = b.to_vector();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
  INFO("max abs difference " << worst);
  REQUIRE(worst <= tol);
}

void compare_fused_with_composed(const Shapes& s, bool causal, double p) {
  ag::Generator gen(s.T * 100 + s.S);
  Tensor q = randn_leaf({s.B, s.H, s.T, s.D}, gen), k = randn_leaf({s.B, s.H, s.S, s.D}, gen),
         v = randn_leaf({s.B, s.H, s.S, s.Dv}, gen);
  Tensor upstream = ag::randn({s.B, s.H, s.T, s.Dv}, gen, DType::Float64);

  ag::Generator dropout_gen(77);
  ag::Generator peek = dropout_gen;  // with dropout the op takes exactly one draw, else none
  const uint64_t draw = p > 0 ? peek.next_u64() : 0;
  Tensor fused = ag::scaled_dot_product_attention(q, k, v, causal, p, &dropout_gen);
  REQUIRE(dropout_gen.state() == peek.state());
  ag::sum(fused * upstream).backward();
  Tensor dq = q.grad(), dk = k.grad(), dv = v.grad();
  q.zero_grad(), k.zero_grad(), v.zero_grad();

  Tensor keep =
      p > 0 ? ag::attention_dropout_mask(s.B * s.H, s.T, s.S, causal, p, draw, DType::Float64)
            : Tensor();
  Tensor composed = composed_attention(q, k, v, causal, keep);
  ag::sum(composed * upstream).backward();
  require_close(fused, composed, 1e-10);
  require_close(dq, q.grad(), 1e-10);
  require_close(dk, k.grad(), 1e-10);
  require_close(dv, v.grad(), 1e-10);
}

}  // namespace

TEST_CASE("fused attention equals the composed ops forward and backward", "[attention][fused]") {
  auto s = GENERATE(Shapes{2, 3, 5, 5, 4, 4}, Shapes{1, 2, 7, 7, 8, 3}, Shapes{2, 1, 4, 6, 3, 5},
                    Shapes{1, 1, 1, 1, 2, 2});
  bool causal = GENERATE(true, false);
  CAPTURE(s.B, s.H, s.T, s.S, s.D, s.Dv, causal);
  compare_fused_with_composed(s, causal, 0.0);
}

TEST_CASE("fused attention with dropout equals the composed ops under the same mask",
          "[attention][fused][dropout]") {
  double p = GENERATE(0.1, 0.5, 1.0);
  bool causal = GENERATE(true, false);
  CAPTURE(p, causal);
  compare_fused_with_composed(Shapes{2, 2, 6, 6, 4, 4}, causal, p);
}

TEST_CASE("gradcheck fused attention", "[gradcheck][attention][fused]") {
  ag::Generator gen(3);
  Tensor q = randn_leaf({1, 2, 4, 3}, gen), k = randn_leaf({1, 2, 4, 3}, gen),
         v = randn_leaf({1, 2, 4, 2}, gen);
  bool causal = GENERATE(true, false);
  double p = GENERATE(0.0, 0.4);
  CAPTURE(causal, p);
  REQUIRE_GRADCHECK(
      [causal, p](const std::vector<Tensor>& in) {
        ag::Generator g(5);  // the same mask at every evaluation
        return ag::scaled_dot_product_attention(in[0], in[1], in[2], causal, p, &g);
      },
      (std::vector<Tensor>{q, k, v}));
}

TEST_CASE("fused attention takes non-contiguous head views", "[attention][fused]") {
  ag::Generator gen(4);
  // [B, T, H*D] viewed as [B, H, T, D], as MultiHeadAttention does
  Tensor x = ag::randn({2, 5, 6}, gen, DType::Float64);
  Tensor heads = x.view({2, 5, 3, 2}).transpose(1, 2);
  REQUIRE_FALSE(heads.is_contiguous());
  Tensor fused = ag::scaled_dot_product_attention(heads, heads, heads, true, 0.0, nullptr);
  Tensor composed = composed_attention(heads, heads, heads, true, Tensor());
  require_close(fused, composed, 1e-12);
}

TEST_CASE("fused attention rejects mismatched shapes and a missing generator",
          "[attention][fused][errors]") {
  Tensor q = ag::zeros({2, 4, 3}), k = ag::zeros({2, 4, 5}), v = ag::zeros({2, 4, 3});
  REQUIRE_THROWS_WITH(
      ag::scaled_dot_product_attention(q, k, v, true, 0.0, nullptr),
      Catch::Matchers::Contains("last dim") && Catch::Matchers::Contains("[2, 4, 5]"));
  REQUIRE_THROWS_WITH(ag::scaled_dot_product_attention(q, q, v, true, 0.5, nullptr),
                      Catch::Matchers::Contains("generator"));
  REQUIRE_THROWS_WITH(ag::scaled_dot_product_attention(q, q, v, true, 1.5, nullptr),
                      Catch::Matchers::Contains("dropout_p"));
}

TEST_CASE("fused attention gives identical bits on one and two threads",
          "[attention][fused][threads]") {
  ag::Generator gen(6);
  Tensor q = ag::randn({4, 3, 9, 5}, gen).requires_grad_(),
         k = ag::randn({4, 3, 9, 5}, gen).requires_grad_(),
         v = ag::randn({4, 3, 9, 5}, gen).requires_grad_();
  auto run = [&](int threads) {
    ag::set_num_threads(threads);
    ag::Generator dropout_gen(1);
    q.zero_grad(), k.zero_grad(), v.zero_grad();
    Tensor out = ag::scaled_dot_product_attention(q, k, v, true, 0.2, &dropout_gen);
    ag::sum(out * out).backward();
    std::vector<std::vector<double>> all{out.to_vector(), q.grad().to_vector(),
                                         k.grad().to_vector(), v.grad().to_vector()};
    ag::set_num_threads(1);
    return all;
  };
  REQUIRE(run(1) == run(2));
}

TEST_CASE("packed causal self-attention equals the fused op on split heads", "[attention][fused]") {
  ag::Generator gen(6);
  const int64_t B = 2, T = 5, H = 3, D = 2, C = H * D;
  double p = GENERATE(0.0, 0.3);
  CAPTURE(p);
  Tensor qkv = ag::randn({B, T, 3 * C}, gen, DType::Float64).requires_grad_();
  ag::Generator g1(9), g2(9);
  Tensor packed = ag::causal_self_attention(qkv, H, p, &g1);  // [B, T, C]
  auto heads = [&](int64_t part) {
    return qkv.narrow(2, part * C, C).view({B, T, H, D}).transpose(1, 2);
  };
  Tensor split = ag::scaled_dot_product_attention(heads(0), heads(1), heads(2), true, p, &g2)
                     .transpose(1, 2)
                     .reshape({B, T, C});
  require_close(packed, split, 1e-13);
  Tensor weights = ag::randn({B, T, C}, gen, DType::Float64);
  ag::sum(packed * weights).backward();
  Tensor packed_grad = qkv.grad();
  qkv.zero_grad();
  ag::sum(split * weights).backward();
  require_close(packed_grad, qkv.grad(), 1e-13);
}

TEST_CASE("gradcheck packed causal self-attention", "[gradcheck][attention][fused]") {
  ag::Generator gen(7);
  double p = GENERATE(0.0, 0.4);
  CAPTURE(p);
  Tensor qkv = randn_leaf({2, 4, 12}, gen);  // 2 heads of 2
  REQUIRE_GRADCHECK(
      [p](const std::vector<Tensor>& in) {
        ag::Generator g(5);
        return ag::causal_self_attention(in[0], 2, p, &g);
      },
      (std::vector<Tensor>{qkv}));
  REQUIRE_THROWS_WITH(ag::causal_self_attention(ag::zeros({2, 4, 10}), 2, 0.0, nullptr),
                      Catch::Matchers::Contains("[2, 4, 10]"));
}

}  // namespace fused_attention_test
