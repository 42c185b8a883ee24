#include "bench/tune_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
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

// Whether a class runs in float32: an f32 class, or a bf16 one where bfloat16 does not pay
// (gemm_tuning.h)
bool runs_in_f32(const ag::detail::TunedEntry& e) {
  return !e.cls.bf16 || !ag::detail::bf16_class_pays(e.cls);
}

constexpr char kFallsBack[] = " (bf16 does not pay: runs in float32)";

// The fused attention's products: GFLOP/s of the sampled rows' forward and backward, each bf16
// class beside its f32 twin (the same row in float32)
void print_attention_rows(const std::vector<ag::detail::TunedEntry>& entries) {
  using ag::detail::GemmKernel;
  bool header = false;
  for (const auto& e : entries) {
    if (!e.cls.attention || !e.cls.bf16) continue;
    if (!header)
      fmt::print(
          "\nThe fused attention's products, GFLOP/s of the sampled rows' forward and backward on "
          "one "
          "thread (attention_f32: in float32)\n{:<36} {:>16} {:>16} {:>16} {:>16}  kept\n",
          "class", "attention_fma", "attention_bf16", "attention_onednn", "attention_f32"),
          header = true;
    ag::detail::GemmClass in_f32 = e.cls;
    in_f32.bf16 = false;
    std::string f32 = "-";
    for (const auto& twin : entries)
      if (twin.cls == in_f32) f32 = gflops_cell(twin, GemmKernel::attention_f32);
    fmt::print("{:<36} {:>16} {:>16} {:>16} {:>16}  {}{}\n", ag::detail::describe(e.cls),
               gflops_cell(e, GemmKernel::attention_fma),
               gflops_cell(e, GemmKernel::attention_bf16),
               gflops_cell(e, GemmKernel::attention_onednn), f32, ag::detail::kernel_name(e.kernel),
               runs_in_f32(e) ? kFallsBack : "");
  }
}

// The GEMM classes of one precision, a column for each of its candidates
void print_gemm_rows(const std::vector<ag::detail::TunedEntry>& entries, bool bf16) {
  using G = ag::detail::GemmKernel;
  const std::vector<G> columns =
      bf16 ? std::vector<G>{G::onednn_bf16,        G::onednn_bf16_large,
                            G::onednn_bf16_packed, G::onednn_bf16_large_packed,
                            G::widened_openblas,   G::widened_onednn}
           : std::vector<G>{G::openblas_f32, G::onednn_f32, G::onednn_f32_large,
                            G::onednn_f32_packed, G::onednn_f32_large_packed};
  const auto width = [](G k) {
    return std::max<size_t>(16, std::strlen(ag::detail::kernel_name(k)));
  };
  bool header = false;
  for (const auto& e : entries) {
    if (e.cls.attention || e.cls.bf16 != bf16) continue;
    if (!header) {
      fmt::print("\n{:<24}", "class");
      for (G k : columns) fmt::print(" {:>{}}", ag::detail::kernel_name(k), width(k));
      fmt::print("  kept\n");
      header = true;
    }
    fmt::print("{:<24}", ag::detail::describe(e.cls));
    for (G k : columns) fmt::print(" {:>{}}", gflops_cell(e, k), width(k));
    fmt::print("  {}{}\n", ag::detail::kernel_name(e.kernel),
               e.cls.bf16 && runs_in_f32(e) ? kFallsBack : "");
  }
}

}  // namespace

void print_tune_table(bool json) {
  const auto entries = ag::detail::tuned_entries();
  if (json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& e : entries) {
      nlohmann::json gflops = nlohmann::json::object();
      for (const auto& [k, g] : e.gflops) gflops[ag::detail::kernel_name(k)] = g;
      rows.push_back({{"class", ag::detail::describe(e.cls)},
                      {"kernel", ag::detail::kernel_name(e.kernel)},
                      {"gflops", gflops},
                      {"runs_in", runs_in_f32(e) ? "f32" : "bf16"}});
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
      "T: the operand is read transposed; oneDNN's _large blocks and _packed B: gemm.h's "
      "OneDnnLayout; - where a layout cuts the GEMM as another does)\n");
  print_gemm_rows(entries, false);
  print_gemm_rows(entries, true);
  print_attention_rows(entries);
  if (entries.empty()) fmt::print("(no class decided: ATTOGRAD_TUNE=off?)\n");
}

}  // namespace bench
