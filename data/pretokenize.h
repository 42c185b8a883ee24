#pragma once
// Pre-tokenization: cutting UTF-8 text into the pieces a BPE tokenizer merges within
// (GPT-4's split pattern or GPT-2's).
//
//   data::SplitPattern pattern(std::string(data::kGpt4SplitPattern));  // PCRE2, JIT, once
//   data::PieceMatcher matcher(pattern);                               // one per thread
//   for (size_t pos = 0; pos < text.size();) {
//     const size_t end = matcher.piece_end(text, pos);                 // [pos, end) is a piece
//     ...
//     pos = end;
//   }
//
// Every byte of the text lands in exactly one piece, in order. A match is tried where each
// piece starts (anchored there, never empty); where one matches, the match is the piece.
// Where none does, the bytes up to the next place one does, which the pattern skips, are a
// piece of their own, so a pattern that misses some characters loses nothing (an attempt
// that had to look past its first window before failing skips what it looked at: the cost
// of a failed attempt is then paid by the bytes it skips). Real patterns skip nothing.
// Pieces never cut a UTF-8 character. Text that arrives in chunks is cut into the same
// pieces by PieceStream.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace data {

// The split pattern of GPT-4's cl100k_base: contractions, words with one leading
// non-letter, numbers of at most 3 digits, punctuation runs, and whitespace that keeps
// its last space for the word after it.
inline constexpr std::string_view kGpt4SplitPattern =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";

// GPT-2's (r50k_base's): lowercase contractions, a letter, number or punctuation run with one
// optional leading space, and whitespace that keeps its last space for the word after it.
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// GPT-2's pattern after tokenizers' Digits pre-tokenizer has cut every digit alone
// (SmolLM2's tokenizer.json: Digits with individual_digits, then ByteLevel's regex): a digit
// is a piece, and whitespace keeps its last space only for a word that is not a digit, as
// GPT-2's pattern does within the text between digits.
inline constexpr std::string_view kDigitsGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+)";

// A compiled split pattern (PCRE2 with UTF and Unicode properties for \w, \s, \d, JIT
// compiled when the platform allows); immutable, so threads share one.
class SplitPattern {
 public:
  // Throws std::invalid_argument naming the problem and its offset in the pattern.
  explicit SplitPattern(std::string pattern);
  const std::string& pattern() const { return pattern_; }
  // Characters a match may look back over (lookbehind, \b), kept when text is streamed.
  uint32_t max_lookbehind() const { return max_lookbehind_; }
  bool jit_compiled() const { return jit_; }

  struct Code;  // the pcre2_code, private to pretokenize.cpp

 private:
  std::string pattern_;
  std::shared_ptr<const Code> code_;
  uint32_t max_lookbehind_ = 0;
  bool jit_ = false;
  friend class PieceMatcher;
};

// Finds pieces with one pattern. Owns the PCRE2 match data and JIT stack, allocated once
// and reused for every match; one per thread.
//
// A match sees at most kMaxPieceBytes from where it starts: a piece that would be longer
// (a megabyte of spaces) is cut there, and so is one whose lookahead would look further.
// This keeps the held-back part of streamed text small, and it cuts the same way whether
// the text comes whole or in chunks. Real text has no such pieces.
//
// A split pattern comes from a file, so it may be hostile. A match first sees 1 KiB, and
// twice as much each time it runs into the end of what it sees (the pieces are those the
// whole window gives); its PCRE2 match and depth limits grow with what it sees (4 steps
// and 2 levels a byte, plus 2000 and 10000). A pattern that backtracks without end hits
// them; one that looks far past the short pieces it cuts (to the end of the text for each,
// which made encoding quadratic) is stopped once the bytes of widened windows exceed 8
// times the bytes cut plus 4 MiB. Anchored attempts keep a pattern that fails after
// scanning a run (a++b|\n on a long run of a) linear where an unanchored search from each
// byte of the run was quadratic. Both throw std::runtime_error quoting the pattern. What
// these limits cannot bound, SplitPattern refuses: a lookahead of unbounded length (it
// could scan to the end of the text for each piece, at a cost PCRE2 does not count), a
// backreference, a recursion, a callout, the extended syntax.
// GPT-2's and GPT-4's patterns stay far inside these bounds on any text.
class PieceMatcher {
 public:
  explicit PieceMatcher(const SplitPattern& pattern);
  ~PieceMatcher();
  PieceMatcher(PieceMatcher&&) noexcept;
  PieceMatcher& operator=(PieceMatcher&&) noexcept;

