// oneDNN's ways of cutting a GEMM into single-threaded calls (autograd/ops/gemm.h,
// OneDnnLayout: standard blocks, large blocks, B packed once, both), each a candidate of the
// tuner: every one gives the product within float32 summation's tolerance, the same bits on
// one thread and on two, honours the epilogues (bias, rows_done, beta 1), and runs where the
// tuning table names it.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/ops/gemm.h"
#include "autograd/ops/gemm_tuning.h"
#include "support.h"
#include "tuning_environment.h"

using ag::detail::GemmEpilogue;
using ag::detail::GemmKernel;
using ag::detail::GemmOperand;
using ag::detail::OneDnnLayout;

namespace {

constexpr OneDnnLayout kLayouts[] = {{false, false}, {true, false}, {false, true}, {true, true}};

struct GemmShape {
  int64_t M, N, K;
};
// blocks along M with a ragged last one (16 standard, 4 large); along N (N > M: B is not
// shared, so packed runs plain); along M evenly; one block
const GemmShape kLayoutShapes[] = {
    {1000, 300, 200}, {130, 2100, 96}, {2048, 384, 128}, {64, 64, 40}};

// A GEMM's operands as float32 tensors laid out as (ta, tb) say, and as bfloat16
struct Operands {
  ag::Tensor a, b, a16, b16;
  GemmOperand oa, ob;
};

Operands operands(const GemmShape& s, bool ta, bool tb, ag::Generator& gen) {
  Operands o;
  o.a = ag::randn(ta ? ag::Shape{s.K, s.M} : ag::Shape{s.M, s.K}, gen);
  o.b = ag::randn(tb ? ag::Shape{s.N, s.K} : ag::Shape{s.K, s.N}, gen);
  o.a16 = ag::to_bfloat16(o.a), o.b16 = ag::to_bfloat16(o.b);
  o.oa = {ta, ta ? s.M : s.K}, o.ob = {tb, tb ? s.K : s.N};
  return o;
}

// C [M, N] = A B (+ beta C) (+ bias) by oneDNN cut as `layout` says, on bfloat16 operands
// where bf16, into c
void layout_multiply(const Operands& o, const GemmShape& s, bool bf16, OneDnnLayout layout,
                     float* c, float beta = 0, const GemmEpilogue<float>& e = {}) {
  if (bf16)
    ag::detail::gemm_onednn(o.oa, o.ob, s.M, s.N, s.K, o.a16.data<ag::bfloat16>(),
                            o.b16.data<ag::bfloat16>(), c, beta, e, layout);
  else
    ag::detail::gemm_onednn(o.oa, o.ob, s.M, s.N, s.K, o.a.data<float>(), o.b.data<float>(), c,
                            beta, e, layout);
}

std::vector<float> layout_product(const Operands& o, const GemmShape& s, bool bf16,
                                  OneDnnLayout layout, const GemmEpilogue<float>& e = {}) {
  std::vector<float> c(static_cast<size_t>(s.M * s.N), 7.0f);  // garbage beta 0 overwrites
  layout_multiply(o, s, bf16, layout, c.data(), 0, e);
  return c;
}

ag::Tensor layout_magnitudes(const ag::Tensor& t) {
  std::vector<double> v = t.to_vector();
  for (auto& x : v) x = std::fabs(x);
  return ag::from_vector(v, t.shape(), ag::DType::Float64);
}

// The elements of c off the float64 product of the (bf16: rounded) operands (+ addend) by
// more than float32 summation allows: 4 (K + 1) 2^-24 (sum |a b| + |addend|)
int64_t off_the_product(const Operands& o, const GemmShape& s, bool bf16,
                        const std::vector<float>& c, const float* addend = nullptr) {
  const auto wide = [&](const ag::Tensor& x, bool t) {
    const ag::Tensor r = bf16 ? ag::to_bfloat16(x).to(ag::DType::Float32) : x;
    return (t ? r.t() : r).to(ag::DType::Float64);
  };
  const ag::Tensor a64 = wide(o.a, o.oa.trans), b64 = wide(o.b, o.ob.trans);
  const std::vector<double> want = ag::matmul(a64, b64).to_vector();
  const std::vector<double> scale =
      ag::matmul(layout_magnitudes(a64), layout_magnitudes(b64)).to_vector();
  int64_t off = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const double add = addend ? addend[i] : 0.0;
    off +=
        std::abs(c[i] - (want[i] + add)) > 4.0 * (s.K + 1) * 0x1p-24 * (scale[i] + std::abs(add));
  }
  return off;
}

