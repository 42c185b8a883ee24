#pragma once
// Instruction records (the `instruct` task, docs/finetuning.md): the prompt template a
// record is formatted with, and the example a formatted record becomes. The reader of
// instruction files is data::read_instruction_examples (examples.h); `sample --instruction`
// formats its prompt with the same template.
//
//   data::PromptTemplate t = data::PromptTemplate::parse(cfg.prompt_template, "FILE");
//   std::string prompt = t.format("Reverse the word.", "cat");  // Alpaca's: ends
//                                                              // "### Response:\n"
//   data::Example e = data::instruction_example(tok.encode(prompt), tok.encode("tac"),
//                                               end_of_text, context_length, &cut);
//
// The default template is Alpaca's as the book's chapter 7 writes it (kAlpacaPreamble and
// the sections below). A template file (`train --template FILE`) is a JSON object, the
// shape of Stanford Alpaca's and alpaca-lora's templates/*.json:
//   {"prompt_input":    "... {instruction} ... {input} ...",   a record with an input
//    "prompt_no_input": "... {instruction} ...",               a record without one
//    "description": "...", "response_split": "..."}            optional, not used
// {instruction} is required in both, {input} in prompt_input (and refused in
// prompt_no_input); {{ and }} are literal braces (Python's str.format, which those files
// are written for). Any other {...}, a lone brace, another key or a missing one is an
// error naming the file and the key.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/examples.h"

namespace data {

inline constexpr std::string_view kAlpacaPreamble =
    "Below is an instruction that describes a task. Write a response that appropriately "
    "completes the request.";

// A template file is at most this long (it is stored in every checkpoint trained with it).
inline constexpr uint64_t kMaxPromptTemplateBytes = 64 * 1024;

class PromptTemplate {
 public:
  // The template of a template file's text; "" is Alpaca's. `source` names the text in
  // messages (the file, or "CHECKPOINT's prompt_template"). Throws DataError.
  static PromptTemplate parse(std::string_view text, const std::string& source);
  static PromptTemplate alpaca();

  // The prompt of a record: prompt_input when input is non-empty, else prompt_no_input.
  std::string format(std::string_view instruction, std::string_view input) const;

 private:
  // A template's pieces: literal text, or a placeholder (kInstruction, kInput).
  struct Piece {
    int field = 0;  // 0: `text` as is
    std::string text;
  };
  static constexpr int kInstruction = 1, kInput = 2;
  static std::vector<Piece> pieces(std::string_view text, const std::string& where, bool input);
  std::vector<Piece> with_input_, without_input_;
};

// A template file's text, read (at most kMaxPromptTemplateBytes) and checked: what
// RunConfig::prompt_template stores. Throws DataError naming the file.
std::string read_prompt_template_file(const std::string& path);

// The example of a record, its prompt and response tokenized separately: ids are prompt +
// response + end_of_text, cut to context_length; the target at position i is ids[i + 1]
// when that is a response token or the end-of-text, else kIgnoreTarget (the prompt is
// never a target). The last position of a sequence that fits is only an input (its target
// would follow the end-of-text), so a record fits when prompt + response <= context_length;
// a longer one loses the response's tail and the end-of-text (*truncated set). A prompt
// longer than the context keeps no target: the caller refuses that record.
Example instruction_example(std::span<const int64_t> prompt, std::span<const int64_t> response,
                            int64_t end_of_text, int64_t context_length, bool* truncated);

}  // namespace data
