#include "base/json.h"

#include <fmt/format.h>

#include "base/utf8.h"

namespace base {

namespace {

using json = nlohmann::json;
using Kind = JsonError::Kind;

// The parser's events made into a tree, in time linear in the text (nlohmann's callback
// parser rescans a container after each value it holds: quadratic in a container's size).
// It limits the nesting and the strings, refuses a key given twice, and diverts the
// entries of NumberLists into their vectors. Errors are thrown as JsonError.
class StrictBuilder final : public nlohmann::json_sax<json> {
 public:
  StrictBuilder(const std::vector<NumberList*>& lists, size_t max_string_bytes)
      : lists_(lists), max_string_(max_string_bytes) {}
  json take() { return std::move(root_); }

  bool null() override { return put(nullptr); }
  bool boolean(bool v) override { return put(v); }
  bool number_integer(json::number_integer_t v) override { return put(v); }
  bool number_unsigned(json::number_unsigned_t v) override { return put(v); }
  bool number_float(json::number_float_t v, const json::string_t&) override { return put(v); }
  bool string(json::string_t& v) override { return check_string(v), put(std::move(v)); }
  bool binary(json::binary_t&) override { return put(nullptr); }  // never in JSON text
  bool start_object(size_t) override { return open(json::object()); }
  bool key(json::string_t& k) override;
  bool end_object() override { return close(); }
  bool start_array(size_t) override;
  bool end_array() override;
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) override {
    // the parser's message quotes the bytes it stopped at
    throw JsonError(Kind::syntax, "not valid JSON: " + printable(e.what()));
  }

 private:
  bool put(json&& value) { return list_ ? list_value(value) : (place(std::move(value)), true); }
  json* place(json&& value);
  bool open(json&& container);
  bool close() { return open_.pop_back(), true; }
  bool list_value(const json& value);
  void check_string(const std::string& s) const;
  [[noreturn]] void bad_entry(const json* shown = nullptr) const;

  const std::vector<NumberList*>& lists_;
  size_t max_string_;
  json root_;
  std::vector<json*> open_;     // the open containers, outermost first: each its parent's last
  std::string key_;             // the key of the next value of the open object
  NumberList* list_ = nullptr;  // the list being read, and whether one of its groups is open
  bool group_open_ = false;
  size_t in_group_ = 0;  // numbers of the open group
};

// A value into the open container (or as the whole document); where it now is.
json* StrictBuilder::place(json&& value) {
  if (open_.empty()) {
    root_ = std::move(value);
    return &root_;
  }
  json& into = *open_.back();
  if (into.is_object())
    return &into.get_ref<json::object_t&>()
                .emplace(std::move(key_), std::move(value))
                .first->second;
  auto& array = into.get_ref<json::array_t&>();
  array.push_back(std::move(value));
  return &array.back();
}

// A container opened is its parent's last value until it closes, so its place is kept.
bool StrictBuilder::open(json&& container) {
  if (list_) return list_value(container);
  if (open_.size() >= static_cast<size_t>(kMaxJsonDepth))
    throw JsonError(Kind::depth, fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth));
  open_.push_back(place(std::move(container)));
  return true;
}

bool StrictBuilder::key(json::string_t& k) {
  check_string(k);
  if (open_.back()->contains(k))
    throw JsonError(Kind::duplicate_key,
                    fmt::format("the key '{}' appears twice in one object", printable(k)));
  key_ = std::move(k);
  return true;
}

// A NumberList's array, at its key of the top object, is left empty in the tree.
bool StrictBuilder::start_array(size_t) {
  if (list_ && list_->group > 0 && !group_open_) {
    if (list_->values.size() / list_->group >= list_->max_entries) bad_entry();
    group_open_ = true, in_group_ = 0;
    return true;
  }
  NumberList* found = nullptr;
  if (!list_ && open_.size() == 1 && open_.back()->is_object())
    for (NumberList* l : lists_)
      if (l->key == key_) found = l;
  open(json::array());
  if (found) list_ = found, found->found = true;
  return true;
}

bool StrictBuilder::end_array() {
  if (list_ && group_open_) {
    if (in_group_ != list_->group) bad_entry();
    group_open_ = false, in_group_ = 0;
    return true;
  }
  list_ = nullptr;
  return close();
}

// An entry of the NumberList being read: a number in its place, within its bounds.
bool StrictBuilder::list_value(const json& value) {
  NumberList& l = *list_;
  const bool number_here = (l.group == 0) != group_open_;
  if (!number_here || !value.is_number_unsigned() || value.get<uint64_t>() > l.max_value ||
      (l.group == 0 && l.values.size() >= l.max_entries) || (l.group > 0 && in_group_ >= l.group))
    bad_entry(value.is_structured() ? nullptr : &value);
  l.values.push_back(value.get<uint32_t>());
  ++in_group_;
  return true;
}

void StrictBuilder::check_string(const std::string& s) const {
  if (s.size() > max_string_)
    throw JsonError(Kind::long_string, fmt::format("a string of more than {} bytes", max_string_));
}

void StrictBuilder::bad_entry(const json* shown) const {
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
  // nlohmann's reader ends the text at a NUL, which no JSON text holds anywhere
  if (const size_t nul = bytes.find('\0'); nul != std::string_view::npos)
    throw JsonError(Kind::syntax, fmt::format("not valid JSON: a NUL byte at offset {}", nul));
  StrictBuilder builder(lists, max_string_bytes);
  // strict: the whole text is one value (a NUL or anything else after it is an error)
  json::sax_parse(bytes.begin(), bytes.end(), &builder, json::input_format_t::json, true);
  return builder.take();
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
