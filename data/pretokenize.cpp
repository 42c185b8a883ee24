#include "data/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include <stdexcept>
#include <utility>
#include <vector>

#include "base/utf8.h"

namespace data {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0)
    return fmt::format("PCRE2 error {}", code);
  return reinterpret_cast<const char*>(buffer);
}

// The start of the character before byte i (i > 0) of valid UTF-8.
size_t previous_char(std::string_view text, size_t i) {
  do --i;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80);
  return i;
}

size_t next_char(std::string_view text, size_t i) {
  do ++i;
  while (i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80);
  return i;
}

constexpr size_t kMaxPatternBytes = 65536;

// What a split pattern may not hold, because no limit of PCRE2's bounds what it costs: a
// lookahead of unbounded length (each piece could scan to the end of the text), a
// backreference, a recursion or subroutine call, a callout, and the extended syntax (whose
// comments would hide the rest from this check).
struct PatternScan {
  explicit PatternScan(std::string_view p) : pattern(p) {}
  std::string_view pattern;
  size_t at = 0;
  // The lookaheads' contents and offsets, for the caller to check their lengths.
  std::vector<std::pair<size_t, std::string_view>> lookaheads;
  std::vector<size_t> open;          // offsets of the open groups' '('
  std::vector<size_t> lookahead_at;  // of open lookaheads: their content's start, else npos

  [[noreturn]] void refuse(const std::string& what) const {
    throw std::invalid_argument(
        fmt::format("split pattern: {} at offset {}: encoding could take time that no limit "
                    "bounds",
                    what, at));
  }
  bool next_is(std::string_view s) const { return pattern.substr(at, s.size()) == s; }
  void run();
  void group();
  void close_group();
  void skip_class();
  void skip_escape();
  // (?1), (?-1), (?+2): a call of a numbered group
  bool numbered_call() const {
    if (!next_is("(?")) return false;
    const size_t end = pattern.find_first_not_of("0123456789+-", at + 2);
    return end > at + 2 && end < pattern.size() && pattern[end] == ')';
  }
};

void PatternScan::run() {
  while (at < pattern.size()) {
    const char c = pattern[at];
    if (c == '\\') {
      skip_escape();
    } else if (c == '[') {
      skip_class();
    } else if (c == '(') {
      group();
    } else if (c == ')') {
      close_group();
    } else {
      ++at;
    }
  }
}

void PatternScan::skip_escape() {
  const char e = at + 1 < pattern.size() ? pattern[at + 1] : '\0';
  if ((e >= '1' && e <= '9') || e == 'g' || e == 'k') refuse("a backreference");
  if (e == 'Q') {  // literal up to \E
    const size_t end = pattern.find("\\E", at + 2);
    at = end == std::string_view::npos ? pattern.size() : end + 2;
    return;
  }
  at += 2;
}

// A character class: nothing in it opens a group ("]" first is a member; "[:alpha:]" too).
void PatternScan::skip_class() {
  ++at;
  if (next_is("^")) ++at;
  if (next_is("]")) ++at;
  while (at < pattern.size() && pattern[at] != ']') {
    if (pattern[at] == '\\') {
      at += 2;
    } else if (next_is("[:")) {
      const size_t end = pattern.find(":]", at + 2);
      at = end == std::string_view::npos ? at + 1 : end + 2;
    } else {
      ++at;
    }
  }
  ++at;
}

void PatternScan::group() {
  const size_t start = at;
  size_t content = std::string_view::npos;
  static constexpr std::string_view kLookaheads[] = {
      "(?=", "(?!", "(*pla:", "(*nla:", "(*positive_lookahead:", "(*negative_lookahead:"};
  for (std::string_view l : kLookaheads)
    if (next_is(l)) content = at + l.size();
  if (next_is("(?#")) {  // a comment
    const size_t end = pattern.find(')', at);
    at = end == std::string_view::npos ? pattern.size() : end + 1;
    return;
  }
  if (next_is("(?*") || next_is("(*napla:") || next_is("(*non_atomic"))
    refuse("a non-atomic lookahead");
  if (next_is("(?C")) refuse("a callout");
  if (next_is("(?P=") || next_is("(?P>") || next_is("(?&") || next_is("(?R") || numbered_call())
    refuse("a backreference, recursion or subroutine call");
  if (next_is("(?") && content == std::string_view::npos) {  // inline options: (?i) (?x:
    const size_t end = pattern.find_first_of(":)", at + 2);
    const std::string_view options = pattern.substr(at + 2, end - (at + 2));
    if (options.find('x') != std::string_view::npos &&
        options.find_first_not_of("imnsxJU-^") == std::string_view::npos)
      refuse("the extended syntax (?x)");
  }
  open.push_back(start);
  lookahead_at.push_back(content);
  at = content == std::string_view::npos ? at + 1 : content;
}

