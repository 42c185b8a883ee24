#pragma once
// Reading the JSON files of data/ (meta.json, tokenizer.json) as hostile input (internal
// to the library): one value, nested at most kMaxDepth deep, no key twice in an object;
// then every field read through JsonObject, which refuses a missing key, a key it does not
// know and a value of the wrong type, naming the file and the key's path.
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace data::detail {

inline constexpr int kMaxJsonDepth = 8;

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

// Throws DataError "NAME: not valid JSON: ..." (or: nested too deep, a key given twice, an
// entry of a NumberList that is not what it should be).
nlohmann::json parse_strict_json(std::string_view bytes, const std::string& name,
                                 const std::vector<NumberList*>& lists = {});

class JsonObject {
 public:
  // `path` is where the object sits ("" for the top, "train" for {"train": {...}}).
  JsonObject(const nlohmann::json& value, std::string file, std::string path);

  // The object's keys must be exactly these.
  void expect_keys(std::initializer_list<std::string_view> keys) const;
  uint64_t uint(std::string_view key, uint64_t max = UINT64_MAX) const;
  double number(std::string_view key) const;
  std::string string(std::string_view key) const;
  JsonObject object(std::string_view key) const;
  // Element `index` of the array at `key`, which must be an object ("sources[2]").
  JsonObject element(std::string_view key, size_t index) const;
  const nlohmann::json& array(std::string_view key) const;
  const nlohmann::json& value(std::string_view key) const;

  // "FILE: 'train.tokens'" for messages about a key's value.
  std::string where(std::string_view key) const;
  [[noreturn]] void fail(std::string_view key, const std::string& what) const;

 private:
  const nlohmann::json& value_;
  std::string file_, path_;
};

// What kind of JSON value this is, for messages ("a string", "an unsigned integer").
std::string json_kind(const nlohmann::json& value);
// A value from a file as a JSON literal safe to print (ASCII, escaped), cut to 80 bytes.
std::string quote(const nlohmann::json& value);

}  // namespace data::detail
