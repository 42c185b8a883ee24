// --precision bf16 falls back to float32 per shape, so that bf16 is never slower than fp32:
// a linear, a matmul or the fused attention whose shape this CPU runs faster in float32
// (by the measured table, gemm_tuning.h) runs as fp32 does, with fp32's bits, forward and
// backward; within the tuning margin, where nothing was measured and under
// ATTOGRAD_BF16_FALLBACK=off, bf16 stays. Tables are planted (ranks' adopt_tuned_entries),
// so each answer is the test's, not this CPU's.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/autograd.h"
#include "autograd/ops/gemm.h"
#include "support.h"
#include "tuning_environment.h"

using ag_test::Bf16FallbackScope;
using ag_test::TempDir;
using ag_test::TuningEnvironment;

namespace {

// A linear with GELU on [64, 48] -> 32 (its forward GEMM: class NT 2^6 x 2^5 x 2^6), then a
// plain one: the output and every gradient, flattened, in the given precision
std::vector<double> linear_run(ag::Precision precision) {
  ag::Generator gen(7);
  const ag::Tensor x = ag::randn({64, 48}, gen).requires_grad_();
  const ag::Tensor w1 = ag::randn({32, 48}, gen).requires_grad_();
  const ag::Tensor b1 = ag::randn({32}, gen).requires_grad_();
  const ag::Tensor w2 = ag::randn({32, 32}, gen).requires_grad_();
  ag::Tensor y;
  {
    const ag::AutocastScope autocast(precision);
    y = ag::linear(ag::linear(x, w1, b1, ag::Activation::Gelu), w2);
  }
  ag::sum(y * y).backward();
  std::vector<double> all = y.to_vector();
  for (const ag::Tensor& t : {x, w1, b1, w2})
    for (double v : t.grad().to_vector()) all.push_back(v);
  return all;
}

// The fused attention on [2, 70, 3 * 64] with 2 heads (class causal 2^7 x 2^7, d 2^5): its
// output and the gradient of qkv
std::vector<double> attention_run(ag::Precision precision) {
  ag::Generator gen(9);
  const ag::Tensor qkv = ag::randn({2, 70, 3 * 64}, gen).requires_grad_();
  ag::Tensor out;
  {
    const ag::AutocastScope autocast(precision);
    out = ag::causal_self_attention(qkv, 2, 0.0, nullptr);
  }
  ag::sum(out * out).backward();
  std::vector<double> all = out.to_vector();
  for (double v : qkv.grad().to_vector()) all.push_back(v);
  return all;
}

// A table as rank 0 would send it: the linears' forward classes (NT 6 5 6, NT 6 5 5) in
// bf16 and f32 with the given kernels and GFLOP/s
std::string linear_table(const std::string& bf16_kernel, double bf16_gflops, double f32_gflops) {
  std::string text;
  for (const char* shape : {"NT 6 5 6", "NT 6 5 5"})
    text += fmt::format("bf16 {0} {1} {1}={2:.1f}\nf32 {0} onednn_f32 onednn_f32={3:.1f}\n", shape,
                        bf16_kernel, bf16_gflops, f32_gflops);
  return text;
}

}  // namespace

// The linears in fp32, in bf16 kept everywhere, and in bf16 as the fallback decides, all
// under one planted table (it holds the GEMMs' kernels too: the runs compare like with like)
struct LinearRuns {
  std::vector<double> f32, strict, bf16;
};

LinearRuns linear_runs(const std::string& table) {
  ag::detail::adopt_tuned_entries(table);
  LinearRuns runs{linear_run(ag::Precision::fp32), {}, linear_run(ag::Precision::bf16)};
  const Bf16FallbackScope off(false);
  runs.strict = linear_run(ag::Precision::bf16);
  // bf16 rounds: the two can be told apart (and ATTOGRAD_BF16_FALLBACK=off kept it, whatever
  // the table says)
  REQUIRE(runs.strict != runs.f32);
  return runs;
}