int64_t differing(const std::vector<float>& x, const std::vector<float>& y) {
  int64_t n = 0;
  for (size_t i = 0; i < x.size(); ++i) n += std::memcmp(&x[i], &y[i], sizeof(float)) != 0;
  return n;
}

// Calls fn(shape, bf16, layout, operands) over every shape, precision, layout and operand
// layout (A, B transposed or not)
template <typename F>
void for_each_case(F&& fn) {
  ag::Generator gen(11);
  for (const GemmShape& s : kLayoutShapes)
    for (bool bf16 : {false, true})
      for (int variant = 0; variant < 4; ++variant) {
        const Operands o = operands(s, variant & 1, variant & 2, gen);
        for (const OneDnnLayout& layout : kLayouts) {
          INFO("M " << s.M << " N " << s.N << " K " << s.K << " bf16 " << bf16 << " ta "
                    << o.oa.trans << " tb " << o.ob.trans << " large " << layout.large_blocks
                    << " packed " << layout.packed_b);
          fn(s, bf16, layout, o);
        }
      }
}

}  // namespace

TEST_CASE("every oneDNN block layout gives the product within float32 summation", "[gemm]") {
  for_each_case([](const GemmShape& s, bool bf16, OneDnnLayout layout, const Operands& o) {
    REQUIRE(off_the_product(o, s, bf16, layout_product(o, s, bf16, layout)) == 0);
  });
}

TEST_CASE("every oneDNN block layout gives the same bits on one thread and on two", "[gemm]") {
  const int threads = ag::num_threads();
  for_each_case([](const GemmShape& s, bool bf16, OneDnnLayout layout, const Operands& o) {
    ag::set_num_threads(1);
    const std::vector<float> one = layout_product(o, s, bf16, layout);
    ag::set_num_threads(2);
    REQUIRE(differing(one, layout_product(o, s, bf16, layout)) == 0);
  });
  ag::set_num_threads(threads);
}

// The bias is one float32 sum, product + bias, as GemmEpilogue promises. Beta 1 adds C within
// float32 summation: as one sum where the kernel adds C after all of K, but oneDNN's AVX2
// sgemm (an AMD EPYC Zen 3) sums K in blocks (256 of A as given, fewer of A transposed)
// and adds each block's sum onto C in turn
TEST_CASE("every oneDNN block layout adds the bias as one float32 sum, and beta 1 adds C",
          "[gemm]") {
  ag::Generator gen(12);
  const ag::Tensor bias_t = ag::randn({2100}, gen), before_t = ag::randn({2048 * 2100}, gen);
  const float* bias = bias_t.data<float>();
  const float* before = before_t.data<float>();
  for_each_case([&](const GemmShape& s, bool bf16, OneDnnLayout layout, const Operands& o) {
    const std::vector<float> plain = layout_product(o, s, bf16, layout);
    const std::vector<float> with_bias = layout_product(o, s, bf16, layout, {bias, {}});
    std::vector<float> accumulated(before, before + s.M * s.N);
    layout_multiply(o, s, bf16, layout, accumulated.data(), 1);
    int64_t wrong_bias = 0;
    for (int64_t i = 0; i < s.M * s.N; ++i) wrong_bias += with_bias[i] != plain[i] + bias[i % s.N];
    REQUIRE(wrong_bias == 0);
    REQUIRE(off_the_product(o, s, bf16, accumulated, before) == 0);
  });
}

TEST_CASE("every oneDNN block layout shows each finished row to rows_done once", "[gemm]") {
  for_each_case([](const GemmShape& s, bool bf16, OneDnnLayout layout, const Operands& o) {
    const std::vector<float> want = layout_product(o, s, bf16, layout);
    std::vector<float> c(want.size(), 7.0f);
    std::vector<std::atomic<int>> seen(static_cast<size_t>(s.M));
    std::atomic<int64_t> wrong{0};
    const GemmEpilogue<float> e{nullptr, [&](int64_t row0, int64_t rows) {
                                  for (int64_t r = row0; r < row0 + rows; ++r) {
                                    ++seen[r];
                                    wrong += std::memcmp(&c[r * s.N], &want[r * s.N],
                                                         sizeof(float) * s.N) != 0;
                                  }
                                }};
#pragma omp parallel num_threads(2)
#pragma omp single
    {
#pragma omp task
      layout_multiply(o, s, bf16, layout, c.data(), 0, e);  // its blocks as tasks of this team
    }
    REQUIRE(wrong == 0);
    int64_t not_once = 0;
    for (auto& n : seen) not_once += n != 1;
    REQUIRE(not_once == 0);
  });
}

