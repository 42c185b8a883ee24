#include "data/utf8.h"

#include <fmt/format.h>

#include <stdexcept>

namespace data {

std::vector<uint32_t> utf8_decode(const std::string& text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    int len;
    uint32_t cp, min;
    if (c < 0x80) { len = 1; cp = c; min = 0; }
    else if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
    else throw std::invalid_argument(fmt::format("invalid UTF-8: byte 0x{:02X} at offset {} cannot start a character", c, i));
    if (i + len > n)
      throw std::invalid_argument(fmt::format("invalid UTF-8: the character at offset {} is cut off by the end of the text", i));
    for (int k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80)
        throw std::invalid_argument(fmt::format("invalid UTF-8: byte 0x{:02X} at offset {} is not a continuation byte", s[i + k], i + k));
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < min) throw std::invalid_argument(fmt::format("invalid UTF-8: overlong encoding at offset {}", i));
    if (cp >= 0xD800 && cp <= 0xDFFF) throw std::invalid_argument(fmt::format("invalid UTF-8: surrogate U+{:04X} at offset {}", cp, i));
    if (cp > 0x10FFFF) throw std::invalid_argument(fmt::format("invalid UTF-8: U+{:X} beyond U+10FFFF at offset {}", cp, i));
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

std::string describe_code_point(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7F) return fmt::format("U+{:04X}", cp);
  std::string s = "'";
  utf8_append(s, cp);
  return s + fmt::format("' (U+{:04X})", cp);
}

}  // namespace data