  static constexpr size_t kMaxPieceBytes = size_t{1} << 20;
  static constexpr size_t kNeedMore = static_cast<size_t>(-1);
  // The end of the piece that starts at `pos` (< text.size(), the start of a character)
  // of `text`, which must be valid UTF-8 (base::check_utf8; it is not checked again here). The
  // text before pos is seen by lookbehinds. With `more_may_follow`, returns kNeedMore
  // when bytes appended to text could change this piece (it reaches the end, or a
  // lookahead looked past it). Throws std::runtime_error when PCRE2 gives up (a pattern
  // that backtracks without end hits its match limit) or the pattern looks too far ahead.
  size_t piece_end(std::string_view text, size_t pos, bool more_may_follow = false);

 private:
  struct Attempt {
    int rc = 0;             // of pcre2_match
    size_t limit = 0;       // the end of the window that decided it
    size_t widened_to = 0;  // the end of the last window it ran past (0: none)
  };
  int match(std::string_view text, size_t pos, size_t limit, bool partial);
  Attempt attempt(std::string_view text, size_t q, bool more_may_follow, uint64_t& pending);
  size_t find_end(std::string_view text, size_t pos, bool more_may_follow, uint64_t& pending);
  size_t matched_end(std::string_view text, size_t pos) const;
  void check_look(uint64_t pending) const;
  struct State;
  std::unique_ptr<State> state_;
};

// The bytes of a text that arrives in chunks, held until a consumer has cut them into
// pieces. The consumer cuts `subject()` from `begin()`, calls consume(end) with the end of
// the last piece it took, and is given the rest again with the next chunk. Checks UTF-8
// as the bytes arrive (errors name the offset in the whole text); a chunk may end inside
// a character, whose first bytes wait for the next chunk.
class TextStream {
 public:
  explicit TextStream(uint32_t lookbehind_chars) : lookbehind_chars_(lookbehind_chars) {}
  // Appends a chunk; the subject then holds every complete character received.
  void add(std::string_view chunk);
  // The text is complete: an unfinished character at its end is an error.
  void finish();
  // Starts a new text (a new file): nothing of the old one is seen by the next matches.
  void reset();
  // What a matcher runs on: a few characters already consumed (the lookbehind context),
  // then the bytes not yet consumed, from begin().
  std::string_view subject() const { return std::string_view(buffer_).substr(0, complete_); }
  size_t begin() const { return begin_; }
  void consume(size_t end);  // bytes of subject() before `end` have been cut into pieces
  uint64_t bytes_added() const { return bytes_added_; }

 private:
  std::string buffer_;
  size_t begin_ = 0;     // first byte not consumed
  size_t complete_ = 0;  // end of the complete characters
  uint64_t offset_ = 0;  // of buffer_[0] in the whole text, for messages
  uint64_t bytes_added_ = 0;
  uint32_t lookbehind_chars_;
};

// Cuts a text given in chunks into exactly the pieces the whole text would give: a piece
// that more text could still change (one that reaches the end of what has arrived, or
// whose lookahead does) is held back until the next chunk or finish(). What is held back
// is less than PieceMatcher::kMaxPieceBytes plus the lookbehind context.
class PieceStream {
 public:
  using OnPiece = std::function<void(std::string_view piece)>;
  explicit PieceStream(const SplitPattern& pattern);
  void add(std::string_view chunk, const OnPiece& on_piece);
  // The text ends: the held-back bytes become pieces; the next add() starts a new text.
  void finish(const OnPiece& on_piece);
  uint64_t bytes_added() const { return bytes_added_; }

 private:
  void cut(bool more_may_follow, const OnPiece& on_piece);
  PieceMatcher matcher_;
  TextStream text_;
  uint64_t bytes_added_ = 0;
};

}  // namespace data