TEST_CASE("a bf16 linear whose shape runs faster in float32 here has fp32's bits") {
  TempDir dir;
  TuningEnvironment env(dir.file("cache"));
  const Bf16FallbackScope fallback(true);
  SECTION("the bf16 class kept a widened kernel: float32's kernels plus a widening pass") {
    const LinearRuns runs = linear_runs(linear_table("widened_onednn", 300, 200));
    CHECK(runs.bf16 == runs.f32);
  }
  SECTION("float32 beat oneDNN's bf16 kernel by more than the margin") {
    const LinearRuns runs = linear_runs(linear_table("onednn_bf16", 100, 104));
    CHECK(runs.bf16 == runs.f32);
  }
  SECTION("within the margin, or slower, float32 does not replace bf16") {
    LinearRuns runs = linear_runs(linear_table("onednn_bf16", 100, 102));
    CHECK(runs.bf16 == runs.strict);
    runs = linear_runs(linear_table("onednn_bf16", 400, 200));
    CHECK(runs.bf16 == runs.strict);
  }
  SECTION("a class nobody measured stays bf16") {
    const LinearRuns runs = linear_runs("");
    CHECK(runs.bf16 == runs.strict);
  }
  SECTION("ATTOGRAD_TUNE=off: nothing is measured, so nothing falls back") {
    env.set_mode("off");
    const LinearRuns runs = linear_runs(linear_table("widened_onednn", 300, 200));
    CHECK(runs.bf16 == runs.strict);
  }
}

TEST_CASE("a GELU linear that falls back still fills the copy a bf16 linear after it reads") {
  TempDir dir;
  TuningEnvironment env(dir.file("cache"));
  const Bf16FallbackScope fallback(true);
  // the first linear (NT 6 5 6) runs in float32, the second (NT 6 5 5) in bf16: shapes of
  // both kinds have run, so producers attach their copies
  ag::detail::adopt_tuned_entries(
      "bf16 NT 6 5 6 widened_onednn widened_onednn=300.0\n"
      "f32 NT 6 5 6 onednn_f32 onednn_f32=200.0\n"
      "bf16 NT 6 5 5 onednn_bf16 onednn_bf16=400.0\n"
      "f32 NT 6 5 5 onednn_f32 onednn_f32=200.0\n");
  linear_run(ag::Precision::bf16);
  ag::Generator gen(17);
  const ag::Tensor x = ag::randn({64, 48}, gen).requires_grad_();  // recorded: gelu' kept
  const ag::Tensor w = ag::randn({32, 48}, gen), b = ag::randn({32}, gen);
  ag::Tensor y;
  {
    const ag::AutocastScope autocast(ag::Precision::bf16);
    y = ag::linear(x, w, b, ag::Activation::Gelu);
  }
  const auto& copy = y.impl()->storage->bf16_copy;
  REQUIRE(copy != nullptr);
  const ag::Tensor rounded = ag::to_bfloat16(y.detach());
  CHECK(std::memcmp(copy->data, rounded.data<ag::bfloat16>(), rounded.numel() * 2) == 0);
}

TEST_CASE("once shapes fell back and none ran in bf16, producers make no bfloat16 copies") {
  TempDir dir;
  TuningEnvironment env(dir.file("cache"));
  const Bf16FallbackScope fallback(true);
  ag::detail::forget_bf16_choices_for_tests();
  ag::Generator gen(13);
  const ag::Tensor x = ag::randn({64, 48}, gen);
  auto layer_norm_copied = [&] {
    const ag::AutocastScope autocast(ag::Precision::bf16);
    return ag::layer_norm(x, ag::Tensor(), ag::Tensor(), 1e-5).impl()->storage->bf16_copy !=
           nullptr;
  };
  CHECK(layer_norm_copied());  // nothing decided yet
  ag::detail::adopt_tuned_entries(linear_table("widened_onednn", 300, 200));
  linear_run(ag::Precision::bf16);
  CHECK_FALSE(layer_norm_copied());
  ag::detail::adopt_tuned_entries(linear_table("onednn_bf16", 400, 200));
  linear_run(ag::Precision::bf16);
  CHECK(layer_norm_copied());  // a shape runs in bf16 again: its input may be a copy
  ag::detail::forget_bf16_choices_for_tests();
}

