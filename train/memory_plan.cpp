#include "train/memory_plan.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "data/tokenizer.h"
#include "io/files.h"
#include "train/freezing.h"
#include "train/grad_accumulation.h"

namespace train {

namespace {

constexpr double kSaturate = 9e18;

int64_t saturated(double b) {
  return b < kSaturate ? static_cast<int64_t>(b) : static_cast<int64_t>(kSaturate);
}

// A small system file (/proc, /sys), "" when it cannot be read.
std::string system_file(const std::filesystem::path& file) {
  try {
    return base::read_input_file(file.string(), "file", int64_t{1} << 20);
  } catch (const std::exception&) {
    return "";
  }
}

int64_t mem_available_kb_field() {
  std::istringstream in(system_file("/proc/meminfo"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string key;
    int64_t kb = 0;
    if (ss >> key >> kb && key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

// The first number in a file, -1 when it is absent, unreadable or "max".
int64_t read_number(const std::filesystem::path& file) {
  std::istringstream in(system_file(file));
  int64_t v = -1;
  if (!(in >> v)) return -1;
  return v;
}

// A counter of a memory.stat file ("inactive_file 1234"), 0 when absent.
int64_t stat_field(const std::filesystem::path& file, const std::string& key) {
  std::istringstream in(system_file(file));
  std::string k;
  int64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

// What one cgroup folder still allows, -1 when it sets no limit.
int64_t folder_headroom(const std::filesystem::path& dir, bool v2) {
  const int64_t limit = read_number(dir / (v2 ? "memory.max" : "memory.limit_in_bytes"));
  if (limit < 0 || limit >= (int64_t{1} << 60)) return -1;  // "max", or v1's "unlimited"
  const int64_t usage = read_number(dir / (v2 ? "memory.current" : "memory.usage_in_bytes"));
  const int64_t cache =
      stat_field(dir / "memory.stat", v2 ? "inactive_file" : "total_inactive_file");
  return std::max<int64_t>(0, limit - std::max<int64_t>(0, usage - cache));
}

// The smallest headroom of a cgroup folder and its parents up to the mount root. In a
// container the mount root is often the cgroup itself, so the root is tried too.
int64_t chain_headroom(const std::filesystem::path& mount, const std::string& group, bool v2) {
  int64_t best = -1;
  auto take = [&](int64_t h) {
    if (h >= 0) best = best < 0 ? h : std::min(best, h);
  };
  std::filesystem::path rel = std::filesystem::path(group).relative_path();
  for (;; rel = rel.parent_path()) {
    take(folder_headroom(mount / rel, v2));
    if (rel.empty()) break;
  }
  return best;
}

}  // namespace

int64_t cgroup_memory_available(const std::string& proc_self_cgroup, const std::string& root) {
  std::istringstream lines(proc_self_cgroup);
  std::string line;
  int64_t best = -1;
  while (std::getline(lines, line)) {
    // "0::/path" (v2, unified) or "4:memory:/path" (v1)
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string group = line.substr(second + 1);
    int64_t h = -1;
    if (line.compare(0, first, "0") == 0 && controllers.empty())
      h = chain_headroom(root, group, true);
    else if (("," + controllers + ",").find(",memory,") != std::string::npos)
      h = chain_headroom(std::filesystem::path(root) / "memory", group, false);
    if (h >= 0) best = best < 0 ? h : std::min(best, h);
  }
  return best;
}

namespace {

int64_t mapped_bytes_now() {
  std::istringstream in(system_file("/proc/self/status"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string key;
    int64_t kb = 0;
    if (ss >> key >> kb && key == "VmSize:") return kb * 1024;
  }
  return 0;
}

}  // namespace

std::string memory_shortfall(int64_t bytes, int threads, const std::string& remedy) {
  const int64_t available = available_memory();
  if (available > 0 && bytes > available)
    return fmt::format("only {} of memory is available; {}", format_bytes(available), remedy);
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return "";
  const double cap = static_cast<double>(limit.rlim_cur);
  const double mapped = static_cast<double>(mapped_bytes_now());
  const double needed = static_cast<double>(bytes) +
                        static_cast<double>(kAddressSpacePerThread) * std::max(threads, 1);
  if (mapped + needed <= cap) return "";
  return fmt::format(
      "the address-space limit (ulimit -v) of {} leaves {}, but with {} a thread that OpenBLAS "
      "and the allocator map it takes {}; raise the limit, or {}",
      format_bytes(static_cast<int64_t>(cap)),
      format_bytes(static_cast<int64_t>(std::max(cap - mapped, 0.0))),
      format_bytes(kAddressSpacePerThread), format_bytes(static_cast<int64_t>(needed)), remedy);
}

int64_t available_memory() {
  int64_t available = mem_available_kb_field();
  const int64_t cgroup =
      cgroup_memory_available(system_file("/proc/self/cgroup"), "/sys/fs/cgroup");
  if (cgroup >= 0) available = available > 0 ? std::min(available, cgroup) : cgroup;
  return available;
}

double process_memory_mb(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) / 1024.0;
  throw std::runtime_error(fmt::format("/proc/self/status has no {} line", key));
}

std::string format_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  return fmt::format("{:.1f} kB", b / 1e3);
}

int64_t text_reading_bytes(int64_t text_bytes, int64_t tokens, int64_t id_bytes,
                           data::TokenizerKind tokenizer) {
  const double per_id =
      static_cast<double>(data::encodes_by_merges(tokenizer) ? kBpeIdBufferBytes : id_bytes);
  return saturated(static_cast<double>(text_bytes) + per_id * static_cast<double>(tokens));
}

int64_t data_bytes_for_text(int64_t text_bytes, data::TokenizerKind tokenizer) {
  return text_reading_bytes(text_bytes, text_bytes, 4, tokenizer);
}

namespace {

// The format a frozen matrix is held in, null where float32: the run's base format (or
// bfloat16 for rows that are not whole blocks); under own, the --init-from file's
// (cfg.file_packed: a GGUF import's Q4_K beside its Q6_K), float32 where the file has floats.
const ag::quant::PackedFormat* held_format(const RunConfig& cfg, const nn::FrozenBase& base,
                                           const std::string& name, const ag::Shape& shape) {
  if (!base.own) return base.packs(name, shape) ? &base.format_for(shape[1]) : nullptr;
  const auto it = cfg.file_packed.find(name);
  if (it == cfg.file_packed.end() || !base.frozen_matrix(name, shape)) return nullptr;
  return ag::quant::packed_format_named(it->second);
}

// A frozen base held packed (nn/frozen_base.h): its matrices at their bytes a weight, no
// bfloat16 copies kept of them, and the scratch the largest (a tile of it at most) is
// unpacked into, float32 or bfloat16 as the GEMMs take it. A run --init-from a file of
// blocks without --base-precision holds them in the file's own format, which take_model_of
// made cfg's base_precision before the plan is made (own: each matrix as the file holds it).
void plan_frozen_base(const RunConfig& cfg, MemoryPlan& p) {
  const nn::FrozenBase base = frozen_base(cfg);
  if (!base.format && !base.own) return;
  double elements = 0, bytes = 0, largest = 0;
  std::set<std::string> formats;
  for (const auto& [name, shape] : cfg.model.parameter_shapes()) {
    const ag::quant::PackedFormat* format = held_format(cfg, base, name, shape);
    if (!format) continue;
    const double n = static_cast<double>(ag::shape_numel(shape));
    elements += n;
    largest = std::max(largest, n);
    bytes += static_cast<double>(shape[0]) *
             static_cast<double>(ag::quant::packed_row_bytes(*format, shape[1]));
    formats.insert(format->name);
  }
  if (formats.empty()) return;
  const bool bf16 = cfg.precision == ag::Precision::bf16;
  p.parameters = saturated(static_cast<double>(p.parameters) - 4 * elements + bytes);
  p.weight_copies = saturated(std::max(0.0, static_cast<double>(p.weight_copies) - 2 * elements));
  p.base_scratch = saturated(std::min(largest, static_cast<double>(ag::quant::kUnpackTileWeights)) *
                             (bf16 ? 2 : 4));
  p.base_title = fmt::format("{} base {}", fmt::join(formats, "+"), format_bytes(saturated(bytes)));
}

}  // namespace

MemoryPlan plan_memory(const RunConfig& cfg, int64_t num_parameters, int64_t data_bytes, int ranks,
                       int64_t trainable, int64_t reading_bytes) {
  // in double: absurd sizes must give an absurd plan, not an overflowed one
  const double tokens =
      static_cast<double>(cfg.batch_size) * static_cast<double>(cfg.model.context_length);
  const nn::Footprint f = model_footprint(cfg.model, cfg.precision == ag::Precision::bf16,
                                          cfg.batch_size, cfg.checkpoint_activations);
  const double params = static_cast<double>(num_parameters);
  MemoryPlan p;
  p.parameters = saturated(4.0 * params);
  p.gradient_sets = 1 + partial_sums_held(cfg.grad_accum_steps) + (ranks > 1 ? 3 : 0);
  const double trained = trainable < 0 ? params : static_cast<double>(trainable);
  p.gradients = saturated(4.0 * trained * static_cast<double>(p.gradient_sets));
  const double state_bytes = static_cast<double>(optim::state_bytes_per_parameter(cfg.optimizer));
  p.optimizer_title = optim::optimizer_title(cfg.optimizer.name);
  p.optimizer = saturated(state_bytes * trained);  // AdamW: its two float32 moments
  p.weight_copies = saturated(f.weight_copy_bytes);
  plan_frozen_base(cfg, p);
  p.activations = saturated(tokens * f.activation_bytes_per_token() + f.per_step_bytes());
  for (const auto& term : f.saved)
    p.activation_terms.emplace_back(term.name, saturated(tokens * term.bytes));
  for (const auto& term : f.per_step)
    p.activation_terms.emplace_back(term.name, saturated(term.bytes));
  if (f.recompute_blocks)
    p.activation_terms.emplace_back("one block recomputed in backward (--checkpoint-activations)",
                                    saturated(tokens * f.recomputed_bytes_per_token()));
  p.activation_terms.emplace_back("backward peak, " + f.backward_peak.name,
                                  saturated(tokens * f.backward_peak.bytes));
  p.data_held = data_bytes;
  p.reading = reading_bytes;
  p.data = std::max(data_bytes, reading_bytes);
  p.checkpoint = kSaveBytes;
  p.runtime = kRuntimeBytes;
  p.available = available_memory();
  return p;
}

nn::Footprint model_footprint(const nn::GPTConfig& model, bool bf16, int64_t batch,
                              bool recompute_blocks) {
  nn::GPTConfig m = model;
  if (m.vocab_size == 0) m.vocab_size = 1;  // not known yet: the tokenizer fills it in
  nn::Footprint f(m.context_length, /*training=*/true, bf16);
  f.batch = batch;
  f.recompute_blocks = recompute_blocks;
  nn::ShapeOnlyScope description;
  nn::GPT(m, 0).footprint(f);
  return f;
}

int64_t MemoryPlan::total() const {
  return saturated(static_cast<double>(parameters) + gradients + optimizer + weight_copies +
                   base_scratch + activations + data + checkpoint + runtime);
}

int64_t MemoryPlan::tensor_bytes() const {
  return saturated(static_cast<double>(parameters) + gradients + optimizer + weight_copies +
                   base_scratch + activations);
}

std::string MemoryPlan::describe() const {
  return fmt::format(
      "memory plan: parameters {}{} + gradients {}{} + {} state {}{}{} + activations ~{} + data "
      "{}{} + checkpoint save {} + runtime {} = ~{}{}",
      format_bytes(parameters), base_title.empty() ? "" : " (" + base_title + ")",
      format_bytes(gradients),
      gradient_sets > 1
          ? fmt::format(" ({} sets: accumulation's partial sums, exchange buffers)", gradient_sets)
          : "",
      optimizer_title, format_bytes(optimizer),
      weight_copies > 0 ? fmt::format(" + bf16 weight copies {}", format_bytes(weight_copies)) : "",
      base_scratch > 0 ? fmt::format(" + base unpacked {}", format_bytes(base_scratch)) : "",
      format_bytes(activations), format_bytes(data),
      reading > data_held
          ? fmt::format(" (reading the text; {} held after)", format_bytes(data_held))
          : "",
      format_bytes(checkpoint), format_bytes(runtime), format_bytes(total()),
      available ? fmt::format(" of {} available", format_bytes(available)) : "");
}

nlohmann::json MemoryPlan::to_json() const {
  nlohmann::json terms = nlohmann::json::object();
  for (const auto& [name, bytes] : activation_terms) terms[name] = bytes;
  return {{"parameters", parameters},
          {"gradients", gradients},
          {"gradient_sets", gradient_sets},
          {"optimizer", optimizer},
          {"weight_copies", weight_copies},
          {"base_scratch", base_scratch},
          {"activations", activations},
          {"activation_terms", terms},
          {"data", data},
          {"data_held", data_held},
          {"data_reading", reading},
          {"checkpoint", checkpoint},
          {"runtime", runtime},
          {"total", total()},
          {"available", available}};
}

}  // namespace train
