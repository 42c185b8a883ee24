// The fused attention's bf16 (autocast) products on the CPU's BF16 dot products
// (autograd/ops/tile_kernels_bf16.h) and on oneDNN's matmuls (autograd/ops/attention_onednn.h:
// AMX where the CPU has it) against its FMA kernels on the same bfloat16 values.
//
// Tolerance. All multiply the same bfloat16 operands exactly and sum in float32, in
// different orders, so the output differs by float32 summation only (~2^-20 of its scale
// here). Backward reads the output back rounded to bfloat16 (delta = do . o), where a
// float32 difference can move a rounding by one bfloat16 step (2^-8 relative), and that
// reaches the gradients through delta; 2^-7 of each result's largest element allows for it,
// and stays well inside the 2^-6 both keep against float64 (test_bf16.cpp).
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/autograd.h"
#include "autograd/test_hooks.h"

namespace {

struct Case {
  ag::Shape q, kv;  // [R..., T, D] and [R..., S, D]
  bool causal;
  double dropout;
};

using Kernel = ag::AttentionKernelForTests;

// out and the gradients of sum(out * g) for q, k and v, in a bf16 scope, on `kernel`, with
// `threads` threads
std::vector<std::vector<double>> attention(const Case& c, Kernel kernel, int threads) {
  ag::Generator gen(21);
  ag::Tensor q = ag::randn(c.q, gen).requires_grad_(), k = ag::randn(c.kv, gen).requires_grad_(),
             v = ag::randn(c.kv, gen).requires_grad_();
  ag::Tensor g = ag::randn(c.q, gen);
  ag::force_attention_kernel_for_tests(kernel);
  ag::set_num_threads(threads);
  std::vector<std::vector<double>> all;
  {
    ag::AutocastScope autocast(ag::Precision::bf16);
    ag::Generator dropout_gen(3);
    ag::Tensor out =
        ag::scaled_dot_product_attention(q, k, v, c.causal, c.dropout, &dropout_gen, 0.0);
    ag::sum(ag::mul(out, g)).backward();
    all = {out.to_vector(), q.grad().to_vector(), k.grad().to_vector(), v.grad().to_vector()};
  }
  ag::set_num_threads(1);
  ag::force_attention_kernel_for_tests(Kernel::chosen);
  return all;
}

const std::vector<Case> kCases = {
    {{2, 3, 70, 32}, {2, 3, 70, 32}, true, 0.0},   // a partial tile, the causal diagonal
    {{2, 130, 24}, {2, 130, 24}, true, 0.0},       // D not a multiple of the lanes, 3 tiles
    {{3, 65, 16}, {3, 67, 16}, false, 0.0},        // odd key count, not causal
    {{2, 2, 96, 32}, {2, 2, 96, 32}, true, 0.15},  // dropout
};

// kernel's results within 2^-7 of each result's scale of the FMA kernels', and not equal
void require_near_fma(Kernel kernel) {
  const char* names[] = {"out", "dq", "dk", "dv"};
  for (const Case& c : kCases) {
    const auto got = attention(c, kernel, 1), fma = attention(c, Kernel::fma, 1);
    for (int i = 0; i < 4; ++i) {
      double err = 0, scale = 0;
      for (size_t x = 0; x < fma[i].size(); ++x)
        err = std::max(err, std::fabs(got[i][x] - fma[i][x])),
        scale = std::max(scale, std::fabs(fma[i][x]));
      INFO(names[i] << " of q " << ag::shape_str(c.q) << ": error " << err << ", scale " << scale);
      REQUIRE(err <= 0x1p-7 * scale);
      REQUIRE(err > 0);  // the kernel did run: its sums differ from the FMA kernels'
    }
  }
}

// Whether `kernel` can run on this CPU (as oneDNN is capped); a warning naming why not
bool runs_here(Kernel kernel) {
  if (kernel == Kernel::units && !ag::attention_bf16_units_available()) {
    WARN("skipped: this CPU has no AVX-512 BF16 instructions");
    return false;
  }
  if (kernel == Kernel::onednn && !ag::attention_onednn_available()) {
    WARN("skipped: oneDNN has no bfloat16 kernel on this CPU (or as capped)");
    return false;
  }
  return true;
}

}  // namespace

TEST_CASE("bf16 attention on the BF16 units agrees with the FMA kernels", "[bf16][attention]") {
  if (!runs_here(Kernel::units)) return;
  require_near_fma(Kernel::units);
}

TEST_CASE("bf16 attention on the BF16 units gives identical bits on one and two threads",
          "[bf16][attention][threads]") {
  if (!runs_here(Kernel::units)) return;
  const Case c{{3, 2, 100, 32}, {3, 2, 100, 32}, true, 0.1};
  REQUIRE(attention(c, Kernel::units, 1) == attention(c, Kernel::units, 2));
}

// On a CPU with AMX oneDNN runs these products on its tiles; ctest also runs this file with
// ONEDNN_MAX_CPU_ISA capped (tests/CMakeLists.txt), so each of oneDNN's bfloat16 kernels
// this CPU can run is checked, and without one (AVX2) the error below.
TEST_CASE("bf16 attention on oneDNN's matmuls agrees with the FMA kernels", "[bf16][attention]") {
  if (!runs_here(Kernel::onednn)) return;
  require_near_fma(Kernel::onednn);
}

TEST_CASE("bf16 attention on oneDNN's matmuls gives identical bits on one and two threads",
          "[bf16][attention][threads]") {
  if (!runs_here(Kernel::onednn)) return;
  // blocks of queries smaller than a row (S = 600: 436 queries a block), and dropout
  const Case c{{3, 2, 600, 16}, {3, 2, 600, 16}, true, 0.1};
  REQUIRE(attention(c, Kernel::onednn, 1) == attention(c, Kernel::onednn, 2));
}

TEST_CASE("forcing the attention onto oneDNN without its bfloat16 kernels is an error naming why",
          "[bf16][attention]") {
  if (ag::attention_onednn_available()) return;  // ctest's ONEDNN_MAX_CPU_ISA=AVX2 run
  const Case c{{1, 8, 16}, {1, 8, 16}, true, 0.0};
  REQUIRE_THROWS_WITH(attention(c, Kernel::onednn, 1),
                      Catch::Contains("oneDNN has no bfloat16 kernel"));
  ag::force_attention_kernel_for_tests(Kernel::chosen);
}

// Run by ctest's bf16.attention_onednn before the [bf16] tests on oneDNN (hidden otherwise)
TEST_CASE("oneDNN has bfloat16 kernels for the attention here", "[.][onednn_probe]") {
  REQUIRE(ag::attention_onednn_available());
}
