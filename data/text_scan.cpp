#include "data/text_scan.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <stdexcept>

#include "base/utf8.h"

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

// The message for the bad bytes at text[i] is base::utf8_problem's, so it reads exactly
// as every other UTF-8 error of the project.
[[noreturn]] void report_invalid(std::string_view text, size_t i, uint64_t base) {
  throw TextError("invalid UTF-8: " + base::utf8_problem(text, i, base), base + i);
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
    const size_t len = base::utf8_char(p + i, n - i, cp);
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
    const size_t len = base::utf8_char(p + i, n - i, cp);
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
    const size_t len = cp < 0x80 ? 1 : base::utf8_char(p + i, n - i, cp);
    if (len == 0) report_invalid(text, i, base);
    const int32_t id = ids[cp];
    if (id < 0)
      throw TextError(fmt::format("character {} at offset {} is not in the vocabulary",
                                  base::describe_code_point(cp), base + i),
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
