// The prompt template of instruction records (instructions.h): Alpaca's, or a template
// file's two prompts with their {instruction} and {input} placeholders.
#include <fmt/format.h>

#include "base/utf8.h"
#include "data/data_error.h"
#include "data/instructions.h"
#include "data/posix_io.h"
#include "data/strict_json.h"

namespace data {

namespace {

// Alpaca's prompts, as the book's chapter 7 builds them: the preamble, the instruction, the
// input's section only when there is an input, and the response's heading.
const std::string kAlpacaWithInput =
    std::string(kAlpacaPreamble) +
    "\n\n### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n";
const std::string kAlpacaWithoutInput =
    std::string(kAlpacaPreamble) + "\n\n### Instruction:\n{instruction}\n\n### Response:\n";

// A placeholder's name as a message shows it: cut short, escaped.
std::string shown(std::string_view text) {
  return base::printable(text.size() > 40 ? std::string(text.substr(0, 37)) + "..."
                                          : std::string(text));
}

}  // namespace

// The pieces of one prompt; `where` names it ("FILE: 'prompt_input'") for messages and
// `input` says whether {input} belongs in it.
std::vector<PromptTemplate::Piece> PromptTemplate::pieces(std::string_view text,
                                                          const std::string& where, bool input) {
  std::vector<Piece> out(1);
  bool has_instruction = false, has_input = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
      out.back().text += c;  // {{ and }}: a literal brace
      ++i;
      continue;
    }
    if (c == '}')
      throw DataError(
          fmt::format("{} has a lone '}}' at offset {} (write }}}} for a brace)", where, i));
    if (c != '{') {
      out.back().text += c;
      continue;
    }
    const size_t close = text.find('}', i);
    if (close == std::string_view::npos)
      throw DataError(
          fmt::format("{} has a lone '{{' at offset {} (write {{{{ for a brace)", where, i));
    const std::string_view name = text.substr(i + 1, close - i - 1);
    const int field = name == "instruction" ? kInstruction : name == "input" ? kInput : 0;
    if (field == 0 || (field == kInput && !input))
      throw DataError(fmt::format("{} has the placeholder '{{{}}}'; {}", where, shown(name),
                                  input ? "a template knows {instruction} and {input}"
                                        : "prompt_no_input knows only {instruction}"));
    has_instruction = has_instruction || field == kInstruction;
    has_input = has_input || field == kInput;
    out.push_back(Piece{field, {}});
    out.push_back(Piece{});
    i = close;
  }
  if (!has_instruction) throw DataError(fmt::format("{} has no {{instruction}}", where));
  if (input && !has_input) throw DataError(fmt::format("{} has no {{input}}", where));
  return out;
}

PromptTemplate PromptTemplate::alpaca() {
  PromptTemplate t;
  t.with_input_ = pieces(kAlpacaWithInput, "Alpaca's template", true);
  t.without_input_ = pieces(kAlpacaWithoutInput, "Alpaca's template", false);
  return t;
}

PromptTemplate PromptTemplate::parse(std::string_view text, const std::string& source) {
  if (text.empty()) return alpaca();
  if (text.size() > kMaxPromptTemplateBytes)
    throw DataError(fmt::format("{}: a prompt template of {} bytes, more than the {} allowed",
                                source, text.size(), kMaxPromptTemplateBytes));
  const nlohmann::json j = detail::parse_strict_json(text, source);
  const detail::JsonObject o(j, source, "");
  for (const auto& [key, value] : j.items())
    if (key != "prompt_input" && key != "prompt_no_input" && key != "description" &&
        key != "response_split")
      o.fail(key,
             "is not a key of a prompt template (prompt_input, prompt_no_input, "
             "description, response_split)");
  for (const char* optional_key : {"description", "response_split"})
    if (j.contains(optional_key)) o.string(optional_key);  // when present: strings
  PromptTemplate t;
  t.with_input_ = pieces(o.string("prompt_input"), o.where("prompt_input"), true);
  t.without_input_ = pieces(o.string("prompt_no_input"), o.where("prompt_no_input"), false);
  return t;
}

std::string PromptTemplate::format(std::string_view instruction, std::string_view input) const {
  std::string out;
  for (const Piece& p : input.empty() ? without_input_ : with_input_)
    out += p.field == kInstruction ? instruction : p.field == kInput ? input : p.text;
  return out;
}

std::string read_prompt_template_file(const std::string& path) {
  const std::string name = base::printable(path);
  detail::InputFile file(path, name);
  std::string text = file.read_all(kMaxPromptTemplateBytes);
  if (text.empty()) throw DataError(fmt::format("{}: the prompt template file is empty", name));
  PromptTemplate::parse(text, name);  // checked here, where the file can be named
  return text;
}

}  // namespace data
