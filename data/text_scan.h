#pragma once
// The fast loops of preparing a corpus (internal to the library): validating UTF-8 while
// counting characters and collecting the distinct code points, and encoding characters to
// ids. Text is mostly ASCII, so both take 32 (or 8) bytes at a time while no byte has its
// top bit set, and decode one character at a time otherwise. Invalid UTF-8 is reported
// with check_utf8's words (pretokenize.h): offsets count from `base`.
#include <cstdint>
#include <string_view>
#include <vector>

namespace data::detail {

// A set of Unicode code points: one bit each (139 KB).
class CodePointSet {
 public:
  CodePointSet() : bits_(kWords, 0) {}
  void add(uint32_t cp) { bits_[cp >> 6] |= uint64_t{1} << (cp & 63); }
  bool contains(uint32_t cp) const { return cp < kLimit && (bits_[cp >> 6] >> (cp & 63)) & 1; }
  size_t size() const;
  std::vector<uint32_t> sorted() const;

 private:
  static constexpr uint32_t kLimit = 0x110000;
  static constexpr size_t kWords = kLimit / 64;
  std::vector<uint64_t> bits_;
};

// What scan_utf8 has seen so far; code points are collected only when `collect`.
struct Utf8Scan {
  explicit Utf8Scan(bool collect) : collect(collect) {}
  bool collect;
  uint64_t chars = 0;
  uint8_t ascii_seen[128] = {};  // folded into code_points by distinct_code_points()
  CodePointSet code_points;      // the non-ASCII ones
  std::vector<uint32_t> distinct_code_points() const;
};

// The length of the longest prefix of `bytes` that does not end inside a character: a
// character whose lead byte says it runs past the end is held back (at most 3 bytes), so
// text read in chunks is cut between characters.
size_t complete_prefix(std::string_view bytes);

// Validates `text` as UTF-8 and adds its characters to `scan`. Throws
// std::invalid_argument("invalid UTF-8: ...") naming the first bad byte's offset + base.
void scan_utf8(std::string_view text, uint64_t base, Utf8Scan& scan);

// Characters of valid UTF-8 (bytes that do not continue a character).
uint64_t count_chars(std::string_view valid_utf8);
// The byte offset where character `n` of valid UTF-8 starts (text.size() when n is the
// number of characters or more).
size_t skip_chars(std::string_view valid_utf8, uint64_t n);

// The char tokenizer's mapping, code point -> id, as one table (4.4 MB) for speed.
class CharIds {
 public:
  explicit CharIds(const std::vector<uint32_t>& sorted_code_points);
  // Writes the ids of `text` to out (room for text.size() ids), returns how many. Invalid
  // UTF-8 or a character not in the vocabulary is a std::invalid_argument naming the
  // offset (+ base).
  size_t encode(std::string_view text, uint64_t base, uint16_t* out) const;
  size_t encode(std::string_view text, uint64_t base, uint32_t* out) const;

 private:
  template <class T>
  size_t encode_as(std::string_view text, uint64_t base, T* out) const;
  std::vector<int32_t> ids_;  // -1: not in the vocabulary
};

}  // namespace data::detail
