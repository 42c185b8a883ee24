#include "train/run_checks.h"

#include <fmt/format.h>

#include <algorithm>

#include "autograd/test_hooks.h"  // set_nan_injection, for --inject-nan
#include "base/posix_file.h"
#include "base/utf8.h"
#include "train/memory_plan.h"
#include "train/model_loading.h"
#include "train/run_data.h"

namespace train {

void check_resumable(const io::Checkpoint* resumed) {
  if (!resumed) return;
  refuse_gradient_dump(*resumed);
  if (!resumed->optimizer || resumed->rng.empty())
    throw std::runtime_error(
        fmt::format("{} holds weights only (no optimizer or RNG state): resume needs a training "
                    "checkpoint; start a new run from its weights with 'train --init-from {}'",
                    resumed->source, resumed->source));
  for (const auto& [key, value] : resumed->optimizer->scalars)
    if (key == "step" && value != static_cast<double>(resumed->step))
      throw io::CheckpointError(
          fmt::format("'{}': the optimizer's step count ({}) disagrees with the checkpoint's "
                      "step ({}); a run updates once a step",
                      resumed->source, value, resumed->step));
}

void check_data_fits(const RunConfig& cfg) {
  const int64_t needed = data_bytes_of(cfg);
  const int64_t available = available_memory();
  if (available > 0 && needed > available)
    throw std::runtime_error(fmt::format(
        "reading '{}' needs about {} (the text and its token ids) but only {} of memory is "
        "available; prepare it once with 'attograd prepare', whose folders train in a few MB",
        base::printable(cfg.data), format_bytes(needed), format_bytes(available)));
}

void check_same_data(const io::Checkpoint& resumed, const std::string& identity,
                     const RunConfig& cfg) {
  if (resumed.data_identity.empty() || resumed.data_identity == identity) return;
  throw std::runtime_error(fmt::format(
      "{} is not the text this run trained on ({} has data_identity {}, the text has {}); resume "
      "needs the same data (to train on new text, start from these weights with 'train "
      "--init-from {}')",
      cfg.data.empty() ? "the built-in corpus" : "'" + base::printable(cfg.data) + "'",
      resumed.source, base::printable(resumed.data_identity), identity, resumed.source));
}

std::pair<std::string, int64_t> parse_nan_injection(const std::string& option,
                                                    const nn::GPT& model) {
  if (option.empty()) return {"", -1};
  std::string spec = option;
  int64_t at = 1;
  if (const auto pos = spec.find('@'); pos != std::string::npos) {
    try {
      at = std::stoll(spec.substr(pos + 1));
    } catch (const std::exception&) {
      throw std::invalid_argument(fmt::format(
          "--inject-nan '{}': the step after '@' is not a number", base::printable(option)));
    }
    spec.resize(pos);
  }
  ag::set_nan_injection(spec);  // validates the phase
  ag::set_nan_injection("");
  const std::string module = spec.substr(spec.find(':') + 1);
  const auto paths = model.module_paths();
  if (std::find(paths.begin(), paths.end(), module) == paths.end())
    throw std::invalid_argument(
        fmt::format("--inject-nan: this model has no module '{}' (modules are named like {}, {})",
                    base::printable(module), "blocks.0.attn.qkv", "blocks.0.mlp.fc2"));
  return {spec, at};
}

std::string default_run_name(const std::string& out) {
  std::string name = base::base_name(out);
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos && dot > 0) name.resize(dot);
  return name.empty() ? out : name;
}

}  // namespace train
