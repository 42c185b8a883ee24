// Measured GEMM kernel choice (autograd/ops/gemm_tuning.h): a class is timed once and
// kept, in the process and in the cache file; the rule stays unless beaten by 3%;
// ATTOGRAD_TUNE=off|fresh; hostile cache files are ignored; distributed ranks adopt one
// table; and the kernels chosen give the same bits on any thread count.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "autograd/autocast.h"
#include "autograd/autograd.h"
#include "autograd/ops/gemm_tuning.h"
#include "autograd/test_hooks.h"
#include "support.h"
#include "tuning_environment.h"

using ag::detail::GemmKernel;
using ag_test::TempDir;
using ag_test::TuningEnvironment;

namespace {

constexpr GemmKernel kF32[] = {GemmKernel::onednn_f32, GemmKernel::openblas_f32};

// A timer that says each kernel takes `seconds[k]`, counting the runs it was asked for
struct FakeTimer {
  std::map<GemmKernel, double> seconds;
  int runs = 0;
  double operator()(GemmKernel k) {
    ++runs;
    return seconds.at(k);
  }
};

GemmKernel decide(FakeTimer& timer, int64_t M = 2048, int64_t N = 768, int64_t K = 256) {
  return ag::detail::tuned_kernel(ag::detail::gemm_class(false, false, true, M, N, K), kF32,
                                  GemmKernel::onednn_f32, 1e6,
                                  [&](GemmKernel k) { return timer(k); });
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("a GEMM class is measured once and its answer kept in the cache file") {
  TempDir dir;
  TuningEnvironment env(dir.file("cache"));
  FakeTimer timer{{{GemmKernel::onednn_f32, 0.5}, {GemmKernel::openblas_f32, 0.2}}};
  CHECK(decide(timer) == GemmKernel::openblas_f32);
  CHECK(timer.runs == 4);  // a warm-up and one timed run each (runs over 20 ms)
  CHECK(decide(timer, 1500, 700, 200) == GemmKernel::openblas_f32);  // the same class
  CHECK(timer.runs == 4);
  const std::string file = ag::detail::tuning_file();
  REQUIRE(file.rfind(dir.file("cache") + "/attograd/gemm-", 0) == 0);
  CHECK(read_all(file).find("f32 NT 11 10 8 openblas_f32") != std::string::npos);
  env.set_mode(nullptr);  // another process: the file answers
  FakeTimer other{{{GemmKernel::onednn_f32, 0.1}, {GemmKernel::openblas_f32, 0.9}}};
  CHECK(decide(other) == GemmKernel::openblas_f32);
  CHECK(other.runs == 0);
  CHECK(ag::detail::tuning_file_state() == file + ": used");
}

TEST_CASE("a candidate replaces the rule only when it is 3 percent faster") {
  TempDir dir;
  TuningEnvironment env(dir.file("cache"));
  FakeTimer close{{{GemmKernel::onednn_f32, 0.100}, {GemmKernel::openblas_f32, 0.098}}};
  CHECK(decide(close) == GemmKernel::onednn_f32);
  FakeTimer faster{{{GemmKernel::onednn_f32, 0.100}, {GemmKernel::openblas_f32, 0.090}}};
  CHECK(decide(faster, 64, 64, 64) == GemmKernel::openblas_f32);
  FakeTimer quick{{{GemmKernel::onednn_f32, 0.001}, {GemmKernel::openblas_f32, 0.002}}};
  CHECK(decide(quick, 32, 32, 32) == GemmKernel::onednn_f32);
  CHECK(quick.runs == 8);  // short runs: a warm-up and the best of three each
}

TEST_CASE("ATTOGRAD_TUNE=off runs the rule without a file and fresh measures again") {
  TempDir dir;
  TuningEnvironment env(dir.file("cache"), "off");
  FakeTimer timer{{{GemmKernel::onednn_f32, 0.5}, {GemmKernel::openblas_f32, 0.2}}};
  CHECK(decide(timer) == GemmKernel::onednn_f32);
  CHECK(timer.runs == 0);
  CHECK_FALSE(std::filesystem::exists(dir.file("cache")));
  env.set_mode("on");
  CHECK(decide(timer) == GemmKernel::openblas_f32);
  env.set_mode("fresh");
  FakeTimer reversed{{{GemmKernel::onednn_f32, 0.2}, {GemmKernel::openblas_f32, 0.5}}};
  CHECK(decide(reversed) == GemmKernel::onednn_f32);
  CHECK(reversed.runs == 4);
  const std::string text = read_all(ag::detail::tuning_file());
  CHECK(text.find("onednn_f32 onednn_f32=") != std::string::npos);
  CHECK(text.find("openblas_f32 onednn_f32=") == std::string::npos);  // the old answer is gone
  env.set_mode("sometimes");
  CHECK_THROWS_WITH(ag::detail::tune_mode(), Catch::Contains("ATTOGRAD_TUNE must be on, off or "
                                                             "fresh, got 'sometimes'"));
}

TEST_CASE("a cache file that is not ours is ignored, never followed or rewritten") {
  TempDir dir;
  TuningEnvironment env(dir.file("cache"));
  const std::string file = ag::detail::tuning_file();
  std::filesystem::create_directories(std::filesystem::path(file).parent_path());
  FakeTimer timer{{{GemmKernel::onednn_f32, 0.5}, {GemmKernel::openblas_f32, 0.2}}};
  SECTION("a symbolic link") {
    const std::string target = dir.write("elsewhere.txt", "keep me\n");
    std::filesystem::create_symlink(target, file);
    CHECK(decide(timer) == GemmKernel::openblas_f32);  // measured, kept in the process only
    CHECK(read_all(target) == "keep me\n");
    CHECK(ag::detail::tuning_file_state().find("ignored") != std::string::npos);
  }
  SECTION("a hard link to another file, even under ATTOGRAD_TUNE=fresh") {
    const std::string target = dir.write("elsewhere.txt", "keep me\n");
    const std::string empty = dir.write("empty.txt", "");
    std::filesystem::create_hard_link(empty, file);
    CHECK(decide(timer) == GemmKernel::openblas_f32);  // measured, kept in the process only
    CHECK(read_all(empty).empty());
    std::filesystem::remove(file);
    std::filesystem::create_hard_link(target, file);
    env.set_mode("fresh");
    CHECK(decide(timer) == GemmKernel::openblas_f32);
    CHECK(read_all(target) == "keep me\n");
    CHECK(ag::detail::tuning_file_state().find("with one name") != std::string::npos);
  }
  SECTION("a file that is not a table is not rewritten under ATTOGRAD_TUNE=fresh") {
    dir.write(std::filesystem::relative(file, dir.path).string(), "keep me\n");
    env.set_mode("fresh");
    CHECK(decide(timer) == GemmKernel::openblas_f32);
    CHECK(read_all(file) == "keep me\n");
  }
  SECTION("another CPU's table") {
    const std::string foreign =
        "attograd-gemm-kernels 5\nsignature another CPU\n"
        "f32 NT 11 10 8 onednn_f32\n";
    dir.write(std::filesystem::relative(file, dir.path).string(), foreign);
    CHECK(decide(timer) == GemmKernel::openblas_f32);
    CHECK(timer.runs == 4);
    CHECK(read_all(file) == foreign);
  }
  SECTION("over 1 MiB") {
    dir.write(std::filesystem::relative(file, dir.path).string(), std::string(1 << 21, 'x'));
    CHECK(decide(timer) == GemmKernel::openblas_f32);
    CHECK(std::filesystem::file_size(file) == (1u << 21));
  }
  SECTION("lines that do not parse are skipped; a torn last line is not read") {
    const std::string head =
        "attograd-gemm-kernels 5\nsignature " + ag::detail::tuning_signature() + "\n";
    dir.write(std::filesystem::relative(file, dir.path).string(),
              head + "f32 NT 99 10 8 onednn_f32\nf32 XX 11 10 8 onednn_f32\n" +
                  "f32 NT 11 10 8 rocket\nf32 NT 11 10 8 onednn_f32 onednn_f32=nan\n" +
                  std::string(500, 'y') + "\nf32 NT 11 10 8 onednn_f32");
    CHECK(decide(timer) == GemmKernel::openblas_f32);  // none of them counted: measured
    CHECK(timer.runs == 4);
    CHECK(read_all(file).find("onednn_f32\nf32 NT 11 10 8 openblas_f32") != std::string::npos);
  }
}

TEST_CASE("ranks adopt rank 0's table and measure nothing after it") {
  TempDir dir;
  TuningEnvironment env(dir.file("cache"));
  FakeTimer timer{{{GemmKernel::onednn_f32, 0.5}, {GemmKernel::openblas_f32, 0.2}}};
  decide(timer);
  const std::string text = ag::detail::tuned_entries_text();
  env.set_mode(nullptr);
  ag::detail::adopt_tuned_entries(text);
  FakeTimer never{{{GemmKernel::onednn_f32, 0.5}, {GemmKernel::openblas_f32, 0.2}}};
  CHECK(decide(never) == GemmKernel::openblas_f32);            // rank 0's answer
  CHECK(decide(never, 64, 64, 64) == GemmKernel::onednn_f32);  // unknown: the rule
  CHECK(never.runs == 0);
}

TEST_CASE("the measured kernels give the same bits on one thread and on two") {
  TempDir dir;
  TuningEnvironment env(dir.file("cache"));
  ag::Generator gen(3);
  const ag::Tensor a = ag::randn({384, 320}, gen), b = ag::randn({320, 448}, gen);
  const int threads = ag::num_threads();
  for (ag::Precision precision : {ag::Precision::fp32, ag::Precision::bf16}) {
    std::vector<std::vector<double>> results;
    for (int n : {1, 2, 1}) {
      ag::set_num_threads(n);
      const ag::AutocastScope autocast(precision);
      results.push_back(ag::matmul(a, b).to_vector());
    }
    CHECK(results[0] == results[1]);
    CHECK(results[0] == results[2]);
  }
  ag::set_num_threads(threads);
  CHECK(ag::detail::tuned_entries().size() >= 2);  // f32 and bf16 were both measured
}

TEST_CASE("the bf16 attention's kernels are measured per class and kept like a GEMM's") {
  const bool units = ag::attention_bf16_units_available(),
             onednn = ag::attention_onednn_available();
  if (!units && !onednn) {
    WARN("skipped: neither AVX-512 BF16 nor oneDNN's bfloat16 kernels here: no choice to make");
    return;
  }
  TempDir dir;
  TuningEnvironment env(dir.file("cache"));
  ag::Generator gen(5);
  const ag::Tensor qkv = ag::randn({2, 70, 3 * 64}, gen);
  auto attend = [&] {
    const ag::AutocastScope autocast(ag::Precision::bf16);
    return ag::causal_self_attention(qkv, 2, 0.0, nullptr).to_vector();
  };
  const auto first = attend();
  const auto entries = ag::detail::tuned_entries();
  REQUIRE(entries.size() == 1);
  const auto& e = entries[0];
  CHECK(ag::detail::describe(e.cls) == "bf16 attention causal 128x128 d32");
  CHECK(e.gflops.size() == 1 + units + onednn);  // every candidate this CPU has timed
  CHECK((e.kernel == GemmKernel::attention_fma ||
         (units && e.kernel == GemmKernel::attention_bf16) ||
         (onednn && e.kernel == GemmKernel::attention_onednn)));
  const std::string line = std::string("bf16 AC 7 7 5 ") + ag::detail::kernel_name(e.kernel);
  CHECK(read_all(ag::detail::tuning_file()).find(line) != std::string::npos);
  // another process reads the answer and gives the same bits; ranks adopt it
  const std::string text = ag::detail::tuned_entries_text();
  env.set_mode(nullptr);
  CHECK(attend() == first);
  env.set_mode(nullptr);
  ag::detail::adopt_tuned_entries(text);
  CHECK(attend() == first);
  CHECK(ag::detail::tuned_entries().size() == 1);
  // the answer decides: the other kernels' sums differ in their last bits
  using Kernel = ag::AttentionKernelForTests;
  ag::force_attention_kernel_for_tests(e.kernel != GemmKernel::attention_fma ? Kernel::fma
                                       : units                               ? Kernel::units
                                                                             : Kernel::onednn);
  const auto other = attend();
  ag::force_attention_kernel_for_tests(ag::AttentionKernelForTests::chosen);
  CHECK(other != first);
}

TEST_CASE(
    "an odd head size is a class of its own, and a kept kernel the shapes cannot take "
    "is never run") {
  TempDir dir;
  TuningEnvironment env(dir.file("cache"));
  using ag::detail::attention_class;
  // head sizes 14 and 9 round to the same d16, but only 14 is even
  const auto even = attention_class(true, 64, 64, 14, false),
             odd = attention_class(true, 64, 64, 9, true);
  CHECK_FALSE(even == odd);
  CHECK(ag::detail::describe(odd) == "bf16 attention causal 64x64 d16 odd");
  // a table (from a run of head size 14, or from elsewhere) that names the BF16 units'
  // kernel for the odd class too
  ag::detail::adopt_tuned_entries(
      "bf16 AC 6 6 4 attention_bf16 attention_bf16=90.0\n"
      "bf16 ACO 6 6 4 attention_bf16 attention_bf16=90.0\n");
  REQUIRE(ag::detail::tuned_entries().size() == 2);
  CHECK(ag::detail::describe(ag::detail::tuned_entries()[1].cls) ==
        "bf16 attention causal 64x64 d16 odd");
  constexpr GemmKernel kEven[] = {GemmKernel::attention_fma, GemmKernel::attention_bf16};
  constexpr GemmKernel kOdd[] = {GemmKernel::attention_fma};  // what odd sizes can take
  const auto never = [](GemmKernel) -> double {
    FAIL("measured");
    return 0;
  };
  CHECK(ag::detail::tuned_kernel(even, kEven, GemmKernel::attention_fma, 1, never) ==
        GemmKernel::attention_bf16);
  CHECK(ag::detail::tuned_kernel(odd, kOdd, GemmKernel::attention_fma, 1, never) ==
        GemmKernel::attention_fma);
  // a file of the version before (whose attention classes did not say) is never read
  env.set_mode(nullptr);
  const std::string file = ag::detail::tuning_file();
  dir.write(std::filesystem::relative(file, dir.path).string(),
            "attograd-gemm-kernels 2\nsignature " + ag::detail::tuning_signature() +
                "\nbf16 AC 6 6 4 attention_bf16\n");
  FakeTimer timer{{{GemmKernel::attention_fma, 0.1}}};
  CHECK(ag::detail::tuned_kernel(odd, kOdd, GemmKernel::attention_fma, 1, [&](GemmKernel k) {
          return timer(k);
        }) == GemmKernel::attention_fma);
  CHECK(timer.runs > 0);
}

TEST_CASE(
    "a cache file another process keeps locked is waited for a bounded time, then left "
    "alone") {
  TempDir dir;
  TuningEnvironment env(dir.file("cache"));
  FakeTimer timer{{{GemmKernel::onednn_f32, 0.5}, {GemmKernel::openblas_f32, 0.2}}};
  CHECK(decide(timer) == GemmKernel::openblas_f32);  // makes the file
  const std::string file = ag::detail::tuning_file();
  env.set_mode(nullptr);
  // another open of the file holds its lock, as a stopped attograd would
  const int holder = ::open(file.c_str(), O_RDWR);
  REQUIRE(holder >= 0);
  REQUIRE(::flock(holder, LOCK_EX) == 0);
  ag::detail::set_tuning_lock_wait(0.3);
  const auto start = std::chrono::steady_clock::now();
  CHECK(decide(timer, 64, 64, 64) == GemmKernel::openblas_f32);  // measured, not recorded
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  const std::string state = ag::detail::tuning_file_state();
  CHECK_THAT(state, Catch::Matchers::Contains("locked by process " + std::to_string(::getpid())));
  ag::detail::set_tuning_lock_wait(10);
  ::close(holder);
  CHECK(read_all(file).find(" 6 6 6 ") == std::string::npos);
}

TEST_CASE("a missing home is never made for the cache file") {
  TempDir dir;
  TuningEnvironment env(dir.file("cache"));
  const std::string home = dir.file("no/such/home");
  const char* saved_home = std::getenv("HOME");
  const std::string old_home = saved_home ? saved_home : "";
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", home.c_str(), 1);
  env.set_mode(nullptr);
  FakeTimer timer{{{GemmKernel::onednn_f32, 0.5}, {GemmKernel::openblas_f32, 0.2}}};
  CHECK(decide(timer) == GemmKernel::openblas_f32);  // measured, kept in the process
  CHECK_FALSE(std::filesystem::exists(dir.file("no")));
  CHECK_THAT(ag::detail::tuning_file_state(), Catch::Matchers::Contains("cannot be made"));
  if (saved_home)
    ::setenv("HOME", old_home.c_str(), 1);
  else
    ::unsetenv("HOME");
}
