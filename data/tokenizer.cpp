#include "data/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <stdexcept>

#include "base/utf8.h"

namespace data {

CharTokenizer::CharTokenizer(std::vector<uint32_t> code_points) : vocab_(std::move(code_points)) {
  for (size_t i = 0; i < vocab_.size(); ++i) {
    const uint32_t cp = vocab_[i];
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      throw std::invalid_argument(
          fmt::format("char tokenizer: entry {} (U+{:X}) is not a valid code point", i, cp));
    if (i > 0 && cp <= vocab_[i - 1])
      throw std::invalid_argument(fmt::format(
          "char tokenizer: vocabulary not strictly ascending at entry {} (U+{:04X} after U+{:04X})",
          i, cp, vocab_[i - 1]));
  }
  ascii_.assign(128, -1);
  for (size_t i = 0; i < vocab_.size() && vocab_[i] < 128; ++i)
    ascii_[vocab_[i]] = static_cast<int32_t>(i);
}

CharTokenizer CharTokenizer::from_text(const std::string& utf8) {
  std::vector<uint32_t> cps = base::utf8_decode(utf8);
  std::set<uint32_t> distinct(cps.begin(), cps.end());
  return CharTokenizer(std::vector<uint32_t>(distinct.begin(), distinct.end()));
}

int64_t CharTokenizer::id_of(uint32_t cp) const {
  if (cp < 128) return ascii_[cp];
  auto it = std::lower_bound(vocab_.begin(), vocab_.end(), cp);
  return it != vocab_.end() && *it == cp ? it - vocab_.begin() : -1;
}

void CharTokenizer::set_replacement(std::optional<uint32_t> cp) {
  if (!cp) {
    replacement_.reset();
    return;
  }
  const int64_t id = id_of(*cp);
  if (id < 0)
    throw std::invalid_argument(fmt::format(
        "char tokenizer: replacement {} is not in the vocabulary", base::describe_code_point(*cp)));
  replacement_ = id;
}

std::vector<int64_t> CharTokenizer::encode(const std::string& utf8) const {
  std::vector<uint32_t> cps = base::utf8_decode(utf8);
  std::vector<int64_t> ids;
  ids.reserve(cps.size());
  int64_t line = 1, column = 1;
  for (size_t i = 0; i < cps.size(); ++i) {
    int64_t id = id_of(cps[i]);
    if (id < 0) {
      if (!replacement_)
        throw std::invalid_argument(fmt::format(
            "character {} at position {} (line {}, column {}) is not in the tokenizer's vocabulary",
            base::describe_code_point(cps[i]), i, line, column));
      id = *replacement_;
    }
    ids.push_back(id);
    if (cps[i] == '\n')
      ++line, column = 1;
    else
      ++column;
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size())
      throw std::out_of_range(
          fmt::format("char tokenizer: id {} at position {} is outside the vocabulary of {}",
                      ids[i], i, vocab_size()));
    base::utf8_append(out, vocab_[ids[i]]);
  }
  return out;
}

std::vector<int64_t> ByteTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == 256 && end_of_text_ == EndOfText::reserved) {
      out += kEndOfTextToken;
      continue;
    }
    if (ids[i] < 0 || ids[i] > 255)
      throw std::out_of_range(fmt::format(
          "byte tokenizer: id {} at position {} is not {}", ids[i], i,
          end_of_text_ == EndOfText::reserved ? "a byte or <|endoftext|> (256)" : "a byte"));
    out += static_cast<char>(ids[i]);
  }
  return out;
}

}  // namespace data