TEST_CASE("a class whose table names a block layout runs that layout", "[gemm]") {
  ag_test::TempDir dir;
  ag_test::TuningEnvironment env(dir.file("cache"));
  ag::Generator gen(13);
  const GemmShape s{2048, 384, 128};
  const Operands o = operands(s, false, true, gen);
  const int threads = ag::num_threads();
  ag::set_num_threads(2);
  for (const char* name : {"onednn_f32_large", "onednn_f32_packed", "onednn_f32_large_packed"}) {
    INFO(name);
    ag::detail::adopt_tuned_entries(std::string("f32 NT 11 9 7 ") + name + "\n");
    CHECK(ag::detail::tuned_entries_text().find(name) != std::string::npos);
    std::vector<float> c(static_cast<size_t>(s.M * s.N));
    ag::detail::gemm(o.oa, o.ob, s.M, s.N, s.K, o.a.data<float>(), o.b.data<float>(), c.data());
    const std::string kernel(name);
    const OneDnnLayout layout{kernel.find("large") != std::string::npos,
                              kernel.find("packed") != std::string::npos};
    CHECK(differing(c, layout_product(o, s, false, layout)) == 0);
  }
  ag::set_num_threads(threads);
}

TEST_CASE("fresh tuning times every block layout a GEMM can take", "[gemm]") {
  ag_test::TempDir dir;
  ag_test::TuningEnvironment env(dir.file("cache"), "fresh");
  ag::Generator gen(14);
  // x W^T. The _packed kernels are timed where this CPU's oneDNN kernel reads B from a layout
  // of its own, as its brgemm kernels do; not where it reads B as given (gemm:jit, as for
  // bfloat16 on an Intel Xeon without BF16 units), where they would only repeat the plain one
  const ag::Tensor a = ag::randn({2048, 128}, gen), w = ag::randn({384, 128}, gen);
  for (ag::Precision precision : {ag::Precision::fp32, ag::Precision::bf16}) {
    const ag::AutocastScope autocast(precision);
    ag::matmul(a, w.t());
  }
  const std::vector<ag::detail::TunedEntry> entries = ag::detail::tuned_entries();
  REQUIRE(entries.size() == 2);
  std::map<bool, bool> packs;  // by bf16
  for (const auto& e : entries) {
    INFO(ag::detail::describe(e.cls));
    const int64_t M = 256, N = 384, K = 128;  // a block of the sample, in the class's layout
    const GemmOperand oa{e.cls.ta, e.cls.ta ? M : K}, ob{e.cls.tb, e.cls.tb ? K : N};
    packs[e.cls.bf16] = ag::detail::onednn_packs_b(e.cls.bf16, oa, ob, M, N, K);
    // oneDNN multiplies float32 everywhere, bfloat16 only with AVX-512 (not on an AMD EPYC
    // Zen 3's AVX2, where the bf16 classes have the widened kernels alone)
    std::vector<ag::bfloat16> zeros(static_cast<size_t>(std::max(M, N) * K));
    std::vector<float> c(static_cast<size_t>(M * N));
    const bool kernel = !e.cls.bf16 || ag::detail::onednn_matmul_here(oa, ob, M, N, K, zeros.data(),
                                                                      zeros.data(), c.data(), N);
    const char* onednn = e.cls.bf16 ? "onednn_bf16" : "onednn_f32";
    for (const std::string suffix : {"", "_large", "_packed", "_large_packed"}) {
      INFO(suffix << (!kernel             ? ": oneDNN has no kernel here"
                      : packs[e.cls.bf16] ? ": oneDNN packs B here"
                                          : ": oneDNN reads B as given here"));
      int timed = 0;
      for (const auto& [k, gflops] : e.gflops)
        timed += ag::detail::kernel_name(k) == onednn + suffix && gflops > 0;
      const bool exists =
          kernel && (suffix.find("packed") == std::string::npos || packs[e.cls.bf16]);
      CHECK(timed == (exists ? 1 : 0));
    }
  }
  // and the file keeps every figure, for bench --tune and the next process
  const std::string file = ag::detail::tuning_file();
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK((text.find("onednn_f32_large_packed=") != std::string::npos) == packs[false]);
  CHECK((text.find("onednn_bf16_large_packed=") != std::string::npos) == packs[true]);
}
