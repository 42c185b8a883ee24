#include "data/strict_json.h"

#include <fmt/format.h>

#include <set>
#include <vector>

#include "data/data_error.h"

namespace data::detail {

namespace {

using Event = nlohmann::json::parse_event_t;

// The parser callback: limits the nesting, refuses a key given twice, and diverts the
// entries of NumberLists. Returning false drops a value from the tree.
class StrictParse {
 public:
  StrictParse(const std::string& name, const std::vector<NumberList*>& lists)
      : name_(name), lists_(lists) {}
  bool operator()(Event event, nlohmann::json& parsed);

 private:
  bool in_list(Event event, nlohmann::json& parsed);
  [[noreturn]] void bad_entry(const nlohmann::json* shown = nullptr) const;
  const std::string& name_;
  const std::vector<NumberList*>& lists_;
  std::vector<std::set<std::string>> objects_;  // the keys of each open object
  std::vector<bool> is_object_;                 // what each open level is
  std::string top_key_;                         // the last key of the top object
  NumberList* list_ = nullptr;                  // the list being read
  size_t in_group_ = 0;                         // numbers of the open group
};

bool StrictParse::operator()(Event event, nlohmann::json& parsed) {
  if (list_ && is_object_.size() >= 2) return in_list(event, parsed);
  if (event == Event::object_start || event == Event::array_start) {
    if (is_object_.size() >= static_cast<size_t>(kMaxJsonDepth))
      throw DataError(
          fmt::format("{}: JSON nested deeper than {} levels, which this format "
                      "never needs",
                      name_, kMaxJsonDepth));
    if (event == Event::array_start && is_object_.size() == 1)
      for (NumberList* l : lists_)
        if (l->key == top_key_) list_ = l, l->found = true;
    is_object_.push_back(event == Event::object_start);
    if (event == Event::object_start) objects_.emplace_back();
  } else if (event == Event::object_end || event == Event::array_end) {
    if (is_object_.back()) objects_.pop_back();
    is_object_.pop_back();
    list_ = nullptr;
  } else if (event == Event::key) {
    const std::string& key = parsed.get_ref<const std::string&>();
    if (!objects_.back().insert(key).second)
      throw DataError(fmt::format("{}: the key '{}' appears twice in one object", name_, key));
    if (is_object_.size() == 1) top_key_ = key;
  }
  return true;
}

// Inside a NumberList's array (is_object_ holds the top object and the list).
bool StrictParse::in_list(Event event, nlohmann::json& parsed) {
  NumberList& l = *list_;
  const bool group_open = is_object_.size() == 3;
  if (event == Event::array_end && !group_open) {  // the list ends
    is_object_.pop_back();
    list_ = nullptr;
    return true;
  }
  if (l.group > 0 && !group_open && event == Event::array_start) {
    if (l.values.size() / l.group >= l.max_entries) bad_entry();
    is_object_.push_back(false), in_group_ = 0;
    return true;
  }
  if (l.group > 0 && group_open && event == Event::array_end) {
    if (in_group_ != l.group) bad_entry();
    is_object_.pop_back(), in_group_ = 0;
    return false;
  }
  const bool number_here = (l.group == 0) != group_open;
  if (event != Event::value || !number_here || !parsed.is_number_unsigned() ||
      parsed.get<uint64_t>() > l.max_value || (l.group == 0 && l.values.size() >= l.max_entries) ||
      (l.group > 0 && in_group_ >= l.group))
    bad_entry(event == Event::value ? &parsed : nullptr);
  l.values.push_back(parsed.get<uint32_t>());
  ++in_group_;
  return false;
}

void StrictParse::bad_entry(const nlohmann::json* shown) const {
  const NumberList& l = *list_;
  const size_t index = l.group == 0 ? l.values.size() : (l.values.size() - in_group_) / l.group;
  if (index >= l.max_entries)
    throw DataError(
        fmt::format("{}: '{}' has more than {} entries, more than any tokenizer "
                    "this format allows",
                    name_, l.key, l.max_entries));
  throw DataError(fmt::format("{}: '{}'[{}] must be {}{}", name_, l.key, index, l.entry,
                              shown ? ", not " + quote(*shown) : std::string()));
}

}  // namespace

nlohmann::json parse_strict_json(std::string_view bytes, const std::string& name,
                                 const std::vector<NumberList*>& lists) {
  StrictParse parse(name, lists);
  try {
    return nlohmann::json::parse(
        bytes.begin(), bytes.end(),
        [&](int /*depth*/, Event event, nlohmann::json& parsed) { return parse(event, parsed); });
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
  return JsonObject(value(key), file_,
                    path_.empty() ? std::string(key) : path_ + "." + std::string(key));
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
