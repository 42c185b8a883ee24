#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace data {

// Code points of a UTF-8 string. Overlong forms, surrogates, code points above U+10FFFF
// and truncated sequences are errors naming the byte offset.
std::vector<uint32_t> utf8_decode(const std::string& text);
void utf8_append(std::string& out, uint32_t code_point);
// "é (U+00E9)" for messages; characters a terminal would act on show only their U+ code.
std::string describe_code_point(uint32_t cp);

// Text from a file (a dataset name, a config value) made safe to print on a terminal:
// control characters (C0, DEL, C1: ESC sequences could rewrite the screen or the
// window title), bidirectional overrides (which reorder what is shown) and bytes that
// are not UTF-8 are written as escapes (\n, \x1b, \u{202e}); everything else as is.
// With keep_line_breaks, newlines and tabs pass unchanged (text shown as text).
std::string printable(std::string_view text, bool keep_line_breaks = false);
// The length of the longest prefix of text that does not end inside a character more
// bytes could still complete: a text arriving in pieces (a sample's tokens may split a
// character) is printed a prefix at a time, and printable() of the prefixes joined gives
// printable() of the whole. At most 3 bytes are held back.
size_t utf8_complete_prefix(std::string_view text);
// Whether a code point is one that printable() escapes.
bool acts_on_terminal(uint32_t cp);

}  // namespace data
