#pragma once
// Tokenizers map text to ids and back. CharTokenizer is docs/model.md's: the distinct code
// points of the training text, sorted, id = rank. ByteTokenizer: the 256 byte values,
// total on any input.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/choice.h"

namespace data {

// The kinds of tokenizer, by the names `--tokenizer`, a checkpoint's /tokenizer `type`
// and a prepared folder's meta.json give them (base::ChoiceNames below). `hf` is Hugging
// Face tokenizers' byte-level BPE read from a tokenizer.json (hf_bpe.h). `none` is no
// tokenizer at all: a model imported without one.
enum class TokenizerKind { chars, bytes, bpe, gpt2, hf, none };

}  // namespace data

template <>
struct base::ChoiceNames<data::TokenizerKind> {
  static constexpr const char* key = "tokenizer";
  static constexpr std::array<std::pair<data::TokenizerKind, const char*>, 6> rows = {
      {{data::TokenizerKind::chars, "char"},
       {data::TokenizerKind::bytes, "byte"},
       {data::TokenizerKind::bpe, "bpe"},
       {data::TokenizerKind::gpt2, "gpt2"},
       {data::TokenizerKind::hf, "hf"},
       {data::TokenizerKind::none, "none"}}};
};

namespace data {

// bpe, gpt2 and hf: ids made by merges of bytes (a split pattern, merges), whose count the
// text does not fix.
inline bool encodes_by_merges(TokenizerKind kind) {
  return kind == TokenizerKind::bpe || kind == TokenizerKind::gpt2 || kind == TokenizerKind::hf;
}

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int64_t> encode(const std::string& utf8) const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual TokenizerKind kind() const = 0;
  // The kind's name, as stored in /tokenizer's `type` attribute.
  std::string type() const { return base::choice_name(kind()); }
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
  TokenizerKind kind() const override { return TokenizerKind::chars; }
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
  TokenizerKind kind() const override { return TokenizerKind::bytes; }
};

}  // namespace data
