#pragma once
// A tokenizer as a checkpoint's /tokenizer group holds it, and back.
//
//   io::Checkpoint ckpt = io::load_checkpoint("run.h5");
//   auto tok = io::make_tokenizer(ckpt.tokenizer);   // the run's own vocabulary
//   ckpt.tokenizer = io::tokenizer_section(*tok);
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "io/checkpoint.h"

namespace io {

// The tokenizer a section describes; an unknown type is an error naming it, and so are bpe
// merges or a pattern that BpeTokenizer refuses (and what Gpt2Tokenizer refuses for gpt2)
// (std::invalid_argument; a loaded checkpoint was checked on load).
std::unique_ptr<data::Tokenizer> make_tokenizer(const TokenizerSection& section);
// The kind the section's type names (none: a checkpoint without a tokenizer); another type
// is a std::invalid_argument naming it (a loaded checkpoint's was checked on load).
data::TokenizerKind tokenizer_kind(const TokenizerSection& section);
TokenizerSection tokenizer_section(const data::Tokenizer& tok);

// gpt2's special tokens as /tokenizer's `special_tokens` attribute holds them: a JSON array
// of strings (ASCII, escaped), at most kMaxSpecialTokensJsonBytes; parsing refuses anything
// else (std::runtime_error saying what).
inline constexpr size_t kMaxSpecialTokensJsonBytes = size_t{1} << 20;
std::string special_tokens_json(const std::vector<std::string>& tokens);
std::vector<std::string> parse_special_tokens_json(const std::string& json);

namespace detail {
// The tokenizer section's items (its rows in io/read_protocol.h's layout) in a
// TokenizerSection, and back: what the writer writes, the reader sends and the builder keeps.
// Whether t holds something in the row (a tokenizer of another type holds nothing there).
bool tokenizer_holds(const TokenizerSection& t, size_t row);
// A text row: as the file holds it, or as the reader's stream carries it (the special
// tokens as compact UTF-8 JSON, never longer than the file's text they were parsed from).
enum class TextFor : uint8_t { file, stream };
std::string tokenizer_text(const TokenizerSection& t, size_t row, TextFor text_for);
// A dataset row: its values, and its dims in `dims`.
std::vector<uint64_t> tokenizer_integers(const TokenizerSection& t, size_t row,
                                         std::vector<uint64_t>& dims);
// Sets a row from what the stream carried; std::runtime_error when the special tokens are
// not a JSON array of strings.
void set_tokenizer_text(TokenizerSection& t, size_t row, const std::string& text);
void set_tokenizer_integers(TokenizerSection& t, size_t row, const std::vector<uint64_t>& values);
// The items of t in its rows' order, each a text row's text or a dataset row's values and
// dims: those a file of t's type holds, and with also_misplaced any other that t holds
// something in (which the builder refuses). The writer and the reader's stream both walk it.
void for_each_tokenizer_item(
    const TokenizerSection& t, TextFor text_for, bool also_misplaced,
    const std::function<void(size_t row, const std::string& text)>& on_text,
    const std::function<void(size_t row, const std::vector<uint64_t>& dims,
                             const std::vector<uint64_t>& values)>& on_integers);
}  // namespace detail

}  // namespace io
