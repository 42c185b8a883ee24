// The fused attention's blocked kernel (autograd/ops/attention_onednn.h): blocks of queries
// and keys of several rows a call, an online softmax across the key blocks, grouped-query
// heads folded into the products' rows. Its float64 twin (the same blocked code, exact
// products) with blocks of a few queries and keys, so that small problems cross many
// blocks and diagonals: equal to the tile kernels in float64 and gradient-checked; its
// bf16 form on oneDNN with grouped-query attention against the FMA kernels, and on one
// and two threads.
#include <catch2/catch.hpp>
#include <cmath>
#include <optional>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/autograd.h"
#include "autograd/test_hooks.h"
#include "gradcheck_helpers.h"

using ag::DType;
using ag::Tensor;
// this file's own namespace keeps the directive from the files after it in a unity batch
namespace attention_blocked_test {
using namespace ag_test;

namespace {

// While alive, float64 attention runs on the blocked kernel's twin with blocks of `queries`
// queries and `keys` keys (and the bf16 oneDNN kernel takes them too)
struct BlockedTwin {
  BlockedTwin(int64_t queries, int64_t keys) {
    ag::force_attention_blocks_for_tests(queries, keys, true);
  }
  ~BlockedTwin() { ag::force_attention_blocks_for_tests(0, 0, false); }
};

struct Problem {
  ag::Shape q, kv;
  bool causal;
  double dropout;
};

// out and the gradients of sum(out * g) for q, k and v in float64, on the blocked twin with
// blocks of 4 queries and 3 keys where `blocked`, else on the tile kernels
std::vector<std::vector<double>> sdpa(const Problem& p, bool blocked) {
  ag::Generator gen(11);
  Tensor q = randn_leaf(p.q, gen), k = randn_leaf(p.kv, gen), v = randn_leaf(p.kv, gen);
  Tensor g = ag::randn(p.q, gen, DType::Float64);
  std::optional<BlockedTwin> twin;
  if (blocked) twin.emplace(4, 3);
  ag::Generator dropout_gen(3);
  Tensor out = ag::scaled_dot_product_attention(q, k, v, p.causal, p.dropout, &dropout_gen);
  ag::sum(out * g).backward();
  return {out.to_vector(), q.grad().to_vector(), k.grad().to_vector(), v.grad().to_vector()};
}

// The largest difference of a and b, each a list of results
double largest_difference(const std::vector<std::vector<double>>& a,
                          const std::vector<std::vector<double>>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].size() == b[i].size());
    for (size_t x = 0; x < a[i].size(); ++x) worst = std::max(worst, std::fabs(a[i][x] - b[i][x]));
  }
  return worst;
}

// causal self-attention of qkv [2, T, (H + 2 KV) 4] and the gradient of sum(out * g), as
// gradcheck and the threads test read it
Tensor grouped_attention(const Tensor& qkv, int64_t H, int64_t KV, double p) {
  ag::Generator g(5);  // the same mask at every evaluation
  return ag::causal_self_attention(qkv, H, KV, p, &g);
}

}  // namespace

TEST_CASE("the blocked attention's float64 twin equals the tile kernels", "[attention][blocked]") {
  const std::vector<Problem> problems = {
      {{1, 3, 11, 3}, {1, 3, 11, 3}, true, 0.0},  // 3 query blocks, 4 key blocks, diagonals
      {{2, 11, 3}, {2, 11, 3}, false, 0.0},
      {{2, 7, 2}, {2, 10, 2}, true, 0.0},       // more keys than queries: the last never seen
      {{3, 7, 5}, {3, 10, 5}, false, 0.0},      // a partial last key block
      {{2, 2, 9, 3}, {2, 2, 9, 3}, true, 0.3},  // dropout: the same masks
      {{1, 1, 1}, {1, 1, 1}, true, 0.0},
  };
  double worst = 0;
  for (const Problem& p : problems) {
    CAPTURE(ag::shape_str(p.q), ag::shape_str(p.kv), p.causal, p.dropout);
    const double difference = largest_difference(sdpa(p, true), sdpa(p, false));
    REQUIRE(difference <= 1e-12);
    worst = std::max(worst, difference);
  }
  REQUIRE(worst > 0);  // the twin did run: its sums are not the tiles'
}

