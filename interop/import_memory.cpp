#include "interop/import_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "interop/model_files.h"
#include "train/memory_plan.h"

namespace interop {

namespace {

int64_t saturated(double bytes) {
  return bytes < 9e18 ? static_cast<int64_t>(bytes) : INT64_MAX;
}

std::string figures(const ImportPlan& p) {
  return fmt::format(
      "the weights as float32 {} + their tensors' records {} + one tensor converted {} + the "
      "tokenizer {} + readers and save {}",
      train::format_bytes(p.weights), train::format_bytes(p.tensors),
      train::format_bytes(p.transient), train::format_bytes(p.tokenizer),
      train::format_bytes(p.overhead));
}

}  // namespace

int64_t ImportPlan::total() const {
  return saturated(static_cast<double>(weights) + static_cast<double>(tensors) +
                   static_cast<double>(transient) + static_cast<double>(tokenizer) +
                   static_cast<double>(overhead));
}

ImportPlan plan_import(const nn::GPTConfig& config, int64_t tokenizer_bytes) {
  ImportPlan p;
  p.tokenizer = tokenizer_bytes;
  p.weights = saturated(4.0 * static_cast<double>(config.num_parameters()));
  p.tensors = saturated(static_cast<double>(kImportBytesPerTensor) *
                        static_cast<double>(config.parameter_shapes().size()));
  // a projection kept in another layout (Hugging Face's Conv1D, c_attn's three side by side)
  // is read whole, then cut into its parameters; embeddings go straight into theirs
  const double d = static_cast<double>(config.d_model);
  p.transient = saturated(4.0 * d * std::max(3.0 * d, static_cast<double>(config.ff_width())));
  return p;
}

void check_import_memory(const ImportPlan& plan, const std::string& source) {
  const int64_t need = plan.total();
  const std::string short_of = train::memory_shortfall(need, 1, "import a smaller model");
  if (!short_of.empty())
    throw InteropError(fmt::format("{}: importing it needs about {} ({}): {}", source,
                                   train::format_bytes(need), figures(plan), short_of));
}

void check_import_memory(const nn::GPTConfig& config, const std::string& source,
                         int64_t tokenizer_bytes) {
  check_import_memory(plan_import(config, tokenizer_bytes), source);
}

}  // namespace interop
