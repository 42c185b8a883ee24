#include "interop/hf_folder.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "base/json.h"
#include "data/prepared.h"
#include "interop/hub_cache.h"

namespace interop {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A kept config value: a short list at most (layer_types names every layer).
constexpr size_t kMaxKeptValues = 4096;

// config.json's top object with the keys asked for; a JSON text that is not an object is
// refused.
struct ConfigReader final : JsonReader {
  json kept = json::object();
  std::string source;
  const std::set<std::string>& keys;

  ConfigReader(std::string path, const std::set<std::string>& wanted)
      : source(std::move(path)), keys(wanted) {}
  void open(bool object) override {
    if (!object) throw InteropError(fmt::format("{}: is an array, not a JSON object", source));
  }
  Use use(const std::string& key, size_t) override {
    if (kept.contains(key))
      throw InteropError(fmt::format("{}: the key {} appears twice", source, quoted(key)));
    return keys.count(key) ? keep(kMaxKeptValues) : skip();
  }
  void value(const std::string& key, size_t, json v) override { kept[key] = std::move(v); }
};

// A shard's name from an index: a file of the folder, never a path out of it.
bool is_plain_file_name(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 255) return false;
  for (const unsigned char ch : name)
    if (!std::isalnum(ch) && ch != '.' && ch != '-' && ch != '_') return false;
  return true;
}

// model.safetensors.index.json, streamed: its weight_map (tensor -> shard file), each
// tensor one the model holds (else refused as it is read), each file a plain name of the
// folder; the rest of the index skipped.
struct IndexReader final : JsonReader {
  std::string source;
  const HfNames& expected;
  std::map<std::string, std::string> shard_of;  // tensor -> file
  bool found = false;

  IndexReader(std::string index, const HfNames& names)
      : source(std::move(index)), expected(names) {}
  Use use(const std::string& key, size_t) override {
    if (key != "weight_map") return skip();
    if (found) throw InteropError(fmt::format("{}: the key 'weight_map' appears twice", source));
    found = true;
    return stream();
  }
  void value(const std::string&, size_t, json v) override {
    throw InteropError(
        fmt::format("{}: weight_map is {}, not an object", source, base::json_kind(v)));
  }
  JsonReader& nested(const std::string&, size_t) override { return map; }

  struct WeightMap final : JsonReader {
    IndexReader& index;
    explicit WeightMap(IndexReader& i) : index(i) {}
    void open(bool object) override {
      if (!object)
        throw InteropError(fmt::format("{}: weight_map is an array, not an object", index.source));
    }
    Use use(const std::string& tensor, size_t) override {
      if (!index.expected.holds(tensor))
        throw InteropError(
            fmt::format("{}: weight_map names tensor {}, which is not part of {} as "
                        "config.json states it",
                        index.source, quoted(tensor), index.expected.model));
      if (index.shard_of.count(tensor))
        throw InteropError(
            fmt::format("{}: weight_map names tensor {} twice", index.source, quoted(tensor)));
      return keep(1);
    }
    void value(const std::string& tensor, size_t, json file) override {
      if (!file.is_string() || !is_plain_file_name(file.get<std::string>()))
        throw InteropError(fmt::format("{}: weight_map {} names {}, not a file of the folder",
                                       index.source, quoted(tensor), base::json_quote(file)));
      index.shard_of[tensor] = file.get<std::string>();
    }
  } map{*this};
};

// model.safetensors.index.json's shards, each opened and checked; every tensor must be in
// the shard its weight_map names.
std::vector<SafetensorsReader> open_shards(const fs::path& folder, const HfNames& expected) {
  const std::string index = (folder / "model.safetensors.index.json").string();
  IndexReader reader(index, expected);
  read_hf_json_file(index, reader);
  if (!reader.found) throw InteropError(fmt::format("{}: no weight_map object", index));
  const std::map<std::string, std::string>& shard_of = reader.shard_of;
  std::set<std::string> names;
  for (const auto& [tensor, file] : shard_of) names.insert(file);
  if (names.empty() || names.size() > kMaxShards)
    throw InteropError(
        fmt::format("{}: weight_map names {} files (1 to {})", index, names.size(), kMaxShards));
  std::vector<SafetensorsReader> shards;
  for (const auto& name : names) {
    const std::string file = (folder / name).string();
    shards.emplace_back(file, expected.filter(file), false);
  }
  size_t held = 0;
  for (const auto& in : shards)
    for (const auto& e : in.entries()) {
      const auto it = shard_of.find(e.name);
      if (it == shard_of.end() || (folder / it->second).string() != in.source())
        throw InteropError(fmt::format("{}: tensor {} is not where {} says it is", in.source(),
                                       quoted(e.name), index));
      ++held;
    }
  if (held != shard_of.size())
    throw InteropError(fmt::format("{}: weight_map names {} tensors, its shards hold {}", index,
                                   shard_of.size(), held));
  return shards;
}

}  // namespace

std::string quoted(const std::string& text) {
  return "'" + excerpt(text) + "'";
}

void HfConfigKeys::fail(const std::string& key, const std::string& what) const {
  throw InteropError(fmt::format("{}: {}{} {}", source, prefix, key, what));
}

const json* HfConfigKeys::find(const char* key) const {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

int64_t HfConfigKeys::integer(const char* key, int64_t fallback) const {
  const json* v = find(key);
  if (!v) return fallback;
  if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX))
    fail(key, fmt::format("is {}, not an integer", base::json_quote(*v)));
  return v->get<int64_t>();
}

