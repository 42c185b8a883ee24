#pragma once
// Byte-level BPE: tokens 0-255 are the bytes, merge i makes token 256 + i from a pair of
// earlier tokens, and a tokenizer trained since it was reserved has <|endoftext|> after them
// (tokenizer.h's EndOfText: id 256 + M, never made by a merge nor by encode). Text is first cut
// into pieces by a split pattern (pretokenize.h; GPT-4's by default) and merges never cross pieces,
// so every string of UTF-8 round-trips exactly and no character is ever unknown.
//
//   data::BpeTrainer trainer;                          // GPT-4 split pattern
//   for (const std::string& chunk : chunks) trainer.add_text(chunk);  // cut anywhere
//   data::BpeTokenizer tok = trainer.train(4096, data::EndOfText::reserved);  // 3839 merges
//   std::vector<int64_t> ids = tok.encode("Hello world");
//   assert(tok.decode(ids) == "Hello world");
//   data::BpeTokenizer same(tok.merges(), tok.split_pattern());  // what a file stores
//
// Training (bpe_train.cpp) is the incremental algorithm of production tokenizers: count
// the distinct pieces once, then each merge touches only the pieces containing its pair.
// The pair merged next is the most frequent one; ties go to the smallest (left, right)
// ids. Encoding applies, within each piece, the lowest-numbered merge among adjacent
// pairs (the leftmost if it occurs twice) until none applies: the tokens the merge rules
// define, for any text, whatever produced the merges.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/pretokenize.h"
#include "data/tokenizer.h"

namespace data {

class BpeTokenizer : public Tokenizer {
 public:
  using Merge = std::pair<uint32_t, uint32_t>;  // (left, right) token ids
  // Longest token (in bytes) and most bytes over all tokens a tokenizer may define: merges
  // can double a token's length each time, and a hostile file must not exhaust memory.
  static constexpr size_t kMaxTokenBytes = 16384;
  static constexpr size_t kMaxTotalTokenBytes = size_t{256} << 20;

  // Validates everything (merges come from files): each merge's parts must be tokens that
  // exist before it (ids < 256 + i), no pair may repeat, tokens respect the limits above,
  // and the pattern must compile. Errors (std::invalid_argument) name the merge index.
  explicit BpeTokenizer(std::vector<Merge> merges,
                        std::string split_pattern = std::string(kGpt4SplitPattern),
                        EndOfText end_of_text = EndOfText::none);

  // A vocabulary numbered otherwise (Hugging Face's tokenizer.json: hf_bpe.h). Token i has
  // the bytes tokens[i], every single byte among them; merge r joins (left, right) into the
  // token whose bytes are theirs joined, wherever its id is (several merges may make one
  // token, as in Llama 3's file); with whole_tokens, a piece that is itself a token is that
  // token, unmerged (tokenizers' ignore_merges). Ids marked `outside` (added tokens that
  // are not in the model's vocabulary) are never made by a merge nor matched whole.
  // Validated as the constructor above validates; errors name the token or merge.
  struct OwnVocabulary {
    std::vector<std::string> tokens;
    std::vector<bool> outside;  // empty, or one flag a token
    std::vector<Merge> merges;
    bool whole_tokens = false;
  };
  static BpeTokenizer from_vocabulary(OwnVocabulary vocabulary, std::string split_pattern);

  // One-shot training on a whole text (see BpeTrainer for text in chunks).
  static BpeTokenizer train(std::string_view text, int64_t vocab_size,
                            std::string split_pattern = std::string(kGpt4SplitPattern),
                            EndOfText end_of_text = EndOfText::none);

  // Refuses invalid UTF-8 (std::invalid_argument naming the byte offset). Texts over a
  // megabyte are split over OpenMP's threads (ag::set_num_threads), with the same result.
  // Encoding and decoding change nothing: threads may share one tokenizer.
  std::vector<int64_t> encode(const std::string& utf8) const override;
  // Appends the ids of the text to `out` (no int64 copy; what a prepared corpus stores).
  void encode_append(std::string_view utf8, std::vector<uint32_t>& out) const;
  // The bytes of the tokens, exactly: ids that stop inside a character (a model's sample
  // may) give bytes that are not UTF-8 there; nothing is replaced, so decode(encode(s)) == s
  // always and joining the decodes of consecutive slices equals decoding the whole.
  // base::replace_invalid_utf8() makes such bytes printable. An id outside the
  // vocabulary is an error (std::out_of_range) naming it and its position.
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(token_offset_.size()) - 1; }
  TokenizerKind kind() const override { return TokenizerKind::bpe; }

  const std::vector<Merge>& merges() const { return merges_; }
  const std::string& split_pattern() const { return pattern_.pattern(); }
  // The bytes of a token (<|endoftext|>'s: its text); id < vocab_size().
  std::string_view token_bytes(uint32_t id) const;
  EndOfText end_of_text() const { return end_of_text_; }
  std::optional<int64_t> reserved_end_of_text() const override {
    if (end_of_text_ != EndOfText::reserved) return std::nullopt;
    return vocab_size() - 1;
  }

  // The rank (merge index) of the pair, or kNoMerge.
  static constexpr uint32_t kNoMerge = UINT32_MAX;
  uint32_t merge_rank(uint32_t left, uint32_t right) const;

