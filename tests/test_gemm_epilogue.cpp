// The GEMM epilogue (autograd/ops/gemm.h): the bias a library adds in its kernel gives the
// bits of the product plus the bias added afterwards, on every backend and layout, and
// rows_done sees every row exactly once, also when a GEMM's blocks run as tasks.
#include <omp.h>

#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/ops/gemm.h"
#include "autograd/test_hooks.h"

using ag::detail::GemmEpilogue;
using ag::detail::GemmOperand;

namespace {

using EpilogueShapes = std::vector<std::array<int64_t, 3>>;
// one block, several along M, a ragged last block, several blocks along N (N > M), an
// OpenBLAS-sized one
const EpilogueShapes kShapes = {
    {5, 7, 3}, {300, 70, 129}, {1000, 96, 64}, {40, 2050, 100}, {2, 3, 4}};

enum class Backend { chosen, onednn, openblas, bf16 };

// oneDNN's blocks computed by their fallback while in scope (as where oneDNN has no kernel)
struct FallbackScope {
  explicit FallbackScope(bool on) { ag::detail::force_gemm_fallback_for_tests(on); }
  ~FallbackScope() { ag::detail::force_gemm_fallback_for_tests(false); }
};

// C [M, N] = A B (+ bias) on one backend, into c; A [M, K] as its transpose when ta
void multiply(Backend backend, const ag::Tensor& a, const ag::Tensor& b, bool ta, float* c,
              const float* bias, const std::function<void(int64_t, int64_t)>& rows_done) {
  const int64_t K = b.shape()[0], N = b.shape()[1], M = ta ? a.shape()[1] : a.shape()[0];
  const GemmOperand oa{ta, ta ? M : K}, ob{false, N};
  const GemmEpilogue<float> e{bias, rows_done};
  switch (backend) {
    case Backend::chosen:
      ag::detail::gemm(oa, ob, M, N, K, a.data<float>(), b.data<float>(), c, 0, e);
      break;
    case Backend::onednn:
      ag::detail::gemm_onednn(oa, ob, M, N, K, a.data<float>(), b.data<float>(), c, 0, e);
      break;
    case Backend::openblas:
      ag::detail::gemm_openblas(oa, ob, M, N, K, a.data<float>(), b.data<float>(), c, 0, e);
      break;
    case Backend::bf16: {
      ag::Tensor ab = ag::to_bfloat16(a), bb = ag::to_bfloat16(b);
      ag::detail::gemm_onednn(oa, ob, M, N, K, ab.data<ag::bfloat16>(), bb.data<ag::bfloat16>(), c,
                              0, e);
      break;
    }
  }
}

// multiply's C, from garbage the GEMM must overwrite (beta 0)
ag::Tensor product(Backend backend, const ag::Tensor& a, const ag::Tensor& b, bool ta,
                   const float* bias, const std::function<void(int64_t, int64_t)>& rows_done) {
  ag::Tensor c = ag::full({ta ? a.shape()[1] : a.shape()[0], b.shape()[1]}, 7.0);
  multiply(backend, a, b, ta, c.data<float>(), bias, rows_done);
  return c;
}

ag::Tensor magnitudes(const ag::Tensor& t) {
  std::vector<double> v = t.to_vector();
  for (auto& x : v) x = std::fabs(x);
  return ag::from_vector(v, t.shape(), ag::DType::Float64);
}

}  // namespace