double HfConfigKeys::number(const char* key, double fallback) const {
  const json* v = find(key);
  if (!v) return fallback;
  if (!v->is_number()) fail(key, fmt::format("is {}, not a number", base::json_quote(*v)));
  return v->get<double>();
}

bool HfConfigKeys::flag(const char* key, bool fallback) const {
  const json* v = find(key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(key, fmt::format("is {}, not true or false", base::json_quote(*v)));
  return v->get<bool>();
}

std::string HfConfigKeys::text(const char* key, const std::string& fallback) const {
  const json* v = find(key);
  if (!v) return fallback;
  if (!v->is_string()) fail(key, fmt::format("is {}, not a string", base::json_quote(*v)));
  return v->get<std::string>();
}

void read_hf_json(const InputBytes& in, JsonReader& reader) {
  if (in.size() > static_cast<uint64_t>(kMaxHfJsonBytes))
    throw InteropError(fmt::format("{}: {} bytes, more than the {} such a file may have",
                                   in.source(), in.size(), kMaxHfJsonBytes));
  try {
    read_json(in, 0, in.size(), reader, kMaxHfJsonBytes);
  } catch (const JsonStreamError& e) {
    throw InteropError(fmt::format("{}: {}", in.source(), e.what()));
  }
}

void read_hf_json_file(const std::string& path, JsonReader& reader) {
  read_hf_json(InputBytes::open(path), reader);
}

std::string hf_config_path(const std::string& path) {
  std::error_code ec;
  const bool is_folder = fs::is_directory(path, ec);
  std::string folder = is_folder ? path : fs::path(path).parent_path().string();
  if (folder.empty()) folder = ".";
  if (has_entry(folder, "config.json")) return (fs::path(folder) / "config.json").string();
  if (!is_folder)
    throw InteropError(
        fmt::format("{}: no config.json beside it (a .safetensors file is read with its folder's "
                    "config.json, which gives the model's shape)",
                    path));
  if (data::is_prepared_folder(path))
    throw InteropError(fmt::format(
        "{}: is a prepared data folder (meta.json, train.bin), not a model; train on it with "
        "'attograd train --data {}'",
        path, path));
  throw InteropError(fmt::format(
      "{}: no config.json in this folder: a Hugging Face model folder holds config.json beside "
      "its .safetensors files (or give a GGUF or llm.c model file)",
      path));
}

json read_hf_config(const InputBytes& in, const std::set<std::string>& keys) {
  ConfigReader reader(in.source(), keys);
  read_hf_json(in, reader);
  return std::move(reader.kept);
}

json read_hf_config(const std::string& path, const std::set<std::string>& keys) {
  return read_hf_config(InputBytes::open(path), keys);
}

SafetensorsReader::Filter HfNames::filter(const std::string& source) const {
  return [this, source](const std::string& name) {
    if (!holds(name))
      throw InteropError(fmt::format("{}: tensor {} is not part of {} as config.json states it",
                                     source, quoted(name), model));
  };
}

std::vector<SafetensorsReader> open_hf_weights(const std::string& path, const HfNames& names) {
  std::error_code ec;
  std::vector<SafetensorsReader> files;
  if (!fs::is_directory(path, ec)) {
    files.emplace_back(path, names.filter(path), false);
    return files;
  }
  const fs::path folder(path);
  const std::string weights = (folder / "model.safetensors").string();
  if (has_entry(path, "model.safetensors")) {  // a link too: InputBytes::open judges it
    files.emplace_back(weights, names.filter(weights), false);
    return files;
  }
  if (has_entry(path, "model.safetensors.index.json")) return open_shards(folder, names);
  if (has_entry(path, "pytorch_model.bin"))
    throw InteropError(
        fmt::format("{}: only pytorch_model.bin (a Python pickle, which attograd "
                    "never loads); convert it to model.safetensors",
                    path));
  throw InteropError(fmt::format("{}: no model.safetensors in the folder", path));
}

void check_f16_range(const ModelFiles& model, const std::string& where) {
  for (const auto& [name, t] : model.weights) {
    const float* v = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i)
      if (std::abs(v[i]) >= 65520.0f)
        throw InteropError(fmt::format(
            "{}: tensor {} holds {} at element {}, beyond F16's range (--dtype f32 or bf16)", where,
            name, v[i], i));
  }
}

void check_hf_size(const std::vector<SafetensorsReader>& files, const nn::GPTConfig& c) {
  uint64_t bytes = 0;
  for (const auto& in : files) bytes += in.file_size();
  const uint64_t params = static_cast<uint64_t>(c.num_parameters());
  if (params > bytes / 2)
    throw InteropError(
        fmt::format("{}: config.json states {} parameters, more than the file's "
                    "{} bytes can hold",
                    files.front().source(), params, bytes));
}

void check_tied_head(const LocatedTensor& head, const ag::Tensor& embedding,
                     const std::string& embedding_name, ModelFiles& m) {
  const std::string& source = head.in->source();
  if (head.e->shape != embedding.shape())
    throw InteropError(fmt::format("{}: tensor lm_head.weight has shape {}, {} {}", source,
                                   ag::shape_str(head.e->shape), embedding_name,
                                   ag::shape_str(embedding.shape())));
  const ag::Tensor values = head.in->read(*head.e);
  if (std::memcmp(values.data<float>(), embedding.data<float>(),
                  static_cast<size_t>(embedding.numel()) * sizeof(float)) != 0)
    throw InteropError(fmt::format(
        "{}: lm_head.weight differs from {}, but config.json ties them (tie_word_embeddings true)",
        source, embedding_name));
  m.dropped.push_back(fmt::format("lm_head.weight (equal to {}: the tied head)", embedding_name));
}

}  // namespace interop
