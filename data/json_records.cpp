// data/json_records.h: the records of a JSON array or JSON lines file, bounded and parsed
// one at a time.
#include "data/json_records.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/json.h"
#include "base/utf8.h"
#include "data/data_error.h"
#include "data/posix_io.h"

namespace data::detail {

namespace {

// Alpaca's 52,002 records are 22 MB; these bounds are far above any instruction or chat set.
constexpr uint64_t kMaxFileBytes = uint64_t{256} << 20;
constexpr size_t kMaxRecords = 1'000'000;
constexpr size_t kMaxRecordBytes = size_t{4} << 20;

// One record's JSON text and where it is.
struct RecordText {
  std::string_view json;
  int64_t line = 0;     // where it starts (1-based)
  int64_t number = 0;   // in a JSON array: the record's number (1-based); JSON lines: 0
  uint64_t offset = 0;  // of json in the file
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view trim_end(std::string_view s) {
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string where_of(const std::string& name, int64_t line, int64_t number) {
  return number > 0 ? fmt::format("{}: record {} (line {})", name, number, line)
                    : fmt::format("{}: line {}", name, line);
}

// A record's text, checked against the bounds before it is kept.
void add_record(std::vector<RecordText>& out, const RecordText& r, const std::string& name) {
  if (r.json.size() > kMaxRecordBytes)
    throw DataError(fmt::format("{}: a record of {} bytes, more than the {} one may have",
                                where_of(name, r.line, r.number), r.json.size(), kMaxRecordBytes));
  if (out.size() == kMaxRecords)
    throw DataError(fmt::format("{}: more than {} records, more than one file may have (split it)",
                                name, kMaxRecords));
  out.push_back(r);
}

// JSON lines: each line that is not blank is a record.
std::vector<RecordText> json_lines(std::string_view text, const std::string& name) {
  std::vector<RecordText> out;
  int64_t line = 0;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    ++line;
    const std::string_view s = trim_end(text.substr(start, end - start));
    if (!std::all_of(s.begin(), s.end(), is_space)) add_record(out, {s, line, 0, start}, name);
    start = end + 1;
  }
  return out;
}

// The elements of the JSON array that fills the text from `open` (its '['), found by
// following strings and brackets. Each is parsed on its own afterwards, so a bad one is
// named by its number and line, and no tree of the whole file is ever built.
std::vector<RecordText> array_elements(std::string_view text, size_t open,
                                       const std::string& name) {
  std::vector<RecordText> out;
  int64_t line = 1 + std::count(text.begin(), text.begin() + static_cast<ptrdiff_t>(open), '\n');
  int depth = 0;
  bool in_string = false, escaped = false, after_comma = false;
  size_t start = std::string_view::npos;
  int64_t start_line = 0;
  for (size_t i = open + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (start == std::string_view::npos) {
      if (is_space(c)) continue;
      if (c == ',' || (c == ']' && after_comma))
        throw DataError(fmt::format("{}: an empty record (a stray ',')",
                                    where_of(name, line, static_cast<int64_t>(out.size()) + 1)));
      if (c == ']') return out;  // "[]"
      start = i, start_line = line;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    } else if (depth == 0 && (c == ',' || c == ']')) {
      const auto number = static_cast<int64_t>(out.size()) + 1;
      add_record(out, {trim_end(text.substr(start, i - start)), start_line, number, start}, name);
      start = std::string_view::npos;
      after_comma = c == ',';
      if (c == ']') {
        const size_t rest = text.find_first_not_of(" \t\r\n", i + 1);
        if (rest != std::string_view::npos)
          throw DataError(
              fmt::format("{}: line {}: text after the closing ']' of the records", name,
                          line + std::count(text.begin() + i, text.begin() + rest, '\n')));
        return out;
      }
    }
  }
  throw DataError(fmt::format("{}: the array of records has no closing ']'", name));
}

// A JSON parser's message about a record, its "at line L" counted in the file, not the record.
std::string in_file_lines(std::string what, int64_t record_line) {
  const std::string at = "at line ";
  const size_t p = what.find(at);
  if (p == std::string::npos) return what;
  const size_t digits = p + at.size();
  size_t end = digits;
  int64_t line = 0;
  while (end < what.size() && end - digits < 9 && what[end] >= '0' && what[end] <= '9')
    line = line * 10 + (what[end++] - '0');
  if (end == digits) return what;
  return what.replace(digits, end - digits, std::to_string(line + record_line - 1));
}

// The record's JSON object.
JsonRecord parse_record(const RecordText& r, const std::string& name, const JsonRecordKind& kind) {
  JsonRecord rec;
  rec.where = where_of(name, r.line, r.number);
  rec.line = r.line;
  try {
    base::check_utf8(r.json, r.offset);
    rec.value = base::parse_json(r.json);
  } catch (const std::exception& e) {  // invalid_argument (UTF-8) or base::JsonError
    throw DataError(fmt::format("{}: {}", rec.where, in_file_lines(e.what(), r.line)));
  }
  if (!rec.value.is_object())
    throw DataError(fmt::format("{}: a record must be a JSON object with {}, not {}", rec.where,
                                kind.fields, base::json_kind(rec.value)));
  return rec;
}

}  // namespace

void for_each_json_record(const std::string& path, const JsonRecordKind& kind,
                          const std::function<void(const JsonRecord&)>& on_record) {
  const std::string name = base::printable(path);
  InputFile file(path, name);
  if (file.size() > kMaxFileBytes)
    throw DataError(fmt::format("{}: {} bytes, more than the {} {} may have", name, file.size(),
                                kMaxFileBytes, kind.file));
  const std::string text = file.read_all(kMaxFileBytes);
  size_t first = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;  // a byte order mark
  while (first < text.size() && is_space(text[first])) ++first;
  if (first == text.size())
    throw DataError(fmt::format("{}: no records (the file is empty)", name));
  // decided by the content: a JSON array of records, else one record per line
  const std::vector<RecordText> texts =
      text[first] == '[' ? array_elements(text, first, name) : json_lines(text, name);
  if (texts.empty()) throw DataError(fmt::format("{}: no records (an empty array)", name));
  for (const RecordText& r : texts) on_record(parse_record(r, name, kind));
}

}  // namespace data::detail