 private:
  friend class BpeStreamEncoder;
  struct Scratch;
  struct Chunk;
  struct OwnTag {};
  BpeTokenizer(OwnTag, OwnVocabulary& vocabulary, std::string split_pattern);
  void build_tables();
  void add_rank(Merge merge, uint32_t rank, size_t index_for_message);
  void build_own_tables(OwnVocabulary& v);
  uint32_t whole_token(std::string_view piece) const;  // kNoMerge when none
  static std::vector<Chunk> plan_chunks(std::string_view subject, size_t begin, int threads);
  size_t encode_pieces(std::string_view subject, size_t begin, size_t stop, bool more_may_follow,
                       Scratch& scratch, std::vector<uint32_t>& out) const;
  size_t encode_text(std::string_view subject, size_t begin, bool more_may_follow, Scratch& scratch,
                     std::vector<uint32_t>& out) const;
  void encode_piece(std::string_view piece, Scratch& scratch, std::vector<uint32_t>& out) const;
  void encode_short(std::string_view piece, Scratch& scratch, std::vector<uint32_t>& out) const;
  void encode_long(std::string_view piece, Scratch& scratch, std::vector<uint32_t>& out) const;

  std::vector<Merge> merges_;
  SplitPattern pattern_;
  EndOfText end_of_text_ = EndOfText::none;
  // Open addressing table of merge ranks keyed by the pair (left << 32 | right).
  std::vector<uint64_t> rank_keys_;
  std::vector<uint32_t> rank_values_;
  uint64_t rank_mask_ = 0;
  std::string token_bytes_;             // every token's bytes, one after another
  std::vector<uint64_t> token_offset_;  // token i is [offset[i], offset[i + 1])
  // What a vocabulary numbered otherwise changes (identities for attograd's own): the id of
  // each byte's token, the token merge r makes, and the tokens a piece may be whole.
  std::array<uint32_t, 256> byte_id_{};
  std::vector<uint32_t> merge_result_;
  bool whole_tokens_ = false;
  std::vector<uint32_t> whole_ids_;  // open addressing by the bytes' hash (kNoMerge: empty)
  uint64_t whole_mask_ = 0;
};

// Encodes a text that arrives in chunks (a file read piece by piece) into exactly the ids
// encode() gives for the whole text, holding back the bytes more text could change (see
// PieceStream). The tokenizer must outlive it.
class BpeStreamEncoder {
 public:
  explicit BpeStreamEncoder(const BpeTokenizer& tokenizer);
  // The same ids for a vocabulary that numbers its byte tokens otherwise (GPT-2's,
  // gpt2_tokenizer.h): byte b's token is id_of_byte[b]; the table must outlive the encoder.
  BpeStreamEncoder(const BpeTokenizer& tokenizer, const std::array<uint32_t, 256>& id_of_byte);
  virtual ~BpeStreamEncoder();
  // Appends the ids of the pieces complete so far; chunks may end anywhere.
  // (An hf tokenizer's encoder, hf_bpe.h, first finds its added tokens and normalizes.)
  virtual void add(std::string_view chunk, std::vector<uint32_t>& out);
  // The text ends; appends the ids of the rest. The next add() starts a new text.
  virtual void finish(std::vector<uint32_t>& out);

 private:
  void cut(bool more_may_follow, std::vector<uint32_t>& out);
  const BpeTokenizer& tokenizer_;
  const std::array<uint32_t, 256>* id_of_byte_ = nullptr;
  std::unique_ptr<BpeTokenizer::Scratch> scratch_;  // match data and cache, kept between chunks
  TextStream text_;
};

struct PieceCountTable;  // bpe_train.cpp

// Learns BPE merges from text given in chunks. Memory is bounded by the number of distinct
// pieces (a count per piece), not by the length of the text.
class BpeTrainer {
 public:
  explicit BpeTrainer(std::string split_pattern = std::string(kGpt4SplitPattern));
  ~BpeTrainer();
  BpeTrainer(BpeTrainer&&) noexcept;
  BpeTrainer& operator=(BpeTrainer&&) noexcept;

  // The next bytes of the current text. A chunk may end anywhere, even inside a character:
  // a piece more text could change is held back (PieceStream), so the pieces counted are
  // those of the whole text. Invalid UTF-8 is refused naming its offset in the text.
  void add_text(std::string_view chunk);
  // The current text ends here (the end of a file): its held-back bytes are counted, and
  // no piece joins it with the next text.
  void end_text();
  // Counts `count` (> 0) occurrences of one piece directly, e.g. counts gathered elsewhere.
  void add_piece(std::string_view piece, int64_t count = 1);

  // Learns vocab_size - 256 merges from everything added (ends the current text first), one
  // fewer with <|endoftext|> reserved (the last id); fewer when the pieces run out of pairs
  // (a pair whose token would pass kMaxTokenBytes is never merged). May be called again
  // after adding more. vocab_size must be in [256, 2^31) (257 with <|endoftext|>).
  BpeTokenizer train(int64_t vocab_size, EndOfText end_of_text = EndOfText::none);

  uint64_t bytes_added() const;
  size_t distinct_pieces() const;
  size_t memory_bytes() const;  // of the piece counts

 private:
  SplitPattern pattern_;
  std::unique_ptr<PieceStream> stream_;
  std::unique_ptr<PieceCountTable> counts_;
};

}  // namespace data
