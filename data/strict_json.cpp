#include "data/strict_json.h"

#include <fmt/format.h>

#include <set>
#include <vector>

#include "data/data_error.h"

namespace data::detail {

nlohmann::json parse_strict_json(std::string_view bytes, const std::string& name) {
  using Event = nlohmann::json::parse_event_t;
  // the keys of each open object; is_object says what each open level is
  std::vector<std::set<std::string>> objects;
  std::vector<bool> is_object;
  const auto check = [&](int /*depth*/, Event event, nlohmann::json& parsed) {
    if (event == Event::object_start || event == Event::array_start) {
      if (is_object.size() >= static_cast<size_t>(kMaxJsonDepth))
        throw DataError(fmt::format("{}: JSON nested deeper than {} levels, which this format "
                                    "never needs",
                                    name, kMaxJsonDepth));
      is_object.push_back(event == Event::object_start);
      if (event == Event::object_start) objects.emplace_back();
    } else if (event == Event::object_end || event == Event::array_end) {
      if (is_object.back()) objects.pop_back();
      is_object.pop_back();
    } else if (event == Event::key) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!objects.back().insert(key).second)
        throw DataError(fmt::format("{}: the key '{}' appears twice in one object", name, key));
    }
    return true;
  };
  try {
    return nlohmann::json::parse(bytes.begin(), bytes.end(), check);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}: not valid JSON: {}", name, e.what()));
  }
}

std::string json_kind(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_unsigned()) return "an unsigned integer";
  if (v.is_number_integer()) return "a negative integer";
  if (v.is_number_float()) return "a floating-point number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

std::string quote(const nlohmann::json& value) {
  std::string s = value.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

JsonObject::JsonObject(const nlohmann::json& value, std::string file, std::string path)
    : value_(value), file_(std::move(file)), path_(std::move(path)) {
  if (!value_.is_object())
    throw DataError(fmt::format("{}: {} must be a JSON object, not {}", file_,
                                path_.empty() ? "the file" : "'" + path_ + "'", json_kind(value_)));
}

std::string JsonObject::where(std::string_view key) const {
  return path_.empty() ? fmt::format("{}: '{}'", file_, key)
                       : fmt::format("{}: '{}.{}'", file_, path_, key);
}

void JsonObject::fail(std::string_view key, const std::string& what) const {
  throw DataError(fmt::format("{} {}", where(key), what));
}

void JsonObject::expect_keys(std::initializer_list<std::string_view> keys) const {
  for (const std::string_view key : keys)
    if (!value_.contains(key)) fail(key, "is missing");
  for (const auto& [key, v] : value_.items()) {
    bool known = false;
    for (const std::string_view k : keys) known = known || k == key;
    if (!known) fail(key, "is not a key this format has");
  }
}

const nlohmann::json& JsonObject::value(std::string_view key) const {
  const auto it = value_.find(key);
  if (it == value_.end()) fail(key, "is missing");
  return *it;
}

uint64_t JsonObject::uint(std::string_view key, uint64_t max) const {
  const nlohmann::json& v = value(key);
  if (!v.is_number_unsigned())
    fail(key, fmt::format("must be an unsigned integer, not {}", json_kind(v)));
  const uint64_t x = v.get<uint64_t>();
  if (x > max) fail(key, fmt::format("is {}, more than the largest allowed, {}", x, max));
  return x;
}

double JsonObject::number(std::string_view key) const {
  const nlohmann::json& v = value(key);
  if (!v.is_number()) fail(key, fmt::format("must be a number, not {}", json_kind(v)));
  return v.get<double>();
}

std::string JsonObject::string(std::string_view key) const {
  const nlohmann::json& v = value(key);
  if (!v.is_string()) fail(key, fmt::format("must be a string, not {}", json_kind(v)));
  return v.get<std::string>();
}

JsonObject JsonObject::object(std::string_view key) const {
  return JsonObject(value(key), file_, path_.empty() ? std::string(key) : path_ + "." + std::string(key));
}

JsonObject JsonObject::element(std::string_view key, size_t index) const {
  const std::string name = fmt::format("{}{}[{}]", path_.empty() ? "" : path_ + ".", key, index);
  return JsonObject(array(key).at(index), file_, name);
}

const nlohmann::json& JsonObject::array(std::string_view key) const {
  const nlohmann::json& v = value(key);
  if (!v.is_array()) fail(key, fmt::format("must be an array, not {}", json_kind(v)));
  return v;
}

}  // namespace data::detail
