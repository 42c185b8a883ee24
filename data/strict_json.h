#pragma once
// Reading the JSON files of data/ (meta.json, tokenizer.json) as hostile input (internal
// to the library): parsed by base::parse_json (one value, nested at most
// base::kMaxJsonDepth deep, no key twice in an object); then every field read through
// JsonObject, which refuses a missing key, a key it does not know and a value of the wrong
// type, naming the file and the key's path.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"

namespace data::detail {

// base::parse_json, its errors as DataError "NAME: not valid JSON: ..." (or: nested too
// deep, a key given twice, an entry of a NumberList that is not what it should be).
nlohmann::json parse_strict_json(std::string_view bytes, const std::string& name,
                                 const std::vector<base::NumberList*>& lists = {});

class JsonObject {
 public:
  // `path` is where the object sits ("" for the top, "train" for {"train": {...}}).
  JsonObject(const nlohmann::json& value, std::string file, std::string path);

  // The object's keys must be exactly these.
  void expect_keys(std::initializer_list<std::string_view> keys) const;
  void expect_keys(const std::vector<std::string_view>& keys) const;
  bool has(std::string_view key) const;  // for keys a format may lack (older files)
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

}  // namespace data::detail