void PatternScan::close_group() {
  if (!open.empty()) {
    if (lookahead_at.back() != std::string_view::npos)
      lookaheads.emplace_back(open.back(),
                              pattern.substr(lookahead_at.back(), at - lookahead_at.back()));
    open.pop_back();
    lookahead_at.pop_back();
  }
  ++at;
}

// A pattern that compiles may still cost what no limit bounds (PatternScan); a lookahead is
// bounded when PCRE2 takes its content as a lookbehind, which must have a fixed length.
void refuse_unbounded(const std::string& pattern, const pcre2_code* code, uint32_t options) {
  uint32_t backrefs = 0;
  pcre2_pattern_info(code, PCRE2_INFO_BACKREFMAX, &backrefs);
  PatternScan scan(pattern);
  if (backrefs > 0) scan.refuse("a backreference");
  scan.run();
  for (const auto& [offset, content] : scan.lookaheads) {
    const std::string behind = "(?<=" + std::string(content) + ")";
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* bounded = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(behind.data()), behind.size(),
                                        options, &error, &error_offset, nullptr);
    pcre2_code_free(bounded);
    if (!bounded)
      throw std::invalid_argument(fmt::format(
          "split pattern: the lookahead at offset {} can look arbitrarily far ahead ({}); a "
          "split pattern's lookaheads must have a fixed length (as GPT-2's (?!\\S)), or "
          "encoding could take time quadratic in the text",
          offset, pcre2_message(error)));
  }
}

}  // namespace

// ---- SplitPattern ----------------------------------------------------------------------

struct SplitPattern::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

SplitPattern::SplitPattern(std::string pattern) : pattern_(std::move(pattern)) {
  if (pattern_.size() > kMaxPatternBytes)
    throw std::invalid_argument(
        fmt::format("split pattern: {} bytes is longer than the limit of {}", pattern_.size(),
                    kMaxPatternBytes));
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  // \C would match one byte of a character and cut it; pieces are whole characters.
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C;
  auto code = std::make_shared<Code>();
  // Anchored when compiled (PieceMatcher matches where each piece starts): the option given
  // at match time instead would make PCRE2 leave its JIT code for the interpreter, 3x slower.
  code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                             options | PCRE2_ANCHORED, &error, &error_offset, nullptr);
  if (!code->code)
    throw std::invalid_argument(fmt::format("split pattern does not compile: {} at offset {}",
                                            pcre2_message(error), error_offset));
  refuse_unbounded(pattern_, code->code, options);
  // Without JIT (a platform PCRE2 does not support) the interpreter gives the same matches.
  jit_ = pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD) == 0;
  pcre2_pattern_info(code->code, PCRE2_INFO_MAXLOOKBEHIND, &max_lookbehind_);
  code_ = std::move(code);
}

// ---- PieceMatcher ----------------------------------------------------------------------

struct PieceMatcher::State {
  std::shared_ptr<const SplitPattern::Code> code;
  std::string pattern;  // for messages
  pcre2_match_data* match_data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  uint64_t looked = 0;    // bytes of windows that had to be widened
  uint64_t consumed = 0;  // bytes cut into pieces

