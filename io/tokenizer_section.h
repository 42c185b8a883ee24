#pragma once
// A tokenizer as a checkpoint's /tokenizer group holds it, and back.
//
//   io::Checkpoint ckpt = io::load_checkpoint("run.h5");
//   auto tok = io::make_tokenizer(ckpt.tokenizer);   // the run's own vocabulary
//   ckpt.tokenizer = io::tokenizer_section(*tok);
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
TokenizerSection tokenizer_section(const data::Tokenizer& tok);

// gpt2's special tokens as /tokenizer's `special_tokens` attribute holds them: a JSON array
// of strings (ASCII, escaped), at most kMaxSpecialTokensJsonBytes; parsing refuses anything
// else (std::runtime_error saying what).
inline constexpr size_t kMaxSpecialTokensJsonBytes = size_t{1} << 20;
std::string special_tokens_json(const std::vector<std::string>& tokens);
std::vector<std::string> parse_special_tokens_json(const std::string& json);

}  // namespace io
