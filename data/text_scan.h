#pragma once
// The fast loops of preparing a corpus (internal to the library): validating UTF-8 while
// counting characters and collecting the distinct code points, and encoding characters to
// ids. Text is mostly ASCII, so both take 32 (or 8) bytes at a time while no byte has its
// top bit set, and decode one character at a time otherwise (base::utf8_char). Invalid
// UTF-8 is reported in base::utf8_problem's words: offsets count from `base`.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace data::detail {

// Bytes of a text refused (invalid UTF-8, a character outside the vocabulary), with the
// offset (from `base`) of the character, so that a reader can say where in its file.
struct TextError : std::invalid_argument {
  TextError(const std::string& what, uint64_t at) : std::invalid_argument(what), offset(at) {}
  uint64_t offset;
};

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

// The characters of a text given in pieces: how many, and which (the char tokenizer's
// vocabulary is the distinct code points of the corpus).
class CharCollector {
 public:
  // Validates `text` as UTF-8 and adds its characters. Throws TextError ("invalid
  // UTF-8: ...") naming the first bad byte's offset + base.
  void add(std::string_view text, uint64_t base);
  uint64_t chars() const { return chars_; }
  std::vector<uint32_t> distinct_code_points() const;

 private:
  uint64_t chars_ = 0;
  uint8_t ascii_seen_[128] = {};  // folded into code_points_ by distinct_code_points()
  CodePointSet code_points_;      // the non-ASCII ones
};

// Validates `text` as UTF-8 and returns its number of characters. Throws TextError
// ("invalid UTF-8: ...") naming the first bad byte's offset + base.
uint64_t count_utf8(std::string_view text, uint64_t base);

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
