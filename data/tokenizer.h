#pragma once
// Tokenizers map text to ids and back. CharTokenizer is docs/model.md's: the distinct code
// points of the training text, sorted, id = rank. ByteTokenizer: the 256 byte values,
// total on any input, and (a tokenizer made since it was reserved) <|endoftext|> at 256.
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

// attograd's own byte and bpe tokenizers reserve an end-of-text token, as GPT-2's 50256: the
// vocabulary's last id, which decodes to its text and which no text encodes to (the text
// "<|endoftext|>" is encoded as ordinary text, as the gpt2 kind and tiktoken's
// encode_ordinary do). `prepare` puts it after each document and instruct after each
// response. A tokenizer saved before it was reserved has none (`none`) and keeps its ids.
enum class EndOfText : uint8_t { none, reserved };
inline constexpr const char* kEndOfTextToken = "<|endoftext|>";

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int64_t> encode(const std::string& utf8) const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual TokenizerKind kind() const = 0;
  // The kind's name, as stored in /tokenizer's `type` attribute.
  std::string type() const { return base::choice_name(kind()); }
  // The id of the <|endoftext|> this tokenizer reserves (EndOfText: attograd's byte and bpe
  // made since; the last id), which ends each document a prepare reads; none for others.
  virtual std::optional<int64_t> reserved_end_of_text() const { return std::nullopt; }
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
  explicit ByteTokenizer(EndOfText end_of_text = EndOfText::none) : end_of_text_(end_of_text) {}
  std::vector<int64_t> encode(const std::string& utf8) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return end_of_text_ == EndOfText::reserved ? 257 : 256; }
  TokenizerKind kind() const override { return TokenizerKind::bytes; }
  EndOfText end_of_text() const { return end_of_text_; }
  std::optional<int64_t> reserved_end_of_text() const override {
    return end_of_text_ == EndOfText::reserved ? std::optional<int64_t>(256) : std::nullopt;
  }

 private:
  EndOfText end_of_text_;
};

}  // namespace data
