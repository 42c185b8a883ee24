#pragma once
// Unicode normalization of text before it is tokenized (Qwen2's tokenizer.json asks for NFC),
// by utf8proc (Debian's libutf8proc), never by tables of our own.
#include <cstddef>
#include <string>
#include <string_view>

namespace data {

// The NFC form of valid UTF-8 (NUL bytes included); std::invalid_argument on invalid UTF-8.
std::string nfc(std::string_view utf8);

// Where text that may continue can be normalized up to: the start of its last character
// that no character after it can combine with or reorder around (combining class 0, not a
// mark, not a Hangul vowel or trailing consonant), so nfc(text[0, end)) + nfc(rest + more)
// == nfc(text + more). 0 when there is none; a character cut at the end is never passed.
size_t nfc_stable_end(std::string_view utf8);

}  // namespace data
