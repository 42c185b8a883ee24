#include "data/text_scan.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <stdexcept>

#include "data/pretokenize.h"
#include "data/utf8.h"

namespace data::detail {

namespace {

constexpr uint64_t kHighBits = 0x8080808080808080ULL;

bool ascii8(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return (w & kHighBits) == 0;
}

bool ascii32(const unsigned char* p) {
  uint64_t w[4];
  std::memcpy(w, p, 32);
  return ((w[0] | w[1] | w[2] | w[3]) & kHighBits) == 0;
}

// The length (2-4) of the well-formed character of two or more bytes at p (p[0] >= 0x80),
// its code point in cp; 0 when the bytes are not UTF-8 or run past `avail`.
size_t decode_multi(const unsigned char* p, size_t avail, uint32_t& cp) {
  const unsigned c = p[0];
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

// The message for the bad bytes at text[i] comes from check_utf8, so it reads exactly as
// every other UTF-8 error of the project.
[[noreturn]] void report_invalid(std::string_view text, size_t i, uint64_t base) {
  try {
    check_utf8(text.substr(i), base + i);
  } catch (const std::invalid_argument& e) {
    throw TextError(e.what(), base + i);
  }
  throw TextError(fmt::format("invalid UTF-8 at offset {}", base + i), base + i);
}

}  // namespace

size_t CodePointSet::size() const {
  size_t n = 0;
  for (const uint64_t w : bits_) n += static_cast<size_t>(std::popcount(w));
  return n;
}

std::vector<uint32_t> CodePointSet::sorted() const {
  std::vector<uint32_t> out;
  for (size_t w = 0; w < bits_.size(); ++w)
    for (uint64_t bits = bits_[w]; bits != 0; bits &= bits - 1)
      out.push_back(static_cast<uint32_t>(w * 64 + std::countr_zero(bits)));
  return out;
}

std::vector<uint32_t> CharCollector::distinct_code_points() const {
  CodePointSet all = code_points_;
  for (uint32_t c = 0; c < 128; ++c)
    if (ascii_seen_[c]) all.add(c);
  return all.sorted();
}

size_t complete_prefix(std::string_view bytes) {
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(bytes[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return len > back ? n - back : n;
  }
  return n;  // no lead byte in the last four: invalid, and reported where it is
}

void CharCollector::add(std::string_view text, uint64_t base) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  uint64_t chars = 0;
  size_t i = 0;
  while (i < n) {
    for (; i + 32 <= n && ascii32(p + i); i += 32, chars += 32)
      for (size_t k = 0; k < 32; ++k) ascii_seen_[p[i + k]] = 1;
    if (i >= n) break;
    ++chars;
    if (p[i] < 0x80) {
      ascii_seen_[p[i++]] = 1;
      continue;
    }
    uint32_t cp = 0;
    const size_t len = decode_multi(p + i, n - i, cp);
    if (len == 0) report_invalid(text, i, base);
    code_points_.add(cp);
    i += len;
  }
  chars_ += chars;
}

uint64_t count_utf8(std::string_view text, uint64_t base) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  uint64_t chars = 0;
  size_t i = 0;
  while (i < n) {
    for (; i + 32 <= n && ascii32(p + i); i += 32) chars += 32;
    if (i >= n) break;
    ++chars;
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t len = decode_multi(p + i, n - i, cp);
    if (len == 0) report_invalid(text, i, base);
    i += len;
  }
  return chars;
}

uint64_t count_chars(std::string_view text) {
  uint64_t n = 0;
  for (const char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

size_t skip_chars(std::string_view text, uint64_t n) {
  uint64_t seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;
    if (seen == n) return i;
    ++seen;
  }
  return text.size();
}

CharIds::CharIds(const std::vector<uint32_t>& code_points) : ids_(0x110000, -1) {
  for (size_t i = 0; i < code_points.size(); ++i) ids_.at(code_points[i]) = static_cast<int32_t>(i);
}

template <class T>
size_t CharIds::encode_as(std::string_view text, uint64_t base, T* out) const {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const int32_t* ids = ids_.data();
  const size_t n = text.size();
  size_t i = 0, j = 0;
  while (i < n) {
    for (; i + 8 <= n && ascii8(p + i); i += 8, j += 8) {
      int32_t unknown = 0;  // the sign bit of any id that is -1
      for (size_t k = 0; k < 8; ++k) {
        const int32_t id = ids[p[i + k]];
        unknown |= id;
        out[j + k] = static_cast<T>(id);
      }
      if (unknown < 0) break;  // the character-by-character path below names it
    }
    if (i >= n) break;
    uint32_t cp = p[i];
    const size_t len = cp < 0x80 ? 1 : decode_multi(p + i, n - i, cp);
    if (len == 0) report_invalid(text, i, base);
    const int32_t id = ids[cp];
    if (id < 0)
      throw TextError(fmt::format("character {} at offset {} is not in the vocabulary",
                                  describe_code_point(cp), base + i),
                      base + i);
    out[j++] = static_cast<T>(id);
    i += len;
  }
  return j;
}

size_t CharIds::encode(std::string_view text, uint64_t base, uint16_t* out) const {
  return encode_as(text, base, out);
}

size_t CharIds::encode(std::string_view text, uint64_t base, uint32_t* out) const {
  return encode_as(text, base, out);
}

}  // namespace data::detail
