#include "train/gemm_agreement.h"

#include <cstdlib>
#include <string>

#include "autograd/ops/gemm_tuning.h"

namespace train {

void agree_gemm_kernels(const World& world) {
  if (world.root()) ag::detail::load_tuning_file();
  // rank 0's ATTOGRAD_BF16_FALLBACK first: where bf16 falls back to float32 is agreed too
  const std::string text = world.broadcast((ag::detail::bf16_fallback_enabled() ? "1" : "0") +
                                           ag::detail::tuned_entries_text());
  ag::detail::set_bf16_fallback(text.front() == '1');
  ag::detail::adopt_tuned_entries(text.substr(1));
}

std::vector<std::pair<std::string, std::string>> kernel_environment() {
  std::vector<std::pair<std::string, std::string>> settings;
  for (const char* name :
       {"ATTOGRAD_TUNE", "ATTOGRAD_F32_GEMM", "ATTOGRAD_BF16_GEMM", "ATTOGRAD_ATTENTION_BF16",
        "ATTOGRAD_KEEP_BLAS_KERNEL", "ONEDNN_MAX_CPU_ISA"}) {
    const char* value = std::getenv(name);
    settings.emplace_back(name, value == nullptr ? "(unset)" : value);
  }
  return settings;
}

void end_setup(World& world) {
  world.setup_done();
  agree_gemm_kernels(world);
}

}  // namespace train
