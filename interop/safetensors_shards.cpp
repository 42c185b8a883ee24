#include "interop/safetensors_shards.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "base/atomic_file.h"
#include "base/utf8.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace interop {

namespace {

struct SizeUnit {
  const char* name;  // upper case
  double bytes;
};
// Longest first, so that "GIB" is not read as a number ending "I" and "B".
constexpr SizeUnit kSizeUnits[] = {
    {"TIB", 1099511627776.0},
    {"GIB", 1073741824.0},
    {"MIB", 1048576.0},
    {"KIB", 1024.0},
    {"TB", 1e12},
    {"GB", 1e9},
    {"MB", 1e6},
    {"KB", 1e3},
    {"B", 1.0},
};

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

[[noreturn]] void bad_shard_size(const std::string& text, const std::string& option) {
  throw std::invalid_argument(fmt::format(
      "{} must be a size such as 5GB, 500MB or 2GiB (KB, MB, GB, TB, KiB, MiB, GiB, TiB) or a "
      "count of bytes, from 1 byte to 2^60, got '{}'",
      option, base::printable(text)));
}

uint64_t shard_bytes_of(const SafetensorsTensor& t, StoredType dtype) {
  return static_cast<uint64_t>(ag::shape_numel(t.shape)) * stored_bytes(dtype);
}

std::string shard_name(size_t index, size_t count) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, count);
}

}  // namespace

uint64_t parse_shard_size(const std::string& text, const std::string& option) {
  const std::string u = upper(text);
  double scale = 1.0;
  size_t digits = u.size();
  for (const SizeUnit& unit : kSizeUnits) {
    const std::string_view name = unit.name;
    if (u.size() > name.size() && u.ends_with(name)) {
      scale = unit.bytes;
      digits = u.size() - name.size();
      break;
    }
  }
  double value = 0;
  const char* end = u.data() + digits;
  const auto [at, ec] = std::from_chars(u.data(), end, value, std::chars_format::fixed);
  if (digits == 0 || ec != std::errc() || at != end || !std::isfinite(value)) {
    bad_shard_size(text, option);
  }
  const double bytes = std::floor(value * scale);  // as transformers: int(value * unit)
  if (!(bytes >= 1.0) || bytes > std::ldexp(1.0, 60)) bad_shard_size(text, option);
  return static_cast<uint64_t>(bytes);
}

std::vector<std::vector<size_t>> plan_shards(const std::vector<SafetensorsTensor>& tensors,
                                             StoredType dtype, uint64_t max_shard_bytes) {
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  uint64_t current_bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t bytes = shard_bytes_of(tensors[i], dtype);
    if (bytes > max_shard_bytes) {  // alone, and the shard being filled stays open
      shards.push_back({i});
      continue;
    }
    if (current_bytes + bytes > max_shard_bytes) {
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += bytes;
  }
  if (!current.empty()) shards.push_back(std::move(current));
  return shards;
}

void write_safetensors_model(const std::string& folder,
                             const std::vector<SafetensorsTensor>& tensors, StoredType dtype,
                             uint64_t max_shard_bytes,
                             const std::map<std::string, std::string>& metadata) {
  const auto shards = plan_shards(tensors, dtype, max_shard_bytes);
  if (shards.size() <= 1) {
    write_safetensors((fs::path(folder) / "model.safetensors").string(), tensors, dtype, metadata);
    return;
  }
  json weight_map = json::object();
  uint64_t total_size = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    std::vector<SafetensorsTensor> part;
    for (size_t i : shards[s]) {
      part.push_back(tensors[i]);
      weight_map[tensors[i].name] = shard_name(s, shards.size());
      total_size += shard_bytes_of(tensors[i], dtype);
    }
    write_safetensors((fs::path(folder) / shard_name(s, shards.size())).string(), part, dtype,
                      metadata);
  }
  const json index = {{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}};
  base::write_file_atomically((fs::path(folder) / "model.safetensors.index.json").string(),
                              index.dump(2) + "\n");
}

}  // namespace interop
