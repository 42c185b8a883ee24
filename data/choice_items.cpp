#include "data/choice_items.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/json.h"
#include "base/utf8.h"
#include "data/data_error.h"
#include "data/posix_io.h"

namespace data {

namespace {

// Where a field is, for messages: "FILE: line N: 'FIELD' ...".
struct Where {
  const std::string& name;
  int64_t line;
  [[noreturn]] void fail(const std::string& what) const {
    throw DataError(fmt::format("{}: line {}: {}", name, line, what));
  }
  [[noreturn]] void fail(std::string_view field, const std::string& what) const {
    fail(fmt::format("'{}' {}", field, what));
  }
};

const nlohmann::json& item_field(const nlohmann::json& object, const char* key, const Where& at) {
  const auto it = object.find(key);
  if (it == object.end()) at.fail(key, "is missing");
  return *it;
}

std::string context_field(const nlohmann::json& object, const char* key, const Where& at) {
  const nlohmann::json& v = item_field(object, key, at);
  if (!v.is_string()) at.fail(key, "must be a string, not " + base::json_kind(v));
  std::string text = v.get<std::string>();
  // the first ending token is predicted from the context: there must be one
  if (text.empty()) at.fail(key, "is empty");
  return text;
}

std::vector<std::string> endings_field(const nlohmann::json& object, const char* key,
                                       const Where& at) {
  const nlohmann::json& v = item_field(object, key, at);
  if (!v.is_array()) at.fail(key, "must be an array of strings, not " + base::json_kind(v));
  if (v.size() < 2 || v.size() > kMaxEndings)
    at.fail(key, fmt::format("has {} {}; an item needs 2 to {}", v.size(),
                             v.size() == 1 ? "entry" : "entries", kMaxEndings));
  std::vector<std::string> endings;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string entry = fmt::format("{}[{}]", key, i);
    if (!v[i].is_string()) at.fail(entry, "must be a string, not " + base::json_kind(v[i]));
    endings.push_back(v[i].get<std::string>());
    if (endings.back().empty()) at.fail(entry, "is empty");
  }
  return endings;
}

int64_t index_in_range(const nlohmann::json& v, size_t count, const char* key, const Where& at) {
  const auto in_range = [&](int64_t i) {
    if (i < 0 || i >= static_cast<int64_t>(count))
      at.fail(key, fmt::format("is {}, outside 0 to {} ({} endings)", i, count - 1, count));
    return i;
  };
  if (v.is_number_unsigned())
    return in_range(static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX)));
  return in_range(v.get<int64_t>());
}

// HellaSwag's "label": an integer, or (Hugging Face's copy) a string of decimal digits.
int64_t label_field(const nlohmann::json& object, size_t count, const Where& at) {
  const nlohmann::json& v = item_field(object, "label", at);
  if (v.is_number_integer()) return index_in_range(v, count, "label", at);
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (!s.empty() && s.size() <= 9 &&
        std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return index_in_range(nlohmann::json(std::stoll(s)), count, "label", at);
  }
  at.fail("label", "must be an integer (or a string of digits), not " +
                       (v.is_string() ? base::json_quote(v) : base::json_kind(v)));
}

// "answer": an integer, a capital letter (A is the first choice), or one choice's text.
int64_t answer_field(const nlohmann::json& object, const std::vector<std::string>& choices,
                     const Where& at) {
  const nlohmann::json& v = item_field(object, "answer", at);
  if (v.is_number_integer()) return index_in_range(v, choices.size(), "answer", at);
  if (!v.is_string())
    at.fail("answer",
            "must be an integer, a letter or the text of a choice, not " + base::json_kind(v));
  const auto& s = v.get_ref<const std::string&>();
  const auto n = static_cast<int64_t>(choices.size());
  if (s.size() == 1 && s[0] >= 'A' && s[0] <= 'Z') {
    if (s[0] - 'A' >= n)
      at.fail("answer", fmt::format("is the letter {}, but there are {} choices (A to {})", s, n,
                                    static_cast<char>('A' + n - 1)));
    return s[0] - 'A';
  }
  const auto first = std::find(choices.begin(), choices.end(), s);
  if (first == choices.end())
    at.fail("answer",
            fmt::format("{} is neither a letter nor the text of a choice", base::json_quote(v)));
  if (std::find(first + 1, choices.end(), s) != choices.end())
    at.fail("answer", fmt::format("{} is the text of more than one choice", base::json_quote(v)));
  return first - choices.begin();
}

}  // namespace

ChoiceItem parse_choice_item(std::string_view line, const std::string& name, int64_t line_number) {
  const Where at{name, line_number};
  nlohmann::json object;
  try {
    object = base::parse_json(line);
  } catch (const base::JsonError& e) {
    at.fail(e.what());
  }
  if (!object.is_object()) at.fail("must be a JSON object, not " + base::json_kind(object));
  const bool hellaswag = object.contains("ctx"), question = object.contains("question");
  if (hellaswag && question) at.fail("has both 'ctx' and 'question': one shape per item");
  if (!hellaswag && !question) at.fail("'ctx' (or 'question') is missing");
  ChoiceItem item;
  item.line = line_number;
  if (hellaswag) {
    item.context = context_field(object, "ctx", at);
    item.endings = endings_field(object, "endings", at);
    item.label = label_field(object, item.endings.size(), at);
  } else {
    item.context_key = "question", item.endings_key = "choices";
    item.context = context_field(object, "question", at);
    item.endings = endings_field(object, "choices", at);
    item.label = answer_field(object, item.endings, at);
  }
  return item;
}

struct ChoiceReader::State {
  std::string name;
  detail::InputFile file;
  std::vector<char> block = std::vector<char>(size_t{64} << 10);
  size_t at = 0, end = 0;
  bool ended = false;
  std::string line;
  int64_t line_number = 0;

  explicit State(const std::string& path)
      : name(base::printable(path)), file(path, base::printable(path)) {}

  // The next line into `line` (its "\n" or "\r\n" removed); false at the end of the file.
  bool read_line() {
    line.clear();
    for (;;) {
      if (at == end && !refill()) {
        if (line.empty()) return false;
        return counted();
      }
      const char* start = block.data() + at;
      const char* stop = block.data() + end;
      const char* newline = std::find(start, stop, '\n');
      append(start, newline);
      at = static_cast<size_t>(newline - block.data());
      if (newline != stop) {
        ++at;
        return counted();
      }
    }
  }

 private:
  bool refill() {
    if (ended) return false;
    end = file.read(block.data(), block.size());
    at = 0;
    ended = end == 0;
    return !ended;
  }
  void append(const char* from, const char* to) {
    if (line.size() + static_cast<size_t>(to - from) > kMaxChoiceLineBytes)
      throw DataError(fmt::format("{}: line {} is longer than {} bytes", name, line_number + 1,
                                  kMaxChoiceLineBytes));
    line.append(from, to);
  }
  bool counted() {
    if (++line_number > kMaxChoiceLines)
      throw DataError(fmt::format("{}: more than {} lines", name, kMaxChoiceLines));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  }
};

ChoiceReader::ChoiceReader(const std::string& path) : s_(std::make_unique<State>(path)) {}

ChoiceReader::~ChoiceReader() = default;

std::optional<ChoiceItem> ChoiceReader::next() {
  while (s_->read_line()) {
    const std::string& line = s_->line;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank
    return parse_choice_item(line, s_->name, s_->line_number);
  }
  return std::nullopt;
}

const std::string& ChoiceReader::name() const {
  return s_->name;
}

}  // namespace data
