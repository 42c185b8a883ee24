#include "bench/memory_bench.h"

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "autograd/dtype.h"
#include "io/checkpoint.h"
#include "train/memory_plan.h"

namespace bench {

namespace {

// Lowers VmHWM to the RSS now (Linux 4.0's "5" to clear_refs), so that it then gives the
// peak of what follows alone.
void reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  if (!clear) throw std::runtime_error("cannot reset the peak RSS (/proc/self/clear_refs)");
}

double tensor_mb(const nn::StateDict& tensors) {
  double bytes = 0;
  for (const auto& [name, t] : tensors)
    bytes += static_cast<double>(t.numel()) * static_cast<double>(ag::dtype_size(t.dtype()));
  return bytes / (1024.0 * 1024.0);
}

}  // namespace

nlohmann::json step_budget(const train::RunConfig& of, int64_t batch, int64_t tokens,
                           int64_t parameters, int64_t trainable, ag::Precision precision) {
  train::RunConfig run = of;
  run.precision = precision;
  run.model.context_length = tokens;  // the activations of the sequences as run (gpt2: 64)
  run.batch_size = batch;
  const train::MemoryPlan plan = train::plan_memory(run, parameters, 0, 1, trainable);
  const double mb = 1024.0 * 1024.0;
  nlohmann::json terms = nlohmann::json::object();
  for (const auto& [name, bytes] : plan.activation_terms)
    terms[name] = static_cast<double>(bytes) / mb;
  return {{"plan_state_mb", static_cast<double>(plan.parameters + plan.gradients + plan.optimizer +
                                                plan.weight_copies) /
                                mb},
          {"plan_activations_mb", static_cast<double>(plan.activations) / mb},
          {"plan_activation_terms", terms},
          {"plan_base_scratch_mb", static_cast<double>(plan.base_scratch) / mb},
          {"plan_tensor_bytes", plan.tensor_bytes()}};
}

nlohmann::json measure_save(const std::string& path, nn::GPT& model, const optim::Optimizer& opt,
                            const nlohmann::json& config) {
  io::Checkpoint c;
  c.config = config;
  c.step = opt.steps();
  c.model = model.named_parameters();
  c.optimizer = opt.state();
  c.tokenizer.type = "byte";
  c.rng = {{"dropout", model.dropout_generator().state()}};
  const double state_mb = tensor_mb(c.model) + tensor_mb(c.optimizer->tensors);
  const double peak_before = train::process_memory_mb("VmHWM"),
               rss_before = train::process_memory_mb("VmRSS");
  reset_peak_rss();
  const auto start = std::chrono::steady_clock::now();
  io::save_checkpoint(path, c);
  const double save_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const double save_peak = train::process_memory_mb("VmHWM");
  return {{"save_ms", save_ms},
          {"rss_before_save_mb", rss_before},
          {"peak_rss_before_save_mb", peak_before},
          {"save_peak_rss_mb", save_peak},
          {"save_added_mb", save_peak - rss_before},
          {"state_mb", state_mb},
          {"save_added_of_state", (save_peak - rss_before) / state_mb}};
}

void print_save(const nlohmann::json& save, const std::string& path, bool json) {
  if (json) {
    nlohmann::json row{{"impl", "attograd"}, {"measure", "save"}, {"path", path}};
    row.update(save);
    std::cout << row.dump() << std::endl;
    return;
  }
  fmt::print(
      "checkpoint save to {}: {:.0f} ms; RSS {:.1f} MB at its start (the steps' peak {:.1f} MB), "
      "{:.1f} MB at its peak: +{:.1f} MB = {:.1f}% of the {:.1f} MB of state written\n",
      path, save["save_ms"].get<double>(), save["rss_before_save_mb"].get<double>(),
      save["peak_rss_before_save_mb"].get<double>(), save["save_peak_rss_mb"].get<double>(),
      save["save_added_mb"].get<double>(), 100 * save["save_added_of_state"].get<double>(),
      save["state_mb"].get<double>());
}

}  // namespace bench
