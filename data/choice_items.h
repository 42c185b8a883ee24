#pragma once
// Multiple-choice items (HellaSwag's shape, or a question with choices) from a JSON Lines
// file, read a line at a time so memory does not grow with the file. train/multiple_choice.h
// scores them.
//
//   data::ChoiceReader items("hellaswag_val.jsonl");       // a DataError if unreadable
//   while (auto item = items.next()) use(item->context, item->endings, item->label);
//
// A line is one JSON object (blank lines are skipped, other keys ignored), either
//   {"ctx": "A man sits down.", "endings": ["He ...", "She ..."], "label": 0}
// ("label" an integer, or a string of decimal digits as Hugging Face's copy has it), or
//   {"question": "2 + 2 =", "choices": ["3", "4"], "answer": 1}
// ("answer" an integer, a capital letter "A", "B", ... for the choice at that place, or
// the text of exactly one choice; a single capital letter is always read as a letter).
// Every item has 2 to kMaxEndings endings, none empty, and its label in range; anything
// else is a DataError "FILE: line N: 'FIELD' ..." naming what is wrong.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace data {

inline constexpr size_t kMaxChoiceLineBytes = size_t{1} << 20;  // HellaSwag's are ~1 kB
inline constexpr int64_t kMaxChoiceLines = 10'000'000;          // HellaSwag has 10,042
inline constexpr size_t kMaxEndings = 26;                       // the letters A to Z

struct ChoiceItem {
  std::string context;               // "ctx", or "question"
  std::vector<std::string> endings;  // "endings", or "choices"
  int64_t label = 0;                 // the index of the true ending
  int64_t line = 0;                  // where it is in its file, from 1
  // the keys the item came in, for messages: "ctx" and "endings", or "question" and "choices"
  std::string context_key = "ctx", endings_key = "endings";
};

// One line (its newline removed) of file `name`; a DataError naming name and line_number.
ChoiceItem parse_choice_item(std::string_view line, const std::string& name, int64_t line_number);

class ChoiceReader {
 public:
  explicit ChoiceReader(const std::string& path);
  ~ChoiceReader();
  ChoiceReader(const ChoiceReader&) = delete;
  ChoiceReader& operator=(const ChoiceReader&) = delete;

  // The next item, or nothing at the end of the file.
  std::optional<ChoiceItem> next();
  const std::string& name() const;  // the path, printable, as messages name it

  struct State;  // choice_items.cpp

 private:
  std::unique_ptr<State> s_;
};

}  // namespace data
