#pragma once
// Hugging Face tokenizers' byte-level BPE as a tokenizer.json states it (Llama 3, Qwen2 and
// Qwen3, SmolLM2, GPT-2): kind "hf". Encoding follows tokenizers' encode step by step:
//   1. added tokens that are not `normalized` are found in the text (AddedTokenMatcher);
//   2. the text between them is normalized (NFC, or left as it is);
//   3. the `normalized` added tokens are found in that;
//   4. what is left is cut by the split pattern and each piece byte-level BPE encoded (with
//      ignore_merges, a piece that is a token of the vocabulary is that token).
// encode() gives those ids; with_template() adds what the post-processor adds around one
// text (Llama 3's <|begin_of_text|>), as tokenizers' encode(text) does by default.
// decode() gives each token's bytes: an added token its text (its byte-level reading when
// every character of it stands for a byte, as tokenizers' ByteLevel decoder reads it).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/added_tokens.h"
#include "data/bpe.h"
#include "data/tokenizer.h"

namespace data {

enum class Normalizer { none, nfc };

struct HfBpeSpec {
  // Each id's bytes: a token of the model's vocabulary its bytes; an added token what it
  // decodes to. Every id from 0 to tokens.size() - 1 is a token.
  std::vector<std::string> tokens;
  std::vector<BpeTokenizer::Merge> merges;  // (left, right) ids, lowest rank first
  std::string split_pattern;                // PCRE2
  std::vector<AddedToken> added;
  Normalizer normalizer = Normalizer::none;
  bool ignore_merges = false;
  std::vector<uint32_t> prefix, suffix;  // the post-processor's ids around one text
};

class HfBpeTokenizer : public Tokenizer {
 public:
  static constexpr size_t kMaxAddedTokens = 1024;
  static constexpr size_t kMaxAddedTokenBytes = 256;
  static constexpr size_t kMaxTemplateIds = 16;

  // Validated (std::invalid_argument naming the token, merge or added token).
  explicit HfBpeTokenizer(HfBpeSpec spec);

  // Refuses invalid UTF-8 (std::invalid_argument naming the byte offset).
  std::vector<int64_t> encode(const std::string& utf8) const override;
  void encode_append(std::string_view utf8, std::vector<uint32_t>& out) const;
  // prefix + ids + suffix
  std::vector<int64_t> with_template(const std::vector<int64_t>& ids) const;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(spec_.tokens.size()); }
  TokenizerKind kind() const override { return TokenizerKind::hf; }

  const HfBpeSpec& spec() const { return spec_; }
  std::string_view token_bytes(uint32_t id) const { return spec_.tokens[id]; }
  const BpeTokenizer& bpe() const { return bpe_; }
  const AddedTokenMatcher& raw_matcher() const { return raw_; }
  const AddedTokenMatcher& normalized_matcher() const { return normalized_; }

 private:
  HfBpeSpec spec_;
  BpeTokenizer bpe_;
  AddedTokenMatcher raw_, normalized_;
};

// What a spec holds beyond its tokens, merges and split pattern (the normalizer,
// ignore_merges, the template's ids, the added tokens), as a checkpoint's /tokenizer keeps
// it: compact JSON, {"normalizer": "NFC" or "none", "ignore_merges": bool, "prefix": [ids],
// "suffix": [ids], "added_tokens": [{"id", "content", "special", "normalized",
// "in_vocabulary"}]}. Reading refuses anything else (std::invalid_argument naming the key).
inline constexpr size_t kMaxHfSettingsJsonBytes = size_t{2} << 20;
std::string hf_settings_json(const HfBpeSpec& spec);
void read_hf_settings(const std::string& json, HfBpeSpec& spec);

// A stream encoder (bpe.h) for an hf tokenizer: the ids encode() gives the whole text, for
// chunks that end anywhere.
std::unique_ptr<BpeStreamEncoder> make_hf_stream_encoder(const HfBpeTokenizer& tokenizer);

}  // namespace data
