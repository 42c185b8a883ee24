#pragma once
// UTF-8, the one decoder of the project: every reader of text (tokenizers, prepare's fast
// loops, the report, messages that quote a file) decodes with utf8_char, and every message
// about bad UTF-8 is worded by utf8_problem. Overlong forms, surrogates, code points above
// U+10FFFF and truncated sequences are errors naming the byte offset.
//
//   std::vector<uint32_t> cps = base::utf8_decode(text);   // std::invalid_argument if bad
//   base::check_utf8(chunk, offset_in_file);                // the same, without decoding
//   std::cerr << base::printable(name_from_a_file);         // safe on a terminal
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace base {

// The length (1 to 4) of the well-formed character at p, of which `avail` bytes (at least
// 1) may be read, and its code point in cp; 0 when the bytes there are not UTF-8. Inline:
// the fast loops of data/text_scan.cpp call it for every character that is not ASCII.
inline size_t utf8_char(const unsigned char* p, size_t avail, uint32_t& cp) {
  const unsigned c = p[0];
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  size_t len;
  uint32_t min;
  if ((c & 0xE0) == 0xC0)
    len = 2, cp = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0)
    len = 3, cp = c & 0x0F, min = 0x800;
  else if ((c & 0xF8) == 0xF0)
    len = 4, cp = c & 0x07, min = 0x10000;
  else
    return 0;
  if (len > avail) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((p[k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[k] & 0x3F);
  }
  if (cp < min || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
  return len;
}

inline size_t utf8_char(std::string_view text, size_t i, uint32_t& cp) {
  return utf8_char(reinterpret_cast<const unsigned char*>(text.data()) + i, text.size() - i, cp);
}

// Why the bytes at text[i] are not a character (utf8_char gave 0), offsets counted from
// base_offset: "byte 0xFF at offset 12 cannot start a character", "the character at offset
// 3 is cut off by the end of the text", "overlong encoding at offset 7", ... *cut_off, when
// given, tells whether more bytes could still complete the character.
std::string utf8_problem(std::string_view text, size_t i, uint64_t base_offset = 0,
                         bool* cut_off = nullptr);

// Code points of a UTF-8 string; std::invalid_argument("invalid UTF-8: " + utf8_problem).
std::vector<uint32_t> utf8_decode(std::string_view text);
void utf8_append(std::string& out, uint32_t code_point);
// The bytes code_point takes in UTF-8 (1 to 4).
size_t utf8_length(uint32_t code_point);

// Throws std::invalid_argument "invalid UTF-8: ..." naming the first bad byte's offset
// (counted from base_offset: the position of `text` in a longer text). Runs at memory
// speed on mostly-ASCII text.
void check_utf8(std::string_view text, uint64_t base_offset = 0);
// The same for a text that may stop inside a character (a chunk of a stream): returns the
// length of the valid prefix, which ends before such a character; anything else invalid
// throws.
size_t check_utf8_prefix(std::string_view text, uint64_t base_offset = 0);
// The length of the longest prefix of text that does not end inside a character more
// bytes could still complete (nothing is validated: bad bytes are reported where they
// are). A text arriving in pieces is handled a prefix at a time; at most 3 bytes are held.
size_t utf8_complete_prefix(std::string_view text);

// The bytes with each maximal invalid UTF-8 sequence replaced by U+FFFD, for showing
// bytes that may stop inside a character (a decoded sample) as text.
std::string replace_invalid_utf8(std::string_view bytes);

// Text from a file (a dataset name, a config value) made safe to print on a terminal:
// control characters (C0, DEL, C1: ESC sequences could rewrite the screen or the
// window title), bidirectional overrides (which reorder what is shown) and bytes that
// are not UTF-8 are written as escapes (\n, \x1b, \u{202e}); everything else as is.
// With keep_line_breaks, newlines and tabs pass unchanged (text shown as text).
// printable() of the complete prefixes of a text, joined, is printable() of the whole.
std::string printable(std::string_view text, bool keep_line_breaks = false);
// Whether a code point is one that printable() escapes.
bool acts_on_terminal(uint32_t cp);
// "'é' (U+00E9)" for messages; characters a terminal would act on show only their U+ code.
std::string describe_code_point(uint32_t cp);

}  // namespace base
