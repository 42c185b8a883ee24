#pragma once
// Internal to interop/: a tokenizer as GGUF's tokenizer.ggml.* keys and back (gguf.h says
// which keys and what they hold).
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "data/chat_format.h"
#include "interop/gguf_format.h"
#include "io/checkpoint.h"

namespace interop {

// Appends the tokenizer's keys to file; a tokenizer GGUF cannot hold (char, a split pattern
// llama.cpp has no pre-tokenizer for, a vocabulary of another size than the model's) is an
// InteropError saying why. The ids a fine-tuning added past a byte-level tokenizer's
// vocabulary (a chat format's special tokens, instruct's end of text) become control tokens
// of their text; bos, eos and eot name the end of text or, with a chat format, eos and eot
// its end of turn, and tokenizer.chat_template is the format's template.
void add_tokenizer_keys(const io::TokenizerSection& section, int64_t vocab_size,
                        std::optional<data::ChatFormat> chat_format, gguf::File& file);

// The tokenizer the keys describe (nullopt when there is no tokenizer.ggml.model); every key
// it reads goes into used, what it cannot keep into dropped. Errors name the file and the key.
std::optional<io::TokenizerSection> read_tokenizer_keys(const gguf::File& file, int64_t vocab_size,
                                                        const std::string& source,
                                                        std::set<std::string>& used,
                                                        std::vector<std::string>& dropped);

}  // namespace interop
