#include "bench/tune_table.h"

#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "autograd/ops/gemm_tuning.h"

namespace bench {

namespace {

std::string gflops_cell(const ag::detail::TunedEntry& e, ag::detail::GemmKernel k) {
  for (const auto& [candidate, gflops] : e.gflops)
    if (candidate == k) return fmt::format("{:.0f}", gflops);
  return "-";
}

// Where a bf16 class runs: "bf16", or "f32" where bfloat16 does not pay (gemm_tuning.h)
const char* runs_in(const ag::detail::TunedEntry& e) {
  return e.cls.bf16 && ag::detail::bf16_class_pays(e.cls) ? "bf16" : "f32";
}

// The fused attention's products: GFLOP/s of one row's forward and backward, each bf16
// class beside its f32 twin (the same row in float32)
void print_attention_rows(const std::vector<ag::detail::TunedEntry>& entries) {
  using ag::detail::GemmKernel;
  bool header = false;
  for (const auto& e : entries) {
    if (!e.cls.attention || !e.cls.bf16) continue;
    if (!header)
      fmt::print(
          "\nThe fused attention's products, GFLOP/s of one row's forward and backward on one "
          "thread (attention_f32: in float32)\n{:<36} {:>16} {:>16} {:>16} {:>16}  kept\n",
          "class", "attention_fma", "attention_bf16", "attention_onednn", "attention_f32"),
          header = true;
    std::string f32 = "-";
    for (const auto& twin : entries)
      if (twin.cls.attention && !twin.cls.bf16 && twin.cls.ta == e.cls.ta &&
          twin.cls.log_m == e.cls.log_m && twin.cls.log_n == e.cls.log_n &&
          twin.cls.log_k == e.cls.log_k)
        f32 = gflops_cell(twin, GemmKernel::attention_f32);
    fmt::print("{:<36} {:>16} {:>16} {:>16} {:>16}  {}{}\n", ag::detail::describe(e.cls),
               gflops_cell(e, GemmKernel::attention_fma),
               gflops_cell(e, GemmKernel::attention_bf16),
               gflops_cell(e, GemmKernel::attention_onednn), f32, ag::detail::kernel_name(e.kernel),
               runs_in(e) == std::string("f32") ? " (bf16 does not pay: runs in float32)" : "");
  }
}

}  // namespace

void print_tune_table(bool json) {
  using ag::detail::GemmKernel;
  const auto entries = ag::detail::tuned_entries();
  if (json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& e : entries) {
      nlohmann::json gflops = nlohmann::json::object();
      for (const auto& [k, g] : e.gflops) gflops[ag::detail::kernel_name(k)] = g;
      rows.push_back({{"class", ag::detail::describe(e.cls)},
                      {"kernel", ag::detail::kernel_name(e.kernel)},
                      {"gflops", gflops},
                      {"runs_in", runs_in(e)}});
    }
    std::cout << nlohmann::json{{"signature", ag::detail::tuning_signature()},
                                {"file", ag::detail::tuning_file()},
                                {"file_state", ag::detail::tuning_file_state()},
                                {"classes", rows}}
                     .dump()
              << "\n";
    return;
  }
  fmt::print("CPU signature: {}\ncache: {}\n\n", ag::detail::tuning_signature(),
             ag::detail::tuning_file_state());
  fmt::print(
      "GFLOP/s on one output block, one thread (M, N, K rounded up to powers of two; "
      "T: the operand is read transposed)\n");
  const GemmKernel columns[] = {GemmKernel::openblas_f32, GemmKernel::onednn_f32,
                                GemmKernel::onednn_bf16, GemmKernel::widened_openblas,
                                GemmKernel::widened_onednn};
  fmt::print("{:<24}", "class");
  for (GemmKernel k : columns) fmt::print(" {:>16}", ag::detail::kernel_name(k));
  fmt::print("  kept\n");
  for (const auto& e : entries) {
    if (e.cls.attention) continue;
    fmt::print("{:<24}", ag::detail::describe(e.cls));
    for (GemmKernel k : columns) fmt::print(" {:>16}", gflops_cell(e, k));
    const bool falls_back = e.cls.bf16 && runs_in(e) == std::string("f32");
    fmt::print("  {}{}\n", ag::detail::kernel_name(e.kernel),
               falls_back ? " (bf16 does not pay: runs in float32)" : "");
  }
  print_attention_rows(entries);
  if (entries.empty()) fmt::print("(no class decided: ATTOGRAD_TUNE=off?)\n");
}

}  // namespace bench
