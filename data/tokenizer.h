#pragma once
// Tokenizers map text to ids and back. CharTokenizer is docs/model.md's: the distinct code
// points of the training text, sorted, id = rank. ByteTokenizer: the 256 byte values,
// total on any input.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int64_t> encode(const std::string& utf8) const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::string type() const = 0;  // as stored in /tokenizer's `type` attribute
};

class CharTokenizer : public Tokenizer {
 public:
  // code points strictly ascending and valid (not surrogates, <= U+10FFFF)
  explicit CharTokenizer(std::vector<uint32_t> code_points);
  static CharTokenizer from_text(const std::string& utf8);

  // An unknown character is an error naming it and its position, unless a replacement
  // (a code point of the vocabulary) is set.
  void set_replacement(std::optional<uint32_t> code_point);
  bool has_replacement() const { return replacement_.has_value(); }
  std::optional<int64_t> replacement_id() const { return replacement_; }
  std::vector<int64_t> encode(const std::string& utf8) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.size()); }
  std::string type() const override { return "char"; }
  const std::vector<uint32_t>& code_points() const { return vocab_; }

 private:
  int64_t id_of(uint32_t cp) const;  // -1 when absent
  std::vector<uint32_t> vocab_;
  std::vector<int32_t> ascii_;  // fast path for code points < 128
  std::optional<int64_t> replacement_;
};

class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int64_t> encode(const std::string& utf8) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return 256; }
  std::string type() const override { return "byte"; }
};

}  // namespace data
