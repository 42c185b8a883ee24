#pragma once
// JSON from elsewhere, the one reader of the project (a prepared folder's meta.json and
// tokenizer.json, a checkpoint's config, the lines of a --metrics file): one value, nested
// at most kMaxJsonDepth deep, no key twice in an object, optionally no string longer than
// a bound, nothing after the value (a NUL included); checked while the text is parsed, so a
// file nested 100,000 deep is an error, never a stack overflow, and a file with a key twice
// never means two things. The tree is built from the parser's events in time linear in
// the text, however many values one container holds (a tokenizer's 280,000 merges).
//
//   try {
//     nlohmann::json j = base::parse_json(bytes);
//   } catch (const base::JsonError& e) {   // what(): "not valid JSON: ...", "JSON nested
//     fail(name + ": " + e.what());        // deeper than 8 levels", ...; the caller names
//   }                                      // the file
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace base {

// Deeper than any file attograd writes (3 levels at most) and shallow enough for any stack.
inline constexpr int kMaxJsonDepth = 8;

struct JsonError : std::runtime_error {
  enum class Kind {
    syntax,         // not JSON at all, or cut short
    depth,          // nested deeper than kMaxJsonDepth
    duplicate_key,  // a key twice in one object
    long_string,    // a string over the bound the caller gave
    number_list,    // an entry of a NumberList that is not what it should be
  };
  JsonError(Kind k, const std::string& what) : std::runtime_error(what), kind(k) {}
  Kind kind;
};

// An array of unsigned integers at a key of the top object, or an array of arrays of
// `group` of them, read into `values` while the text is parsed instead of into the JSON
// tree (where the array is left empty): a large vocabulary costs 4 bytes a number, not a
// JSON value each, whatever a hostile file holds.
struct NumberList {
  std::string key;
  size_t group = 0;  // 0: [n, n, ...]; k > 0: [[n_1, ..., n_k], ...]
  uint32_t max_value = UINT32_MAX;
  size_t max_entries = 0;  // numbers, or groups
  std::string entry;       // what an entry is, for messages: "a code point (0 to 1114111)"
  std::vector<uint32_t> values;
  bool found = false;
};

// Throws JsonError; its message quotes nothing unescaped from the text.
nlohmann::json parse_json(std::string_view bytes, const std::vector<NumberList*>& lists = {},
                          size_t max_string_bytes = SIZE_MAX);

// What kind of JSON value this is, for messages ("a string", "an unsigned integer").
std::string json_kind(const nlohmann::json& value);
// A value from a file as a JSON literal safe to print (ASCII, escaped), cut to max_bytes.
std::string json_quote(const nlohmann::json& value, size_t max_bytes = 80);

}  // namespace base
