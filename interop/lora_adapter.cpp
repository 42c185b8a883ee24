#include "interop/lora_adapter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "interop/gguf_model.h"
#include "interop/model_files.h"
#include "train/config.h"

namespace interop {

namespace {

constexpr const char* kA = ".lora_A.weight";
constexpr const char* kB = ".lora_B.weight";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_adapter_tensor(const std::string& name) {
  return ends_with(name, kA) || ends_with(name, kB);
}

const ag::Tensor& tensor_named(const nn::StateDict& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw InteropError(fmt::format("the adapter has no tensor {}", name));
}

// "blocks.3.attn.W_query" -> "attn.W_query"
std::string role_of(const std::string& linear) {
  const size_t dot = linear.find('.', std::string("blocks.").size());
  return linear.substr(dot + 1);
}

// lora_targets naming exactly these Linears of a block (the shortest of attograd's names).
std::string targets_of(const std::set<std::string>& roles, bool swiglu) {
  std::vector<std::string> t;
  const auto has = [&](const char* r) { return roles.count(r) > 0; };
  if (has("attn.W_query") && has("attn.W_key") && has("attn.W_value")) {
    t.emplace_back("attn.qkv");
  } else {
    for (const auto& [role, name] : {std::pair{"attn.W_query", "q_proj"},
                                     {"attn.W_key", "k_proj"},
                                     {"attn.W_value", "v_proj"}})
      if (has(role)) t.emplace_back(name);
  }
  if (has("attn.out_proj")) t.emplace_back("attn.out_proj");
  if (!swiglu) {
    if (has("mlp.fc1")) t.emplace_back("mlp.fc1");
    if (has("mlp.fc2")) t.emplace_back("mlp.fc2");
  } else {
    if (has("mlp.gate_proj") && has("mlp.up_proj"))
      t.emplace_back("mlp.fc1");
    else
      for (const char* p : {"gate_proj", "up_proj"})
        if (has(fmt::format("mlp.{}", p).c_str())) t.emplace_back(p);
    if (has("mlp.down_proj")) t.emplace_back("mlp.fc2");
  }
  return fmt::format("{}", fmt::join(t, ","));
}

bool all_zero(const float* x, int64_t n) {
  return std::all_of(x, x + n, [](float v) { return v == 0.0F; });
}

// B [rows, R] of a tensor with llama.cpp's head permutation back in attograd's row order.
std::vector<float> unpermuted(const ReadAdapter& r) {
  const AdaptedTensor& t = *r.tensor;
  if (t.rope_heads == 0) return r.b;
  std::vector<float> b(r.b.size());
  for (int64_t row = 0; row < t.out(); ++row)
    std::memcpy(b.data() + gguf_row_source(row, t.out(), t.rope_heads) * r.rank,
                r.b.data() + row * r.rank, static_cast<size_t>(r.rank) * sizeof(float));
  return b;
}

// Part i's A [r, in] and B [rows_i, r] out of a tensor's adapter of rank R (r shared, or
// block i of a block-diagonal one whose other entries are zeros).
void split_part(const ReadAdapter& ra, const std::vector<float>& b, size_t i, int64_t r,
                int64_t row0, nn::StateDict& out, const std::string& source) {
  const AdaptedTensor& t = *ra.tensor;
  const int64_t R = ra.rank, in = t.in, rows = t.rows[i];
  const int64_t col0 = R == r ? 0 : static_cast<int64_t>(i) * r;
  std::vector<float> a(ra.a.begin() + col0 * in, ra.a.begin() + (col0 + r) * in);
  std::vector<float> bi(static_cast<size_t>(rows * r));
  for (int64_t j = 0; j < rows; ++j) {
    const float* row = b.data() + (row0 + j) * R;
    std::copy(row + col0, row + col0 + r, bi.begin() + j * r);
    if (R != r && !(all_zero(row, col0) && all_zero(row + col0 + r, R - col0 - r)))
      throw InteropError(fmt::format(
          "{}: {}'s lora_B is not block-diagonal (row {} reaches past {}'s columns): its rank {} "
          "is {} times attograd's {}, one block for each of its Linears",
          source, t.name, row0 + j, t.parts[i], R, t.parts.size(), r));
  }
  out.emplace_back(t.parts[i] + kA, ag::from_vector(a, {r, in}));
  out.emplace_back(t.parts[i] + kB, ag::from_vector(bi, {rows, r}));
}

void split_tensor(const ReadAdapter& ra, int64_t r, nn::StateDict& out, const std::string& source) {
  const AdaptedTensor& t = *ra.tensor;
  const auto k = static_cast<int64_t>(t.parts.size());
  if (ra.rank != r && ra.rank < k * r)
    throw InteropError(
        fmt::format("{}: {} has rank {}: attograd's adapters have rank {} ({} x {} for its {} "
                    "Linears joined)",
                    source, t.name, ra.rank, r, k, r, k));
  if (ra.rank != r && !all_zero(ra.a.data() + k * r * t.in, (ra.rank - k * r) * t.in))
    throw InteropError(fmt::format("{}: {}'s lora_A has rows past rank {} that are not zeros",
                                   source, t.name, k * r));
  const std::vector<float> b = unpermuted(ra);
  int64_t row0 = 0;
  for (size_t i = 0; i < t.parts.size(); row0 += t.rows[i++])
    split_part(ra, b, i, r, row0, out, source);
}

// The alpha that gives each tensor its scale alpha_t / R_t at attograd's rank r (one for all).
double common_alpha(const std::vector<ReadAdapter>& read, int64_t r, const std::string& source) {
  const ReadAdapter* ref = &read[0];
  for (const auto& ra : read)
    if (ra.rank == r) ref = &ra;
  const double alpha = ref->alpha * static_cast<double>(r) / static_cast<double>(ref->rank);
  for (const auto& ra : read) {
    const double a = ra.alpha * static_cast<double>(r) / static_cast<double>(ra.rank);
    if (!(std::abs(a - alpha) <= 1e-6 * std::abs(alpha)))
      throw InteropError(
          fmt::format("{}: {}'s scale is {}, {}'s {}: attograd's adapters share one scale", source,
                      ra.tensor->name, ra.alpha / ra.rank, ref->tensor->name, alpha / r));
  }
  return alpha;
}

// The split tensors in GPT(c)'s order, each one of c's adapters and c's all there.
nn::StateDict in_model_order(nn::StateDict split, const nn::GPTConfig& c,
                             const std::string& source) {
  std::map<std::string, ag::Tensor> by_name(split.begin(), split.end());
  nn::StateDict out;
  for (const auto& [name, shape] : c.parameter_shapes()) {
    if (!is_adapter_tensor(name)) continue;
    const auto it = by_name.find(name);
    if (it == by_name.end())
      throw InteropError(fmt::format(
          "{}: no adapter on {}: attograd's adapters sit on the same Linears of every block "
          "(lora_targets {})",
          source, name.substr(0, name.size() - std::strlen(kA)), c.lora_targets));
    out.emplace_back(name, it->second);
    by_name.erase(it);
  }
  return out;
}

// The file's own spelling of the targets ("all-linear", "v_proj,q_proj"), when it names the
// Linears the tensors do: the config then reads as the run's did (GPTConfig::same_adapters).
void respell_targets(nn::GPTConfig& c, const std::string& spelled) {
  if (spelled.empty() || spelled == c.lora_targets) return;
  nn::GPTConfig other = c;
  other.lora_targets = spelled;
  try {
    other.validate();
  } catch (const std::invalid_argument&) {
    return;  // not attograd's names: the derived spelling stays
  }
  if (other.parameter_shapes() == c.parameter_shapes()) c.lora_targets = spelled;
}

}  // namespace

int64_t AdaptedTensor::out() const {
  int64_t n = 0;
  for (int64_t r : rows) n += r;
  return n;
}

bool is_block_linear(const std::string& name) {
  if (name.rfind("blocks.", 0) != 0) return false;
  const size_t dot = name.find('.', 7);
  if (dot == std::string::npos || dot == 7) return false;
  for (size_t i = 7; i < dot; ++i)
    if (name[i] < '0' || name[i] > '9') return false;
  static const std::set<std::string> linears = {
      "attn.W_query.weight",  "attn.W_key.weight",  "attn.W_value.weight",
      "attn.out_proj.weight", "mlp.fc1.weight",     "mlp.fc2.weight",
      "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"};
  return linears.count(name.substr(dot + 1)) > 0;
}

LoraAdapter adapter_of(const io::Checkpoint& ckpt) {
  LoraAdapter a;
  try {
    const train::RunConfig run = train::RunConfig::from_json(ckpt.config);
    a.config = run.model;
    a.config.validate();
    a.base_name = run.init_from;
  } catch (const std::invalid_argument& e) {
    throw InteropError(fmt::format("{}: {}", ckpt.source, e.what()));
  }
  if (a.config.lora_rank == 0)
    throw InteropError(fmt::format(
        "{}: the checkpoint has no LoRA adapters (lora_rank 0): an adapter export needs a run "
        "trained with --lora-rank R (its model is exported with --format hf or gguf)",
        ckpt.source));
  if (a.config.num_classes > 0)
    throw InteropError(fmt::format(
        "{}: the model is a classifier, whose head trains beside its adapters: merge it and "
        "export --format hf",
        ckpt.source));
  for (const auto& [name, t] : ckpt.model)
    if (is_adapter_tensor(name)) a.tensors.emplace_back(name, t);
  return a;
}

bool adapted(const AdaptedTensor& t, const LoraAdapter& adapter, const std::string& format) {
  size_t n = 0;
  for (const auto& part : t.parts)
    for (const auto& [name, tensor] : adapter.tensors)
      if (name == part + kA) ++n;
  if (n != 0 && n != t.parts.size())
    throw InteropError(fmt::format(
        "{} holds {} as one tensor, {}: adapters on some of them only cannot be written "
        "(lora_targets attn.qkv puts one on each)",
        format, fmt::join(t.parts, ", "), t.name));
  return n != 0;
}

JoinedAdapter join_adapter(const AdaptedTensor& t, const LoraAdapter& adapter, int64_t rank) {
  const int64_t r = adapter.config.lora_rank, in = t.in, out = t.out();
  JoinedAdapter j{std::vector<float>(static_cast<size_t>(rank * in)),
                  std::vector<float>(static_cast<size_t>(out * rank)), rank};
  std::vector<float> b(j.b.size());
  int64_t row0 = 0;
  for (size_t i = 0; i < t.parts.size(); row0 += t.rows[i++]) {
    const ag::Tensor A = tensor_named(adapter.tensors, t.parts[i] + kA).contiguous();
    const ag::Tensor B = tensor_named(adapter.tensors, t.parts[i] + kB).contiguous();
    const auto col0 = static_cast<int64_t>(i) * r;
    std::copy_n(A.data<float>(), r * in, j.a.begin() + col0 * in);
    for (int64_t row = 0; row < t.rows[i]; ++row)
      std::copy_n(B.data<float>() + row * r, r, b.begin() + (row0 + row) * rank + col0);
  }
  for (int64_t row = 0; row < out; ++row)  // llama.cpp's head permutation, where it has one
    std::copy_n(b.begin() + (t.rope_heads ? gguf_row_source(row, out, t.rope_heads) : row) * rank,
                rank, j.b.begin() + row * rank);
  return j;
}

LoraAdapter split_adapter(const std::vector<ReadAdapter>& read, const nn::GPTConfig& base,
                          int64_t r, double dropout, const std::string& source,
                          const std::string& spelled) {
  if (read.empty()) throw InteropError(fmt::format("{}: holds no adapter tensors", source));
  nn::StateDict split;
  std::set<std::string> roles;
  for (const auto& ra : read) {
    split_tensor(ra, r, split, source);
    for (const auto& part : ra.tensor->parts) roles.insert(role_of(part));
  }
  LoraAdapter a;
  a.config = base;
  a.config.lora_rank = r;
  a.config.lora_alpha = common_alpha(read, r, source);
  a.config.lora_targets = targets_of(roles, base.mlp == nn::MlpKind::swiglu);
  a.config.lora_dropout = dropout;
  try {
    a.config.validate();
  } catch (const std::invalid_argument& e) {
    throw InteropError(fmt::format("{}: {}", source, e.what()));
  }
  a.tensors = in_model_order(std::move(split), a.config, source);
  respell_targets(a.config, spelled);
  return a;
}

io::Checkpoint attach_adapter(const io::Checkpoint& base, const LoraAdapter& adapter) {
  train::RunConfig run = train::RunConfig::from_json(base.config);
  if (run.model.lora_rank != 0)
    throw InteropError(fmt::format(
        "{}: the base has LoRA adapters already: merge them first (attograd merge)", base.source));
  const nn::GPTConfig& c = adapter.config;
  run.model.lora_rank = c.lora_rank, run.model.lora_alpha = c.lora_alpha;
  run.model.lora_targets = c.lora_targets, run.model.lora_dropout = c.lora_dropout;
  std::map<std::string, ag::Tensor> have(base.model.begin(), base.model.end());
  for (const auto& [name, t] : adapter.tensors) have[name] = t;
  io::Checkpoint out;
  for (const auto& [name, shape] : run.model.parameter_shapes()) {
    const auto it = have.find(name);
    if (it == have.end() || it->second.shape() != shape)
      throw InteropError(fmt::format(
          "{}: the base has {} {}, the adapter needs {}: not the adapter's base", base.source, name,
          it == have.end() ? "no tensor" : "tensor " + ag::shape_str(it->second.shape()),
          ag::shape_str(shape)));
    out.model.emplace_back(name, it->second);
  }
  out.config = run.to_json();
  out.tokenizer = base.tokenizer;
  out.source = base.source;
  return out;
}

}  // namespace interop
