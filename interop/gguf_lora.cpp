#include "interop/gguf_lora.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "base/atomic_file.h"
#include "base/utf8.h"
#include "interop/gguf_format.h"
#include "interop/gguf_llama.h"
#include "interop/gguf_model.h"
#include "interop/model_files.h"

namespace interop {

namespace {

constexpr const char* kRankKey = "attograd.lora_rank";
constexpr const char* kAlphaKey = "attograd.lora_alpha";
const std::set<std::string> kKeys = {"general.architecture", "general.type", "adapter.type",
                                     "adapter.lora.alpha",   kRankKey,       kAlphaKey,
                                     kLoraTargetsKey};

uint32_t ggml_type_of(StoredType t) {
  return t == StoredType::f32 ? gguf::kF32 : t == StoredType::f16 ? gguf::kF16 : gguf::kBF16;
}

std::string architecture_for(const nn::GPTConfig& c, const std::string& where) {
  std::string why;
  const std::string arch = gguf_architecture(c.without_adapters(), why);
  if (arch.empty())
    throw InteropError(fmt::format("{}: a GGUF file cannot hold the base model: {}", where, why));
  return arch;
}

// The base's tensors (llama.cpp's names) that are made of a block's Linears.
std::vector<AdaptedTensor> gguf_adapted(const nn::GPTConfig& c, const std::string& arch) {
  const nn::GPTConfig base = c.without_adapters();
  std::map<std::string, ag::Shape> shapes;
  for (const auto& [name, shape] : base.parameter_shapes()) shapes[name] = shape;
  std::vector<AdaptedTensor> out;
  for (const GgufTensor& t : gguf_tensors(base, arch)) {
    if (t.content != GgufTensor::Content::weights || t.parts.empty() ||
        !std::all_of(t.parts.begin(), t.parts.end(), is_block_linear))
      continue;
    AdaptedTensor a{t.name, {}, {}, t.shape[1], t.rope_heads};
    for (const auto& p : t.parts) {
      a.parts.push_back(p.substr(0, p.size() - std::string(".weight").size()));
      a.rows.push_back(shapes.at(p)[0]);
    }
    out.push_back(std::move(a));
  }
  return out;
}

gguf::File adapter_keys(const std::string& arch, const std::string& name, const nn::GPTConfig& c,
                        int64_t k) {
  using gguf::Value;
  gguf::File f;
  Value exact_alpha;
  exact_alpha.type = gguf::kFloat64, exact_alpha.floats = {c.lora_alpha};
  f.keys = {
      {"general.architecture", Value::string(arch)},
      {"general.type", Value::string("adapter")},
      {"general.name", Value::string(name)},
      {"general.alignment", Value::u32(gguf::kDefaultAlignment)},
      {"adapter.type", Value::string("lora")},
      {"adapter.lora.alpha", Value::f32(static_cast<float>(static_cast<double>(k) * c.lora_alpha))},
      {kRankKey, Value::u32(static_cast<uint32_t>(c.lora_rank))},
      {kAlphaKey, exact_alpha},
      {kLoraTargetsKey, Value::string(c.lora_targets)}};
  return f;
}

void write_adapter(const LoraAdapter& adapter, const std::string& name, StoredType dtype,
                   const ByteSink& out) {
  const nn::GPTConfig& c = adapter.config;
  const std::string arch = architecture_for(c, name);
  const std::vector<AdaptedTensor> all = gguf_adapted(c, arch);
  std::vector<const AdaptedTensor*> on;
  int64_t k = 1;
  for (const auto& t : all)
    if (adapted(t, adapter, "llama.cpp's " + arch)) {
      on.push_back(&t);
      k = std::max(k, static_cast<int64_t>(t.parts.size()));
    }
  const int64_t R = k * c.lora_rank;  // one rank for all: llama.cpp's alpha is the file's
  gguf::File f = adapter_keys(arch, name, c, k);
  for (const AdaptedTensor* t : on) {
    f.tensors.push_back({t->name + ".lora_a", ggml_ne({R, t->in}), ggml_type_of(dtype), 0});
    f.tensors.push_back({t->name + ".lora_b", ggml_ne({t->out(), R}), ggml_type_of(dtype), 0});
  }
  gguf::write_header(f, out);
  for (size_t i = 0; i < on.size(); ++i) {
    const JoinedAdapter j = join_adapter(*on[i], adapter, R);
    write_floats(j.a.data(), static_cast<int64_t>(j.a.size()), dtype, out);
    gguf::write_padding(f.tensors[2 * i].bytes(), f.alignment, out);
    write_floats(j.b.data(), static_cast<int64_t>(j.b.size()), dtype, out);
    gguf::write_padding(f.tensors[2 * i + 1].bytes(), f.alignment, out);
  }
}

void check_keys(const gguf::File& f, const std::string& arch, const std::string& source) {
  std::set<std::string> used;
  const auto text = [&](const char* key) {
    return scalar_key(f, key, gguf::kString, source, used).strings[0];
  };
  if (text("general.type") != "adapter")
    throw InteropError(fmt::format("{}: key general.type is '{}', not 'adapter'", source,
                                   excerpt(text("general.type"))));
  if (text("adapter.type") != "lora")
    throw InteropError(fmt::format("{}: key adapter.type is '{}': only LoRA adapters are read",
                                   source, excerpt(text("adapter.type"))));
  if (text("general.architecture") != arch)
    throw InteropError(fmt::format("{}: key general.architecture is '{}', the base's is '{}'",
                                   source, excerpt(text("general.architecture")), arch));
}

// What the reader keeps of a header: the keys above (scalars), and only the halves of the
// base's tensors, each refused as its info is read.
gguf::HeaderFilter adapter_filter(const std::string& source, const std::set<std::string>& names,
                                  const std::string& arch) {
  gguf::HeaderFilter filter;
  filter.key = [source](const std::string& key, uint32_t, bool is_array, uint64_t) {
    if (!kKeys.count(key)) return gguf::KeyUse::ignore;
    if (is_array) throw InteropError(fmt::format("{}: key {} is an array", source, key));
    return gguf::KeyUse::keep;
  };
  filter.max_kept_string_bytes = uint64_t{1} << 16;
  filter.tensor = [&names, source, arch](const gguf::File& keys, const gguf::TensorInfo& t) {
    check_keys(keys, arch, source);  // the keys first: a wrong base's names are no mystery
    if (!names.count(t.name))
      throw InteropError(
          fmt::format("{}: tensor {} is not the lora_a or lora_b of one of the base's {} tensors",
                      source, excerpt(t.name), arch));
  };
  return filter;
}

// t's halves, when the file has them: A [R, in], B [out, R] (ne [in, R] and [R, out]).
bool read_pair(const InputBytes& in, const gguf::File& f, const AdaptedTensor& t, double alpha,
               std::vector<ReadAdapter>& read) {
  const gguf::TensorInfo* a = find_tensor(f, t.name + ".lora_a");
  const gguf::TensorInfo* b = find_tensor(f, t.name + ".lora_b");
  if (!a && !b) return false;
  if (!a || !b)
    throw InteropError(fmt::format("{}: tensor {}.lora_{} has no lora_{}", in.source(), t.name,
                                   a ? "a" : "b", a ? "b" : "a"));
  const uint64_t R = a->ne.size() == 2 ? a->ne[1] : 0;
  if (R < 1 || R > (1 << 20) || a->ne[0] != static_cast<uint64_t>(t.in) ||
      b->ne != std::vector<uint64_t>{R, static_cast<uint64_t>(t.out())})
    throw InteropError(fmt::format(
        "{}: tensors {} and {} have ne [{}] and [{}]: the base's {} needs [{}, R] and [R, {}]",
        in.source(), a->name, b->name, fmt::join(a->ne, ", "), fmt::join(b->ne, ", "), t.name, t.in,
        t.out()));
  const auto rank = static_cast<int64_t>(R);
  read.push_back({&t, rank, alpha == 0 ? static_cast<double>(rank) : alpha,
                  gguf::read_tensor(in, f, *a), gguf::read_tensor(in, f, *b)});
  return true;
}

// attograd's rank: its key, or else the one rank all tensors share.
int64_t rank_of(const gguf::File& f, const std::vector<ReadAdapter>& read,
                const std::string& source) {
  std::set<std::string> used;
  if (f.find(kRankKey)) {
    const int64_t r = size_key(f, kRankKey, "lora_rank", source, used);
    if (r < 1)
      throw InteropError(fmt::format("{}: key {} is {}: a rank is 1 or more", source, kRankKey, r));
    return r;
  }
  for (const auto& ra : read)
    if (ra.rank != read[0].rank)
      throw InteropError(fmt::format(
          "{}: tensors {} and {} have ranks {} and {}: attograd's adapters share one rank", source,
          read[0].tensor->name, ra.tensor->name, read[0].rank, ra.rank));
  return read.empty() ? 1 : read[0].rank;
}

double alpha_key(const gguf::File& f, const std::string& source) {
  const gguf::Value* v = f.find("adapter.lora.alpha");
  if (!v) return 0;  // llama.cpp: a scale of 1
  if (v->type != gguf::kFloat32 || !std::isfinite(v->floats[0]) || v->floats[0] < 0)
    throw InteropError(fmt::format("{}: key adapter.lora.alpha is not a FLOAT32 >= 0", source));
  return v->floats[0];
}

// attograd's alpha, exact where its key holds it (adapter.lora.alpha is a float32).
void settle_alpha(const gguf::File& f, LoraAdapter& a, const std::string& source) {
  const gguf::Value* v = f.find(kAlphaKey);
  if (!v) return;
  const double exact = v->type == gguf::kFloat64 ? v->floats[0] : NAN;
  if (!(std::abs(exact - a.config.lora_alpha) <= 1e-6 * a.config.lora_alpha))
    throw InteropError(fmt::format("{}: key {} is not the FLOAT64 of the tensors' scale times {}",
                                   source, kAlphaKey, a.config.lora_rank));
  a.config.lora_alpha = exact;
}

}  // namespace

void write_gguf_lora(const LoraAdapter& adapter, const std::string& name, StoredType dtype,
                     const ByteSink& out) {
  write_adapter(adapter, name, dtype, out);
}

void write_gguf_lora(const LoraAdapter& adapter, const std::string& path, StoredType dtype) {
  std::string name = base::base_name(path);
  if (name.size() > 5 && name.substr(name.size() - 5) == ".gguf") name.resize(name.size() - 5);
  try {
    base::write_file_atomically(path, [&](int fd) {
      base::BufferedWriter file(fd, path);
      write_adapter(adapter, name, dtype, [&](const char* data, size_t n) { file.write(data, n); });
      file.flush();
    });
  } catch (const InteropError& e) {
    throw InteropError(fmt::format("{}: {}", path, e.what()));
  }
}

LoraAdapter read_gguf_lora(const std::string& path, const nn::GPTConfig& base) {
  return read_gguf_lora(InputBytes::open(path), base);
}

LoraAdapter read_gguf_lora(const InputBytes& in, const nn::GPTConfig& base) {
  const std::string& path = in.source();
  const std::string arch = architecture_for(base, path);
  const std::vector<AdaptedTensor> all = gguf_adapted(base, arch);
  std::set<std::string> names;
  for (const auto& t : all) names.insert({t.name + ".lora_a", t.name + ".lora_b"});
  const gguf::File f = gguf::read_header(in, adapter_filter(path, names, arch));
  check_keys(f, arch, path);
  const double alpha = alpha_key(f, path);
  std::vector<ReadAdapter> read;
  for (const auto& t : all) read_pair(in, f, t, alpha, read);
  const gguf::Value* spelled = f.find(kLoraTargetsKey);
  LoraAdapter a =
      split_adapter(read, base, rank_of(f, read, path), 0, path,
                    spelled && spelled->type == gguf::kString ? spelled->strings[0] : "");
  settle_alpha(f, a, path);
  return a;
}

bool is_gguf_adapter(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  try {  // a file that is no GGUF, or a damaged one, is for the model reader to name
    const InputBytes in = InputBytes::open(path);
    char magic[4] = {};
    if (in.size() < 4) return false;
    in.read(0, magic, 4, "its magic");
    if (std::string(magic, 4) != "GGUF") return false;
    gguf::HeaderFilter filter;
    filter.key = [](const std::string& key, uint32_t, bool is_array, uint64_t) {
      return key == "general.type" && !is_array ? gguf::KeyUse::keep : gguf::KeyUse::ignore;
    };
    filter.tensor = [](const gguf::File&, const gguf::TensorInfo&) {};
    filter.max_kept_string_bytes = uint64_t{1} << 16;
    const gguf::File f = gguf::read_header(in, filter);
    const gguf::Value* v = f.find("general.type");
    return v && v->type == gguf::kString && v->strings[0] == "adapter";
  } catch (const InteropError&) {
    return false;
  }
}

}  // namespace interop
