#pragma once
// What every Hugging Face model folder has, whatever the architecture (see interop.h for the
// map): config.json, read as it streams keeping only the keys a reader names, its keys read
// with the architecture's defaults (HfConfigKeys), and the weights' files: model.safetensors,
// or the shards model.safetensors.index.json names, each tensor name held to what the
// architecture has as the header names it (so a header of a million strange entries costs its
// first).
//
//   const nlohmann::json j = interop::read_hf_config("m/config.json", {"hidden_size", ...});
//   const interop::HfConfigKeys k{j, "m/config.json"};   int64_t d = k.integer("hidden_size",
//   4096); auto files = interop::open_hf_weights("m/", {holds, "Llama (LlamaForCausalLM)"});
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "interop/json_stream.h"
#include "interop/model_files.h"
#include "interop/safetensors.h"

namespace interop {

// config.json and model.safetensors.index.json are small: a larger one is refused unread.
inline constexpr int64_t kMaxHfJsonBytes = 1 << 20;
inline constexpr size_t kMaxShards = 4096;

// "'text'" for a message: the text printable and cut short (excerpt).
std::string quoted(const std::string& text);

// A config.json's keys, each with the architecture's default when absent or null (its
// transformers Config class's), so that a config from_pretrained accepts means the same here;
// a value of the wrong kind is an InteropError naming the key.
struct HfConfigKeys {
  const nlohmann::json& j;
  const std::string& source;
  const char* prefix = "";  // a nested object's key and '.', for messages ("rope_scaling.")

  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  const nlohmann::json* find(const char* key) const;  // nullptr when absent or null
  int64_t integer(const char* key, int64_t fallback) const;
  double number(const char* key, double fallback) const;
  bool flag(const char* key, bool fallback) const;
  std::string text(const char* key, const std::string& fallback) const;
};

// A JSON text of at most kMaxHfJsonBytes read by `reader` as it streams (json_stream.h);
// errors name in.source().
void read_hf_json(const InputBytes& in, JsonReader& reader);
void read_hf_json_file(const std::string& path, JsonReader& reader);

// config.json's path for PATH (a model folder, or one of its .safetensors files); an
// InteropError when the folder has none, saying what PATH is instead (a prepared data folder).
std::string hf_config_path(const std::string& path);

// config.json's top object with only `keys` kept (each at most 4096 values: the longest is
// a list of the layers); the rest are skipped as they are read, never stored. A key twice, or a
// text that is not an object, is an InteropError.
nlohmann::json read_hf_config(const std::string& path, const std::set<std::string>& keys);
nlohmann::json read_hf_config(const InputBytes& in, const std::set<std::string>& keys);

// Which tensors an architecture's files may hold, and its name for messages
// ("GPT-2 (GPT2LMHeadModel)").
struct HfNames {
  std::function<bool(const std::string&)> holds;
  std::string model;
  // throws for a tensor the architecture does not have, naming it (SafetensorsReader::Filter)
  SafetensorsReader::Filter filter(const std::string& source) const;
};

// The weights' files of path: a .safetensors file, or a folder's model.safetensors, or the
// shards its model.safetensors.index.json names (plain names of the folder, at most
// kMaxShards; each tensor in the shard its weight_map names and nowhere else). A folder with
// only pytorch_model.bin is refused saying what to do.
std::vector<SafetensorsReader> open_hf_weights(const std::string& path, const HfNames& names);

// Before anything is allocated: a config stating more parameters than the files can hold
// (2 bytes each at least) is refused.
void check_hf_size(const std::vector<SafetensorsReader>& files, const nn::GPTConfig& c);

// A tensor of a model's files: which file, which entry; the files' tensors by name.
struct LocatedTensor {
  const SafetensorsReader* in;
  const SafetensorsEntry* e;
};
using LocatedTensors = std::map<std::string, LocatedTensor>;

// A tied head may come as its own tensor (lm_head.weight): it must then hold the values of
// the embedding, named `embedding_name` in messages; it is noted in m.dropped.
void check_tied_head(const LocatedTensor& head, const ag::Tensor& embedding,
                     const std::string& embedding_name, ModelFiles& m);

// F16 holds at most 65504: a larger weight, which would become infinite, is an InteropError
// naming where, the tensor and the element.
void check_f16_range(const ModelFiles& model, const std::string& where);

}  // namespace interop