TEST_CASE("a GEMM's bias gives the bits of the product plus the bias", "[gemm]") {
  ag::Generator gen(3);
  for (Backend backend : {Backend::chosen, Backend::onednn, Backend::openblas, Backend::bf16})
    for (const auto& shape : kShapes)
      for (int variant = 0; variant < 4; ++variant) {            // A transposed or not, x fallback
        const int64_t M = shape[0], N = shape[1], K = shape[2];  // (clang 14: no captured bindings)
        const bool t = variant % 2;
        FallbackScope fallback(variant >= 2);
        INFO("backend " << static_cast<int>(backend) << " M " << M << " N " << N << " K " << K
                        << " ta " << t << " fallback " << (variant >= 2));
        ag::Tensor a = ag::randn(t ? ag::Shape{K, M} : ag::Shape{M, K}, gen);
        ag::Tensor b = ag::randn({K, N}, gen), bias = ag::randn({N}, gen);
        ag::Tensor with_bias = product(backend, a, b, t, bias.data<float>(), {});
        ag::Tensor plain = product(backend, a, b, t, nullptr, {});
        const float* w = with_bias.data<float>();
        const float* p = plain.data<float>();
        const float* bp = bias.data<float>();
        int64_t differing = 0;
        for (int64_t i = 0; i < M * N; ++i) differing += w[i] != p[i] + bp[i % N];
        REQUIRE(differing == 0);
        // and right: float32 sums of the (bf16: rounded) operands against float64, within
        // 4 K 2^-24 sum |a b|, and the bias's addition within 2^-24 of the result
        const auto wide = [&](const ag::Tensor& x) {
          const ag::Tensor r =
              backend == Backend::bf16 ? ag::to_bfloat16(x).to(ag::DType::Float32) : x;
          return r.to(ag::DType::Float64);
        };
        const ag::Tensor a64 = wide(t ? a.t() : a), b64 = wide(b);
        const std::vector<double> want = ag::matmul(a64, b64).to_vector();
        const std::vector<double> scale = ag::matmul(magnitudes(a64), magnitudes(b64)).to_vector();
        int64_t off = 0;
        for (int64_t i = 0; i < M * N; ++i) {
          const double exact = want[i] + bp[i % N];
          off += std::abs(w[i] - exact) > 4.0 * K * 0x1p-24 * scale[i] + 0x1p-24 * std::abs(exact);
        }
        REQUIRE(off == 0);
      }
}

TEST_CASE("rows_done sees every row of C once, finished", "[gemm]") {
  ag::Generator gen(4);
  for (Backend backend : {Backend::onednn, Backend::openblas, Backend::bf16})
    for (const auto& shape : kShapes)
      for (int variant = 0; variant < 3; ++variant) {
        const int64_t M = shape[0], N = shape[1], K = shape[2];  // (clang 14: no captured bindings)
        const bool in_tasks = variant == 1;
        FallbackScope fallback(variant == 2);
        INFO("backend " << static_cast<int>(backend) << " M " << M << " N " << N << " K " << K
                        << " in tasks " << in_tasks << " fallback " << (variant == 2));
        ag::Tensor a = ag::randn({M, K}, gen), b = ag::randn({K, N}, gen);
        ag::Tensor want = product(backend, a, b, false, nullptr, {});
        std::vector<std::atomic<int>> seen(M);
        std::atomic<int64_t> wrong{0};
        ag::Tensor c;
        // rows_done reads C through `c`, which multiply() fills before any row is finished
        auto check_rows = [&](int64_t row0, int64_t rows) {
          for (int64_t r = row0; r < row0 + rows; ++r) {
            ++seen[r];
            wrong += std::memcmp(c.data<float>() + r * N, want.data<float>() + r * N, 4 * N) != 0;
          }
        };
        c = ag::full({M, N}, 7.0);
        auto run = [&] { multiply(backend, a, b, false, c.data<float>(), nullptr, check_rows); };
        if (in_tasks) {
#pragma omp parallel num_threads(2)
#pragma omp single
          {
#pragma omp task
            run();
          }
        } else {
          run();
        }
        REQUIRE(wrong == 0);
        int64_t not_once = 0;
        for (auto& s : seen) not_once += s != 1;
        REQUIRE(not_once == 0);
      }
}

TEST_CASE("a linear with no inputs gives its bias, through GELU too", "[gemm][linear]") {
  ag::Tensor x = ag::zeros({3, 0}), w = ag::zeros({4, 0}), b = ag::tensor({-1.0, 0.0, 0.5, 2.0});
  ag::Tensor h = ag::linear(x, w, b), y = ag::linear(x, w, b, ag::Activation::Gelu);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 4; ++c) {
      REQUIRE(h.at({r, c}) == b.at({c}));
      REQUIRE(y.at({r, c}) == ag::gelu(b).at({c}));
    }
}
