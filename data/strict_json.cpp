#include "data/strict_json.h"

#include <fmt/format.h>

#include "data/data_error.h"

namespace data::detail {

nlohmann::json parse_strict_json(std::string_view bytes, const std::string& name,
                                 const std::vector<base::NumberList*>& lists) {
  try {
    return base::parse_json(bytes, lists);
  } catch (const base::JsonError& e) {
    throw DataError(fmt::format("{}: {}", name, e.what()));
  }
}

JsonObject::JsonObject(const nlohmann::json& value, std::string file, std::string path)
    : value_(value), file_(std::move(file)), path_(std::move(path)) {
  if (!value_.is_object())
    throw DataError(fmt::format("{}: {} must be a JSON object, not {}", file_,
                                path_.empty() ? "the file" : "'" + path_ + "'",
                                base::json_kind(value_)));
}

std::string JsonObject::where(std::string_view key) const {
  return path_.empty() ? fmt::format("{}: '{}'", file_, key)
                       : fmt::format("{}: '{}.{}'", file_, path_, key);
}

void JsonObject::fail(std::string_view key, const std::string& what) const {
  throw DataError(fmt::format("{} {}", where(key), what));
}

void JsonObject::expect_keys(std::initializer_list<std::string_view> keys) const {
  expect_keys(std::vector<std::string_view>(keys));
}

void JsonObject::expect_keys(const std::vector<std::string_view>& keys) const {
  for (const std::string_view key : keys)
    if (!value_.contains(key)) fail(key, "is missing");
  for (const auto& [key, v] : value_.items()) {
    bool known = false;
    for (const std::string_view k : keys) known = known || k == key;
    if (!known) fail(key, "is not a key this format has");
  }
}

bool JsonObject::has(std::string_view key) const {
  return value_.contains(key);
}

const nlohmann::json& JsonObject::value(std::string_view key) const {
  const auto it = value_.find(key);
  if (it == value_.end()) fail(key, "is missing");
  return *it;
}

uint64_t JsonObject::uint(std::string_view key, uint64_t max) const {
  const nlohmann::json& v = value(key);
  if (!v.is_number_unsigned())
    fail(key, fmt::format("must be an unsigned integer, not {}", base::json_kind(v)));
  const uint64_t x = v.get<uint64_t>();
  if (x > max) fail(key, fmt::format("is {}, more than the largest allowed, {}", x, max));
  return x;
}

double JsonObject::number(std::string_view key) const {
  const nlohmann::json& v = value(key);
  if (!v.is_number()) fail(key, fmt::format("must be a number, not {}", base::json_kind(v)));
  return v.get<double>();
}

std::string JsonObject::string(std::string_view key) const {
  const nlohmann::json& v = value(key);
  if (!v.is_string()) fail(key, fmt::format("must be a string, not {}", base::json_kind(v)));
  return v.get<std::string>();
}

JsonObject JsonObject::object(std::string_view key) const {
  return JsonObject(value(key), file_,
                    path_.empty() ? std::string(key) : path_ + "." + std::string(key));
}

JsonObject JsonObject::element(std::string_view key, size_t index) const {
  const std::string name = fmt::format("{}{}[{}]", path_.empty() ? "" : path_ + ".", key, index);
  return JsonObject(array(key).at(index), file_, name);
}

const nlohmann::json& JsonObject::array(std::string_view key) const {
  const nlohmann::json& v = value(key);
  if (!v.is_array()) fail(key, fmt::format("must be an array, not {}", base::json_kind(v)));
  return v;
}

}  // namespace data::detail
