// The instruct task's reader (examples.h, instructions.h): records from a JSON array or
// JSON lines, formatted with the prompt template, tokenized, masked and cut to the context.
// The file is hostile input: its size, its records' count and each record's length are
// bounded before anything is built, each record is parsed on its own by base/json.h, and
// every problem is one DataError naming the file, the record's line (and number, in an
// array) and the field.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "base/json.h"
#include "base/utf8.h"
#include "data/data_error.h"
#include "data/examples.h"
#include "data/instructions.h"
#include "data/json_records.h"
#include "data/strict_json.h"

namespace data {

namespace {

struct InstructionRecord {
  std::string instruction, input, output;
  std::string where;  // "FILE: line 12" or "FILE: record 3 (line 12)", for messages
  int64_t line = 0;
};

// The record's fields; "input" may be missing or null (no input).
InstructionRecord parse_instruction(const detail::JsonRecord& r) {
  InstructionRecord rec;
  rec.where = r.where;
  rec.line = r.line;
  const nlohmann::json& j = r.value;
  const detail::JsonObject o(j, rec.where, "");
  rec.instruction = o.string("instruction");
  if (j.contains("input") && !j["input"].is_null()) rec.input = o.string("input");
  rec.output = o.string("output");
  if (rec.output.empty()) o.fail("output", "is empty: a record needs a response to train on");
  return rec;
}

// Every record of an instruction file, in order; other keys than instruction, input and
// output are ignored.
std::vector<InstructionRecord> read_records(const std::string& path) {
  std::vector<InstructionRecord> records;
  detail::for_each_json_record(
      path, {"an instruction file", "'instruction' and 'output'"},
      [&](const detail::JsonRecord& r) { records.push_back(parse_instruction(r)); });
  return records;
}

std::vector<int64_t> encode_field(const Tokenizer& tok, const std::string& text,
                                  const InstructionRecord& r, const char* field) {
  try {
    return tok.encode(text);
  } catch (const std::invalid_argument& e) {  // a character the vocabulary does not have
    throw DataError(fmt::format("{}: '{}': {}", r.where, field, e.what()));
  }
}

// The prompt's tokens; when they cannot be made, the field (or the template) to blame.
std::vector<int64_t> encode_prompt(const Tokenizer& tok, const PromptTemplate& t,
                                   const InstructionRecord& r) {
  try {
    return tok.encode(t.format(r.instruction, r.input));
  } catch (const std::invalid_argument& e) {
    encode_field(tok, r.instruction, r, "instruction");
    encode_field(tok, r.input, r, "input");
    throw DataError(fmt::format("{}: the prompt template: {}", r.where, e.what()));
  }
}

}  // namespace

Example instruction_example(std::span<const int64_t> prompt, std::span<const int64_t> response,
                            int64_t end_of_text, int64_t context_length, bool* truncated) {
  if (context_length < 1) throw std::invalid_argument("instruction_example: context_length < 1");
  std::vector<int64_t> full(prompt.begin(), prompt.end());
  full.insert(full.end(), response.begin(), response.end());
  full.push_back(end_of_text);
  const auto n = static_cast<int64_t>(full.size()), P = static_cast<int64_t>(prompt.size());
  const int64_t kept = std::min(n, context_length);
  Example e;
  e.ids.assign(full.begin(), full.begin() + kept);
  e.targets.assign(static_cast<size_t>(kept), kIgnoreTarget);
  for (int64_t i = std::max<int64_t>(P - 1, 0); i < kept && i + 1 < n; ++i)
    e.targets[static_cast<size_t>(i)] = full[static_cast<size_t>(i + 1)];
  if (truncated) *truncated = n - 1 > context_length;
  return e;
}

TaskExamples read_instruction_examples(const std::string& path, const Tokenizer& tokenizer,
                                       const TaskOptions& o) {
  const int64_t T = o.context_length;
  if (T < 1 || o.end_of_text < 0)
    throw std::invalid_argument("read_instruction_examples: a context length and an end-of-text");
  const PromptTemplate tmpl = PromptTemplate::parse(o.prompt_template, "the prompt template");
  TaskExamples out;
  for (const InstructionRecord& r : read_records(path)) {
    const std::vector<int64_t> prompt = encode_prompt(tokenizer, tmpl, r);
    const std::vector<int64_t> response = encode_field(tokenizer, r.output, r, "output");
    const auto P = static_cast<int64_t>(prompt.size()), R = static_cast<int64_t>(response.size());
    if (P > T)
      throw DataError(
          fmt::format("{}: the prompt alone is {} tokens, more than the context "
                      "length {}: no response token would be trained on",
                      r.where, P, T));
    if (!o.truncate && P + R > T)
      throw DataError(
          fmt::format("{}: the prompt and response take {} + {} = {} tokens, more than "
                      "the context length {} (--no-truncate refuses such a record)",
                      r.where, P, R, P + R, T));
    bool cut = false;
    out.examples.push_back(instruction_example(prompt, response, o.end_of_text, T, &cut));
    out.examples.back().line = r.line;
    out.truncated += cut ? 1 : 0;
  }
  return out;
}

std::string instruction_corpus_text(const std::string& path, const TaskOptions& o) {
  const PromptTemplate tmpl = PromptTemplate::parse(o.prompt_template, "the prompt template");
  std::string text;
  for (const InstructionRecord& r : read_records(path)) {  // each example's text, then a line break
    text += tmpl.format(r.instruction, r.input);
    text += r.output;
    text += '\n';
  }
  return text;
}

}  // namespace data
