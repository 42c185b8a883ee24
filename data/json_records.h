#pragma once
// Files of JSON records (the instruct and chat tasks' data): a JSON array of objects, or
// JSON lines (one object per line, blank lines skipped), told apart by the content. The
// file is hostile input: its size, its records' count and each record's length are bounded
// before anything is built, each record is parsed on its own by base/json.h (no tree of the
// whole file is ever built), and every problem is one DataError naming the file and the
// record's line (and number, in an array).
//
//   data::detail::for_each_json_record(path, {"an instruction file", "'instruction' and
//       'output'"}, [&](const data::detail::JsonRecord& r) { ... r.value, r.where ... });
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace data::detail {

struct JsonRecord {
  nlohmann::json value;  // a JSON object
  std::string where;     // "FILE: line 12" or "FILE: record 3 (line 12)", for messages
  int64_t line = 0;      // where it starts (1-based)
};

// What messages call the file and a record.
struct JsonRecordKind {
  const char* file;    // "an instruction file"
  const char* fields;  // what a record holds: "'instruction' and 'output'"
};

// Calls `on_record` with every record of the file, in order. Other problems than the
// file's (bounds, JSON, UTF-8, a record that is not an object) are DataErrors as above.
void for_each_json_record(const std::string& path, const JsonRecordKind& kind,
                          const std::function<void(const JsonRecord&)>& on_record);

}  // namespace data::detail
