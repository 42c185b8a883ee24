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

// The fused attention's bf16 products: GFLOP/s of one row's forward and backward
void print_attention_rows(const std::vector<ag::detail::TunedEntry>& entries) {
  using ag::detail::GemmKernel;
  bool header = false;
  for (const auto& e : entries) {
    if (!e.cls.attention) continue;
    if (!header)
      fmt::print(
          "\nThe fused attention's bf16 products, GFLOP/s of one row's forward and "
          "backward on one thread\n{:<36} {:>16} {:>16} {:>16}  kept\n",
          "class", "attention_fma", "attention_bf16", "attention_onednn"),
          header = true;
    fmt::print("{:<36} {:>16} {:>16} {:>16}  {}\n", ag::detail::describe(e.cls),
               gflops_cell(e, GemmKernel::attention_fma),
               gflops_cell(e, GemmKernel::attention_bf16),
               gflops_cell(e, GemmKernel::attention_onednn), ag::detail::kernel_name(e.kernel));
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
                      {"gflops", gflops}});
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
    fmt::print("  {}\n", ag::detail::kernel_name(e.kernel));
  }
  print_attention_rows(entries);
  if (entries.empty()) fmt::print("(no class decided: ATTOGRAD_TUNE=off?)\n");
}

}  // namespace bench