  ~State() {
    pcre2_match_data_free(match_data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
  }
};

namespace {

// A match first sees this much text, and twice as much each time it runs into the end of
// what it sees, up to kMaxPieceBytes: its cost follows the text it needs, not the text left.
// Small, because an attempt that fails within it (at every byte a pattern skips) costs up
// to this much.
constexpr size_t kFirstWindow = 1024;
// What a match may spend, per byte it sees: GPT-2's and GPT-4's patterns take about one
// step per byte (backtracking over a run of spaces) and nest nothing. An attempt is made at
// every byte a pattern skips, so the fixed part is small too.
constexpr uint32_t kStepsPerByte = 4, kMinSteps = 2000;
constexpr uint32_t kDepthPerByte = 2, kMinDepth = 10000;
// Widened windows may add up to this many times the bytes cut so far, plus the slack: a
// pattern that decides each piece from the text near it (every usual one: a long piece is
// seen whole, and a run ahead of a short piece is cut next) stays far below; one that looks
// to the end of the text for every short piece (quadratic time) is stopped early.
constexpr uint64_t kLookRatio = 8, kLookSlack = uint64_t{4} * PieceMatcher::kMaxPieceBytes;

// The pattern as messages quote it: printable, its first 60 bytes.
std::string quoted_pattern(const std::string& pattern) {
  const std::string shown = base::printable(pattern.substr(0, 60));
  return fmt::format("'{}'{}", shown, pattern.size() > 60 ? "..." : "");
}

// The end of text's first `window` bytes from pos, moved back to a character start.
size_t window_end(std::string_view text, size_t pos, size_t window) {
  if (text.size() - pos <= window) return text.size();
  size_t end = pos + window;
  while ((static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return end;
}

}  // namespace

PieceMatcher::PieceMatcher(const SplitPattern& pattern) : state_(std::make_unique<State>()) {
  state_->code = pattern.code_;
  state_->pattern = pattern.pattern();
  state_->match_data = pcre2_match_data_create_from_pattern(pattern.code_->code, nullptr);
  state_->context = pcre2_match_context_create(nullptr);
  if (!state_->match_data || !state_->context) throw std::bad_alloc();
  // The default 32 KiB JIT stack is small for patterns that backtrack over long runs; it
  // grows on demand up to 1 MiB (null without JIT: the interpreter uses the heap).
  state_->jit_stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
  if (state_->jit_stack) pcre2_jit_stack_assign(state_->context, nullptr, state_->jit_stack);
}

PieceMatcher::~PieceMatcher() = default;
PieceMatcher::PieceMatcher(PieceMatcher&&) noexcept = default;
PieceMatcher& PieceMatcher::operator=(PieceMatcher&&) noexcept = default;

// One pcre2_match on text[0, limit) from pos, its steps bounded by the bytes it may see.
int PieceMatcher::match(std::string_view text, size_t pos, size_t limit, bool partial) {
  State& s = *state_;
  const size_t seen = limit - pos;
  pcre2_set_match_limit(s.context, static_cast<uint32_t>(kStepsPerByte * seen + kMinSteps));
  pcre2_set_depth_limit(s.context, static_cast<uint32_t>(kDepthPerByte * seen + kMinDepth));
  uint32_t options = PCRE2_NOTEMPTY | PCRE2_NO_UTF_CHECK;  // anchored by the compiled code
  if (partial) options |= PCRE2_PARTIAL_HARD;
  const int rc = pcre2_match(s.code->code, reinterpret_cast<PCRE2_SPTR>(text.data()), limit, pos,
                             options, s.match_data, s.context);
  if (rc < 0 && rc != PCRE2_ERROR_PARTIAL && rc != PCRE2_ERROR_NOMATCH)
    throw std::runtime_error(fmt::format(
        "split pattern {}: matching at byte {} gave up: {} (the pattern backtracks too much "
        "to cut text in linear time)",
        quoted_pattern(s.pattern), pos, pcre2_message(rc)));
  return rc;
}

// Refuses a pattern whose widened windows (those counted, plus this piece's so far) outgrow
// the text it has cut.
void PieceMatcher::check_look(uint64_t pending) const {
  const State& s = *state_;
  if (s.looked + pending > kLookRatio * s.consumed + kLookSlack)
    throw std::runtime_error(fmt::format(
        "split pattern {}: looked {} bytes ahead to cut {} bytes; a pattern that looks far past "
        "the pieces it cuts would make encoding take time quadratic in the text",
        quoted_pattern(s.pattern), s.looked + pending, s.consumed));
}

// One anchored attempt at q in the smallest window that decides it: a match, no match, or
// a partial match at the end of a window (widened, up to kMaxPieceBytes, or at the end of
// text that more may follow).
PieceMatcher::Attempt PieceMatcher::attempt(std::string_view text, size_t q, bool more_may_follow,
                                            uint64_t& pending) {
  Attempt a;
  for (size_t window = std::min(kFirstWindow, kMaxPieceBytes);; window *= 2) {
    window = std::min(window, kMaxPieceBytes);
    a.limit = window_end(text, q, window);
    const bool last = window == kMaxPieceBytes || a.limit == text.size();
    a.rc = match(text, q, a.limit, more_may_follow || a.limit < text.size());
    if (last || a.rc != PCRE2_ERROR_PARTIAL) return a;
    a.widened_to = a.limit;
    pending += a.limit - q;
    check_look(pending);
  }
}

size_t PieceMatcher::piece_end(std::string_view text, size_t pos, bool more_may_follow) {
  uint64_t pending = 0;  // the bytes of this piece's widened windows
  const size_t end = find_end(text, pos, more_may_follow, pending);
  // a piece held back for more text is looked for again then: counted once, when cut
  if (end != kNeedMore) state_->looked += pending, state_->consumed += end - pos;
  return end;
}

// Matches are anchored where each piece starts. Where none matches, the bytes up to the
// next place one does are a piece; an attempt that had to look past its first window
// before failing skips what it looked at (all but its last window), so each failed attempt
// costs about what it skips and a pattern that scans a long run from every byte of it
// (a++b|\n) stays linear.
size_t PieceMatcher::find_end(std::string_view text, size_t pos, bool more_may_follow,
                              uint64_t& pending) {
  for (size_t q = pos;;) {
    const Attempt a = attempt(text, q, more_may_follow, pending);
    if (a.rc == PCRE2_ERROR_PARTIAL) {  // undecided at the end of what it may see
      if (a.limit == text.size()) return kNeedMore;
      return q > pos ? q : a.limit;  // a piece of kMaxPieceBytes is cut there
    }
    if (a.rc >= 0) return q > pos ? q : matched_end(text, pos);
    q = std::max(next_char(text, q), a.widened_to);
    if (q >= text.size()) return more_may_follow ? kNeedMore : text.size();
    if (q - pos >= kMaxPieceBytes) return q;
  }
}

// The end of the match at pos. \K can move a match's reported start; a match that does not
// get past pos (never from a sane pattern) yields one character, so every call progresses.
size_t PieceMatcher::matched_end(std::string_view text, size_t pos) const {
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state_->match_data);
  const size_t start = ov[0], end = ov[1];
  if (end <= pos || end <= start) return next_char(text, pos);
  return end;
}

// ---- TextStream ------------------------------------------------------------------------

void TextStream::add(std::string_view chunk) {
  buffer_.append(chunk);
  bytes_added_ += chunk.size();
  const std::string_view rest = std::string_view(buffer_).substr(complete_);
  complete_ += base::check_utf8_prefix(rest, offset_ + complete_);
}

void TextStream::finish() {
  const std::string_view rest = std::string_view(buffer_).substr(complete_);
  base::check_utf8(rest, offset_ + complete_);
  complete_ += rest.size();
}

void TextStream::reset() {
  buffer_.clear();
  begin_ = complete_ = 0;
  offset_ = 0;
}

void TextStream::consume(size_t end) {
  begin_ = end;
  // Keep the characters a lookbehind (or \b, or ^ not matching mid-text) may inspect.
  size_t drop = end;
  for (uint32_t k = 0; k < std::max<uint32_t>(lookbehind_chars_, 1) && drop > 0; ++k)
    drop = previous_char(buffer_, drop);
  // Erasing moves the held bytes; wait until that is cheap next to what was consumed.
  if (drop == 0 || drop < buffer_.size() - drop) return;
  buffer_.erase(0, drop);
  begin_ -= drop;
  complete_ -= drop;
  offset_ += drop;
}

// ---- PieceStream -----------------------------------------------------------------------

PieceStream::PieceStream(const SplitPattern& pattern)
    : matcher_(pattern), text_(pattern.max_lookbehind()) {}

void PieceStream::cut(bool more_may_follow, const OnPiece& on_piece) {
  const std::string_view subject = text_.subject();
  size_t pos = text_.begin();
  while (pos < subject.size()) {
    const size_t end = matcher_.piece_end(subject, pos, more_may_follow);
    if (end == PieceMatcher::kNeedMore) break;
    on_piece(subject.substr(pos, end - pos));
    pos = end;
  }
  text_.consume(pos);
}

void PieceStream::add(std::string_view chunk, const OnPiece& on_piece) {
  bytes_added_ += chunk.size();
  text_.add(chunk);
  cut(true, on_piece);
}

void PieceStream::finish(const OnPiece& on_piece) {
  text_.finish();
  cut(false, on_piece);
  text_.reset();
}

}  // namespace data
