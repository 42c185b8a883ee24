#include "base/json.h"

#include <fmt/format.h>

#include <set>

#include "base/utf8.h"

namespace base {

namespace {

using Event = nlohmann::json::parse_event_t;
using Kind = JsonError::Kind;

// The parser's callback: limits the nesting and the strings, refuses a key given twice,
// and diverts the entries of NumberLists. Returning false drops a value from the tree.
class StrictParse {
 public:
  StrictParse(const std::vector<NumberList*>& lists, size_t max_string_bytes)
      : lists_(lists), max_string_(max_string_bytes) {}
  bool operator()(Event event, nlohmann::json& parsed);

 private:
  bool in_list(Event event, nlohmann::json& parsed);
  void check_string(const nlohmann::json& parsed) const;
  [[noreturn]] void bad_entry(const nlohmann::json* shown = nullptr) const;
  const std::vector<NumberList*>& lists_;
  size_t max_string_;
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
      throw JsonError(Kind::depth, fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth));
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
    check_string(parsed);
    const std::string& key = parsed.get_ref<const std::string&>();
    if (!objects_.back().insert(key).second)
      throw JsonError(Kind::duplicate_key,
                      fmt::format("the key '{}' appears twice in one object", printable(key)));
    if (is_object_.size() == 1) top_key_ = key;
  } else if (event == Event::value) {
    check_string(parsed);
  }
  return true;
}

void StrictParse::check_string(const nlohmann::json& parsed) const {
  if (parsed.is_string() && parsed.get_ref<const std::string&>().size() > max_string_)
    throw JsonError(Kind::long_string, fmt::format("a string of more than {} bytes", max_string_));
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
    throw JsonError(Kind::number_list,
                    fmt::format("'{}' has more than {} entries, more than this format allows",
                                l.key, l.max_entries));
  throw JsonError(Kind::number_list, fmt::format("'{}'[{}] must be {}{}", l.key, index, l.entry,
                                                 shown ? ", not " + json_quote(*shown) : ""));
}

}  // namespace

nlohmann::json parse_json(std::string_view bytes, const std::vector<NumberList*>& lists,
                          size_t max_string_bytes) {
  StrictParse parse(lists, max_string_bytes);
  try {
    return nlohmann::json::parse(
        bytes.begin(), bytes.end(),
        [&](int /*depth*/, Event event, nlohmann::json& parsed) { return parse(event, parsed); });
  } catch (const nlohmann::json::exception& e) {
    // the parser's message quotes the bytes it stopped at
    throw JsonError(Kind::syntax, "not valid JSON: " + printable(e.what()));
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

std::string json_quote(const nlohmann::json& value, size_t max_bytes) {
  std::string s = value.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  return s.size() > max_bytes ? s.substr(0, max_bytes - 3) + "..." : s;
}

}  // namespace base
