#include "base/utf8.h"

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

namespace base {

std::string utf8_problem(std::string_view text, size_t i, uint64_t base_offset, bool* cut_off) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const unsigned c = s[i];
  const uint64_t at = base_offset + i;
  if (cut_off) *cut_off = false;
  const size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
  if (c < 0x80 || len == 0)
    return fmt::format("byte 0x{:02X} at offset {} cannot start a character", c, at);
  if (i + len > text.size()) {
    if (cut_off) *cut_off = true;
    return fmt::format("the character at offset {} is cut off by the end of the text", at);
  }
  uint32_t cp = c & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    if ((s[i + k] & 0xC0) != 0x80)
      return fmt::format("byte 0x{:02X} at offset {} is not a continuation byte", s[i + k], at + k);
    cp = (cp << 6) | (s[i + k] & 0x3F);
  }
  const uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
  if (cp < min) return fmt::format("overlong encoding at offset {}", at);
  if (cp >= 0xD800 && cp <= 0xDFFF) return fmt::format("surrogate U+{:04X} at offset {}", cp, at);
  return fmt::format("U+{:X} beyond U+10FFFF at offset {}", cp, at);
}

std::vector<uint32_t> utf8_decode(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t len = utf8_char(text, i, cp);
    if (len == 0) throw std::invalid_argument("invalid UTF-8: " + utf8_problem(text, i));
    out.push_back(cp);
    i += len;
  }
  return out;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t utf8_length(uint32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

namespace {

// The length of the valid prefix of text: all of it, or (with allow_cut_off) up to a
// character the end cuts off. Anything else invalid throws.
size_t valid_prefix(std::string_view text, uint64_t base_offset, bool allow_cut_off) {
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // ASCII eight bytes at a time: most text is mostly ASCII
    while (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, text.data() + i, 8);
      if (word & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    uint32_t cp = 0;
    const size_t len = utf8_char(text, i, cp);
    if (len == 0) {
      bool cut_off = false;
      const std::string why = utf8_problem(text, i, base_offset, &cut_off);
      if (cut_off && allow_cut_off) return i;
      throw std::invalid_argument("invalid UTF-8: " + why);
    }
    i += len;
  }
  return n;
}

}  // namespace

void check_utf8(std::string_view text, uint64_t base_offset) {
  valid_prefix(text, base_offset, false);
}

size_t check_utf8_prefix(std::string_view text, uint64_t base_offset) {
  return valid_prefix(text, base_offset, true);
}

size_t utf8_complete_prefix(std::string_view bytes) {
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(bytes[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return len > back ? n - back : n;
  }
  return n;  // no lead byte in the last four: invalid, and reported where it is
}

std::string replace_invalid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    uint32_t cp = 0;
    if (const size_t len = utf8_char(bytes, i, cp); len > 0) {
      out.append(bytes.substr(i, len));
      i += len;
      continue;
    }
    // one U+FFFD for the bad byte and the continuation bytes that follow it
    out += "\xEF\xBF\xBD";
    do ++i;
    while (i < bytes.size() && (static_cast<unsigned char>(bytes[i]) & 0xC0) == 0x80);
  }
  return out;
}

bool acts_on_terminal(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200E || cp == 0x200F || cp == 0x061C;
}

std::string printable(std::string_view text, bool keep_line_breaks) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t len = utf8_char(text, i, cp);
    if (len == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i]));
      ++i;
      continue;
    }
    if (!acts_on_terminal(cp) || (keep_line_breaks && (cp == '\n' || cp == '\t')))
      out.append(text.substr(i, len));
    else if (cp == '\n')
      out += "\\n";
    else if (cp == '\t')
      out += "\\t";
    else if (cp == '\r')
      out += "\\r";
    else if (cp < 0x80)
      out += fmt::format("\\x{:02x}", cp);
    else
      out += fmt::format("\\u{{{:04x}}}", cp);
    i += len;
  }
  return out;
}

std::string describe_code_point(uint32_t cp) {
  if (acts_on_terminal(cp)) return fmt::format("U+{:04X}", cp);
  std::string s = "'";
  utf8_append(s, cp);
  return s + fmt::format("' (U+{:04X})", cp);
}

}  // namespace base