TEST_CASE("a bf16 matmul whose shape runs faster in float32 here has fp32's bits") {
  TempDir dir;
  TuningEnvironment env(dir.file("cache"));
  const Bf16FallbackScope fallback(true);
  ag::Generator gen(11);
  const ag::Tensor a = ag::randn({64, 48}, gen), b = ag::randn({48, 40}, gen);
  auto product = [&](ag::Precision precision) {
    const ag::AutocastScope autocast(precision);
    return ag::matmul(a, b.t().contiguous().t()).to_vector();  // b read transposed: NT
  };
  ag::detail::adopt_tuned_entries(
      "bf16 NT 6 6 6 onednn_bf16 onednn_bf16=100.0\nf32 NT 6 6 6 openblas_f32 "
      "openblas_f32=150.0\n");
  CHECK(product(ag::Precision::bf16) == product(ag::Precision::fp32));
  ag::detail::adopt_tuned_entries(
      "bf16 NT 6 6 6 onednn_bf16 onednn_bf16=200.0\nf32 NT 6 6 6 openblas_f32 "
      "openblas_f32=150.0\n");
  CHECK(product(ag::Precision::bf16) != product(ag::Precision::fp32));
}

TEST_CASE("a bf16 attention whose row runs faster in float32 here has fp32's bits") {
  TempDir dir;
  TuningEnvironment env(dir.file("cache"));
  const Bf16FallbackScope fallback(true);
  const std::vector<double> f32 = attention_run(ag::Precision::fp32);
  const std::string bf16_line = "bf16 AC 7 7 5 attention_fma attention_fma=50.0\n";
  ag::detail::adopt_tuned_entries(bf16_line + "f32 AC 7 7 5 attention_f32 attention_f32=60.0\n");
  CHECK(attention_run(ag::Precision::bf16) == f32);
  ag::detail::adopt_tuned_entries(bf16_line + "f32 AC 7 7 5 attention_f32 attention_f32=51.0\n");
  const std::vector<double> bf16 = attention_run(ag::Precision::bf16);
  CHECK(bf16 != f32);
  const Bf16FallbackScope off(false);
  ag::detail::adopt_tuned_entries(bf16_line + "f32 AC 7 7 5 attention_f32 attention_f32=60.0\n");
  CHECK(attention_run(ag::Precision::bf16) == bf16);
}

TEST_CASE("bf16_pays measures a shape's bf16 and f32 classes before any operand exists") {
  TempDir dir;
  TuningEnvironment env(dir.file("cache"));
  const Bf16FallbackScope fallback(true);
  const bool pays = ag::detail::bf16_pays(false, true, 256, 512, 128);
  const auto entries = ag::detail::tuned_entries();
  REQUIRE(entries.size() == 2);
  CHECK(ag::detail::describe(entries[0].cls) == "bf16 NT 256x512x128");
  CHECK(ag::detail::describe(entries[1].cls) == "f32 NT 256x512x128");
  CHECK(pays == ag::detail::bf16_class_pays(entries[0].cls));
  CHECK(ag::detail::bf16_pays(false, true, 256, 512, 128) == pays);  // decided: kept
  CHECK(ag::detail::tuned_entries().size() == 2);
}

TEST_CASE("ATTOGRAD_BF16_FALLBACK is on, off, or a one-line error") {
  const char* saved = std::getenv("ATTOGRAD_BF16_FALLBACK");
  const std::string before = saved ? saved : "";
  auto read = [](const char* value) {
    if (value)
      ::setenv("ATTOGRAD_BF16_FALLBACK", value, 1);
    else
      ::unsetenv("ATTOGRAD_BF16_FALLBACK");
    ag::detail::set_bf16_fallback(std::nullopt);  // read the environment again
    return ag::detail::bf16_fallback_enabled();
  };
  CHECK(read(nullptr));
  CHECK(read("on"));
  CHECK_FALSE(read("off"));
  CHECK_THROWS_WITH(read("sometimes"), "ATTOGRAD_BF16_FALLBACK must be on or off, got 'sometimes'");
  if (saved)
    ::setenv("ATTOGRAD_BF16_FALLBACK", before.c_str(), 1);
  else
    ::unsetenv("ATTOGRAD_BF16_FALLBACK");
  ag::detail::set_bf16_fallback(std::nullopt);
}
