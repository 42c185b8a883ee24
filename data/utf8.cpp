#include "data/utf8.h"

#include <fmt/format.h>

#include <stdexcept>

#include "data/text_scan.h"

namespace data {

namespace {

// The length (1-4) of the well-formed character at s[i], its code point in cp; 0 when
// the bytes there are not UTF-8, with the reason in *why when asked.
size_t decode_at(std::string_view text, size_t i, uint32_t& cp, std::string* why) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  const unsigned char c = s[i];
  size_t len;
  uint32_t min;
  if (c < 0x80) {
    len = 1;
    cp = c;
    min = 0;
  } else if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
    min = 0x10000;
  } else {
    if (why) *why = fmt::format("byte 0x{:02X} at offset {} cannot start a character", c, i);
    return 0;
  }
  if (i + len > n) {
    if (why) *why = fmt::format("the character at offset {} is cut off by the end of the text", i);
    return 0;
  }
  for (size_t k = 1; k < len; ++k) {
    if ((s[i + k] & 0xC0) != 0x80) {
      if (why)
        *why =
            fmt::format("byte 0x{:02X} at offset {} is not a continuation byte", s[i + k], i + k);
      return 0;
    }
    cp = (cp << 6) | (s[i + k] & 0x3F);
  }
  if (cp < min) {
    if (why) *why = fmt::format("overlong encoding at offset {}", i);
    return 0;
  }
  if (cp >= 0xD800 && cp <= 0xDFFF) {
    if (why) *why = fmt::format("surrogate U+{:04X} at offset {}", cp, i);
    return 0;
  }
  if (cp > 0x10FFFF) {
    if (why) *why = fmt::format("U+{:X} beyond U+10FFFF at offset {}", cp, i);
    return 0;
  }
  return len;
}

}  // namespace

std::vector<uint32_t> utf8_decode(const std::string& text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  std::string why;
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t len = decode_at(text, i, cp, &why);
    if (len == 0) throw std::invalid_argument("invalid UTF-8: " + why);
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

bool acts_on_terminal(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200E || cp == 0x200F || cp == 0x061C;
}

std::string printable(std::string_view text, bool keep_line_breaks) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t len = decode_at(text, i, cp, nullptr);
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

size_t utf8_complete_prefix(std::string_view text) {
  return detail::complete_prefix(text);
}

std::string describe_code_point(uint32_t cp) {
  if (acts_on_terminal(cp)) return fmt::format("U+{:04X}", cp);
  std::string s = "'";
  utf8_append(s, cp);
  return s + fmt::format("' (U+{:04X})", cp);
}

}  // namespace data