TEST_CASE("the blocked attention's float64 twin folds grouped heads like the tile kernels",
          "[attention][blocked]") {
  ag::Generator gen(12);
  const int64_t H = 4, KV = 2, T = 10, D = 3;
  Tensor qkv = randn_leaf({2, T, (H + 2 * KV) * D}, gen);
  Tensor g = ag::randn({2, T, H * D}, gen, DType::Float64);
  auto run = [&](bool blocked) {
    std::optional<BlockedTwin> twin;
    if (blocked) twin.emplace(3, 4);
    qkv.zero_grad();
    Tensor out = grouped_attention(qkv, H, KV, 0.2);
    ag::sum(out * g).backward();
    return std::vector<std::vector<double>>{out.to_vector(), qkv.grad().to_vector()};
  };
  const double difference = largest_difference(run(true), run(false));
  REQUIRE(difference <= 1e-12);
  REQUIRE(difference > 0);
}

TEST_CASE("gradcheck the blocked attention's float64 twin", "[gradcheck][attention][blocked]") {
  const BlockedTwin twin(3, 2);
  ag::Generator gen(13);
  bool causal = GENERATE(true, false);
  double p = GENERATE(0.0, 0.4);
  CAPTURE(causal, p);
  Tensor q = randn_leaf({1, 2, 7, 3}, gen), k = randn_leaf({1, 2, 5, 3}, gen),
         v = randn_leaf({1, 2, 5, 2}, gen);
  REQUIRE_GRADCHECK(
      [causal, p](const std::vector<Tensor>& in) {
        ag::Generator g(5);
        return ag::scaled_dot_product_attention(in[0], in[1], in[2], causal, p, &g);
      },
      (std::vector<Tensor>{q, k, v}));
  Tensor qkv = randn_leaf({1, 6, 8 * 2}, gen);  // 4 heads of 2 reading 2 key heads
  REQUIRE_GRADCHECK(
      [p](const std::vector<Tensor>& in) { return grouped_attention(in[0], 4, 2, p); },
      (std::vector<Tensor>{qkv}));
}

// The bf16 (autocast) attention of 8 heads reading 2 key heads, 150 tokens of 32-wide heads
// (three query blocks, a batch of rows a call) on `kernel` with `threads` threads: out and
// qkv's gradient
std::vector<std::vector<double>> grouped_bf16(ag::AttentionKernelForTests kernel, int threads) {
  ag::Generator gen(14);
  const int64_t H = 8, KV = 2, T = 150, D = 32;
  Tensor qkv = ag::randn({2, T, (H + 2 * KV) * D}, gen).requires_grad_();
  Tensor g = ag::randn({2, T, H * D}, gen);
  ag::force_attention_kernel_for_tests(kernel);
  ag::set_num_threads(threads);
  std::vector<std::vector<double>> all;
  {
    ag::AutocastScope autocast(ag::Precision::bf16);
    Tensor out = grouped_attention(qkv, H, KV, 0.1);
    ag::sum(out * g).backward();
    all = {out.to_vector(), qkv.grad().to_vector()};
  }
  ag::set_num_threads(1);
  ag::force_attention_kernel_for_tests(ag::AttentionKernelForTests::chosen);
  return all;
}

TEST_CASE("bf16 grouped-query attention on oneDNN's blocks agrees with the FMA kernels",
          "[bf16][attention][blocked]") {
  if (!ag::attention_onednn_available()) {
    WARN("skipped: oneDNN has no bfloat16 kernel on this CPU (or as capped)");
    return;
  }
  using Kernel = ag::AttentionKernelForTests;
  const auto blocked = grouped_bf16(Kernel::onednn, 1), fma = grouped_bf16(Kernel::fma, 1);
  for (size_t i = 0; i < fma.size(); ++i) {
    double err = 0, scale = 0;
    for (size_t x = 0; x < fma[i].size(); ++x)
      err = std::max(err, std::fabs(blocked[i][x] - fma[i][x])),
      scale = std::max(scale, std::fabs(fma[i][x]));
    INFO((i == 0 ? "out" : "dqkv") << ": error " << err << ", scale " << scale);
    REQUIRE(err <= 0x1p-7 * scale);  // tolerance: tests/test_attention_bf16_kernels.cpp
    REQUIRE(err > 0);
  }
  REQUIRE(grouped_bf16(Kernel::onednn, 2) == blocked);
}

}  // namespace attention_blocked_test
