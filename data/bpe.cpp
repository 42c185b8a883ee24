#include "data/bpe.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <stdexcept>
#include <unordered_map>

#include "base/utf8.h"

namespace data {

namespace {

constexpr uint64_t kEmptyKey = UINT64_MAX;  // the pair (2^32 - 1, 2^32 - 1): never a merge
constexpr uint32_t kDead = UINT32_MAX;      // a symbol merged into its left neighbour
// Pieces up to this length are merged by rescanning (fastest when short); longer ones
// (runs of spaces or letters) with a heap, so a 1 MB piece is not quadratic.
constexpr size_t kShortPiece = 128;
constexpr size_t kCachedPiece = 64;  // longer pieces rarely repeat
constexpr size_t kCacheEntries = size_t{1} << 16;
// Below this, one thread does all; above, chunks of at least kMinChunk go to the threads.
constexpr size_t kParallelBytes = size_t{1} << 20;
constexpr size_t kMinChunk = size_t{256} << 10;

uint64_t pair_key(uint32_t left, uint32_t right) {
  return (static_cast<uint64_t>(left) << 32) | right;
}

size_t slot_of(uint64_t key, uint64_t mask) {
  return static_cast<size_t>(((key * 0x9E3779B97F4A7C15ULL) >> 32) & mask);
}

SplitPattern compile_pattern(std::string pattern) {
  try {
    return SplitPattern(std::move(pattern));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("bpe tokenizer: ") + e.what());
  }
}

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// A place near `pos` to start a chunk: just after a newline that a printable ASCII
// character follows, which the usual patterns (GPT-2's, GPT-4's) never put in one piece;
// else the next character start. A chunk that starts elsewhere than a piece boundary is
// redone (encode_text), so this only has to be right most of the time.
size_t chunk_start(std::string_view text, size_t pos) {
  const size_t limit = std::min(text.size() - 1, pos + (size_t{64} << 10));
  for (size_t i = pos; i < limit; ++i)
    if (text[i] == '\n' && static_cast<unsigned char>(text[i + 1]) < 0x80 &&
        !is_ascii_space(text[i + 1]))
      return i + 1;
  while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
  return pos;
}

}  // namespace

struct BpeTokenizer::Scratch {
  explicit Scratch(const SplitPattern& pattern) : matcher(pattern) {}
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  PieceMatcher matcher;
  // piece -> its ids, as [offset, count) in cache_ids
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, Hash, std::equal_to<>> cache;
  std::vector<uint32_t> cache_ids;
  std::vector<uint32_t> symbols, ranks;
  std::vector<int32_t> prev, next;
  std::vector<uint64_t> heap;
};

struct BpeTokenizer::Chunk {
  std::vector<uint32_t> ids;
  size_t begin = 0, stop = 0, end = 0;
};

// ---- construction ----------------------------------------------------------------------

BpeTokenizer::BpeTokenizer(std::vector<Merge> merges, std::string split_pattern,
                           EndOfText end_of_text)
    : merges_(std::move(merges)),
      pattern_(compile_pattern(std::move(split_pattern))),
      end_of_text_(end_of_text) {
  if (merges_.size() > static_cast<size_t>(INT32_MAX) - 256)
    throw std::invalid_argument(fmt::format("bpe tokenizer: {} merges is more than the limit of {}",
                                            merges_.size(), INT32_MAX - 256));
  build_tables();
}

BpeTokenizer::BpeTokenizer(OwnTag, OwnVocabulary& vocabulary, std::string split_pattern)
    : pattern_(compile_pattern(std::move(split_pattern))) {
  build_own_tables(vocabulary);
  merges_ = std::move(vocabulary.merges);
}

BpeTokenizer BpeTokenizer::from_vocabulary(OwnVocabulary vocabulary, std::string split_pattern) {
  return BpeTokenizer(OwnTag{}, vocabulary, std::move(split_pattern));
}

namespace {

// An open-addressing table of `count` entries: its slots, a power of two at least twice that.
size_t table_slots(size_t count) {
  size_t capacity = 16;
  while (capacity < 2 * count) capacity *= 2;
  return capacity;
}

}  // namespace

// Merge `rank` into the rank table; a pair twice is refused.
void BpeTokenizer::add_rank(Merge merge, uint32_t rank, size_t index_for_message) {
  const auto [left, right] = merge;
  const uint64_t key = pair_key(left, right);
  size_t slot = slot_of(key, rank_mask_);
  while (rank_keys_[slot] != kEmptyKey && rank_keys_[slot] != key) slot = (slot + 1) & rank_mask_;
  if (rank_keys_[slot] == key)
    throw std::invalid_argument(fmt::format("bpe tokenizer: merge {} ({}, {}) repeats merge {}",
                                            index_for_message, left, right, rank_values_[slot]));
  rank_keys_[slot] = key;
  rank_values_[slot] = rank;
}

void BpeTokenizer::build_tables() {
  const size_t m = merges_.size();
  const size_t capacity = table_slots(m);
  rank_keys_.assign(capacity, kEmptyKey);
  rank_values_.assign(capacity, kNoMerge);
  rank_mask_ = capacity - 1;
  for (uint32_t b = 0; b < 256; ++b) byte_id_[b] = b;
  merge_result_.resize(m);
  for (size_t i = 0; i < m; ++i) merge_result_[i] = static_cast<uint32_t>(256 + i);
  token_offset_.assign(1, 0);
  token_offset_.reserve(257 + m);
  token_bytes_.clear();
  for (int b = 0; b < 256; ++b) {
    token_bytes_ += static_cast<char>(b);
    token_offset_.push_back(token_bytes_.size());
  }
  for (size_t i = 0; i < m; ++i) {
    const auto [left, right] = merges_[i];
    const uint64_t next_id = 256 + i;
    for (const uint32_t part : {left, right})
      if (part >= next_id)
        throw std::invalid_argument(fmt::format(
            "bpe tokenizer: merge {} ({}, {}) uses token {}, which does not exist before it "
            "(merge {} may only use ids below {})",
            i, left, right, part, i, next_id));
    const uint64_t length = (token_offset_[left + 1] - token_offset_[left]) +
                            (token_offset_[right + 1] - token_offset_[right]);
    if (length > kMaxTokenBytes)
      throw std::invalid_argument(fmt::format(
          "bpe tokenizer: merge {} ({}, {}) makes a token of {} bytes, longer than the limit of {}",
          i, left, right, length, kMaxTokenBytes));
    if (token_bytes_.size() + length > kMaxTotalTokenBytes)
      throw std::invalid_argument(
          fmt::format("bpe tokenizer: the tokens of merges 0 to {} add up to more than {} bytes", i,
                      kMaxTotalTokenBytes));
    add_rank(merges_[i], static_cast<uint32_t>(i), i);
    token_bytes_ += token_bytes(left);
    token_bytes_ += token_bytes(right);
    token_offset_.push_back(token_bytes_.size());
  }
  if (end_of_text_ == EndOfText::reserved) {  // after the merges, which never make it
    token_bytes_ += kEndOfTextToken;
    token_offset_.push_back(token_bytes_.size());
  }
}

namespace {

uint64_t bytes_hash(std::string_view bytes) {
  return std::hash<std::string_view>{}(bytes);
}

}  // namespace

// Every token's bytes, then the merges (each making the token of its joined bytes) and the
// table of whole tokens; the limits are the constructor's for attograd's own vocabulary.
void BpeTokenizer::build_own_tables(OwnVocabulary& v) {
  const size_t n = v.tokens.size();
  if (n > static_cast<size_t>(INT32_MAX) || v.merges.size() > static_cast<size_t>(INT32_MAX))
    throw std::invalid_argument(fmt::format("bpe tokenizer: {} tokens and {} merges; at most {}", n,
                                            v.merges.size(), INT32_MAX));
  const auto inside = [&](size_t id) { return v.outside.empty() || !v.outside[id]; };
  token_offset_.assign(1, 0);
  whole_ids_.assign(table_slots(n), kNoMerge);
  whole_mask_ = whole_ids_.size() - 1;
  std::array<bool, 256> has_byte{};
  for (size_t id = 0; id < n; ++id) {
    const std::string& t = v.tokens[id];
    if (t.size() > kMaxTokenBytes || token_bytes_.size() + t.size() > kMaxTotalTokenBytes)
      throw std::invalid_argument(
          fmt::format("bpe tokenizer: token {} passes the limit of {} bytes a token ({} in all)",
                      id, kMaxTokenBytes, kMaxTotalTokenBytes));
    token_bytes_ += t;
    token_offset_.push_back(token_bytes_.size());
    if (!inside(id) || t.empty()) continue;
    size_t slot = bytes_hash(t) & whole_mask_;
    for (; whole_ids_[slot] != kNoMerge; slot = (slot + 1) & whole_mask_)
      if (token_bytes(whole_ids_[slot]) == t)
        throw std::invalid_argument(fmt::format(
            "bpe tokenizer: tokens {} and {} have the same bytes", whole_ids_[slot], id));
    whole_ids_[slot] = static_cast<uint32_t>(id);
    if (t.size() == 1) byte_id_[static_cast<uint8_t>(t[0])] = static_cast<uint32_t>(id);
    if (t.size() == 1) has_byte[static_cast<uint8_t>(t[0])] = true;
  }
  for (int b = 0; b < 256; ++b)
    if (!has_byte[b])
      throw std::invalid_argument(fmt::format(
          "bpe tokenizer: no token is the byte {} (a byte-level vocabulary has all 256)", b));
  whole_tokens_ = v.whole_tokens;
  rank_keys_.assign(table_slots(v.merges.size()), kEmptyKey);
  rank_values_.assign(rank_keys_.size(), kNoMerge);
  rank_mask_ = rank_keys_.size() - 1;
  merge_result_.resize(v.merges.size());
  for (size_t r = 0; r < v.merges.size(); ++r) {
    const auto [left, right] = v.merges[r];
    for (const uint32_t part : {left, right})
      if (part >= n || !inside(part))
        throw std::invalid_argument(fmt::format(
            "bpe tokenizer: merge {} ({}, {}) uses {}, which is not a token of the model", r, left,
            right, part));
    const std::string joined = std::string(token_bytes(left)) + std::string(token_bytes(right));
    merge_result_[r] = whole_token(joined);
    if (merge_result_[r] == kNoMerge)
      throw std::invalid_argument(
          fmt::format("bpe tokenizer: merge {} ({}, {}) makes bytes that are no token of the model",
                      r, left, right));
    add_rank(v.merges[r], static_cast<uint32_t>(r), r);
  }
}

uint32_t BpeTokenizer::whole_token(std::string_view piece) const {
  if (whole_ids_.empty()) return kNoMerge;
  for (size_t slot = bytes_hash(piece) & whole_mask_;; slot = (slot + 1) & whole_mask_) {
    if (whole_ids_[slot] == kNoMerge) return kNoMerge;
    if (token_bytes(whole_ids_[slot]) == piece) return whole_ids_[slot];
  }
}

uint32_t BpeTokenizer::merge_rank(uint32_t left, uint32_t right) const {
  const uint64_t key = pair_key(left, right);
  for (size_t slot = slot_of(key, rank_mask_);; slot = (slot + 1) & rank_mask_) {
    if (rank_keys_[slot] == key) return rank_values_[slot];
    if (rank_keys_[slot] == kEmptyKey) return kNoMerge;
  }
}

std::string_view BpeTokenizer::token_bytes(uint32_t id) const {
  return std::string_view(token_bytes_)
      .substr(token_offset_[id], token_offset_[id + 1] - token_offset_[id]);
}

// ---- encoding one piece ----------------------------------------------------------------

// Rescans for the lowest rank after every merge, keeping the rank of each adjacent pair.
void BpeTokenizer::encode_short(std::string_view piece, Scratch& s,
                                std::vector<uint32_t>& out) const {
  auto& sym = s.symbols;
  auto& rank = s.ranks;
  sym.assign(piece.begin(), piece.end());
  for (auto& id : sym) id = byte_id_[id & 0xFF];  // the chars were signed
  size_t n = sym.size();
  rank.resize(n);
  for (size_t i = 0; i + 1 < n; ++i) rank[i] = merge_rank(sym[i], sym[i + 1]);
  rank[n - 1] = kNoMerge;
  while (n > 1) {
    const size_t i = std::min_element(rank.begin(), rank.begin() + n - 1) - rank.begin();
    if (rank[i] == kNoMerge) break;
    sym[i] = merge_result_[rank[i]];
    sym.erase(sym.begin() + i + 1);
    rank.erase(rank.begin() + i + 1);
    --n;
    rank[i] = i + 1 < n ? merge_rank(sym[i], sym[i + 1]) : kNoMerge;
    if (i > 0) rank[i - 1] = merge_rank(sym[i - 1], sym[i]);
  }
  out.insert(out.end(), sym.begin(), sym.begin() + n);
}

// The same rule with a min-heap of (rank, position) over a linked list of symbols: an
// entry is checked when popped (the pair there must still have that rank), positions keep
// left-to-right order, so the pair merged is the lowest rank and, among equals, leftmost.
void BpeTokenizer::encode_long(std::string_view piece, Scratch& s,
                               std::vector<uint32_t>& out) const {
  const size_t n = piece.size();
  auto& sym = s.symbols;
  auto& prev = s.prev;
  auto& next = s.next;
  auto& heap = s.heap;
  sym.resize(n), prev.resize(n), next.resize(n), heap.clear();
  for (size_t i = 0; i < n; ++i) {
    sym[i] = byte_id_[static_cast<unsigned char>(piece[i])];
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  const auto push = [&](int32_t i) {
    const uint32_t r = merge_rank(sym[i], sym[next[i]]);
    if (r == kNoMerge) return;
    heap.push_back((static_cast<uint64_t>(r) << 32) | static_cast<uint32_t>(i));
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const uint64_t top = heap.back();
    heap.pop_back();
    const uint32_t r = static_cast<uint32_t>(top >> 32);
    const int32_t i = static_cast<int32_t>(top & 0xFFFFFFFFu);
    const int32_t j = next[i];
    if (sym[i] == kDead || j < 0 || merge_rank(sym[i], sym[j]) != r) continue;  // stale
    sym[i] = merge_result_[r];
    sym[j] = kDead;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    if (prev[i] >= 0) push(prev[i]);
    if (next[i] >= 0) push(i);
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(sym[i]);
}

void BpeTokenizer::encode_piece(std::string_view piece, Scratch& s,
                                std::vector<uint32_t>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (whole_tokens_)
    if (const uint32_t id = whole_token(piece); id != kNoMerge) return out.push_back(id);
  if (piece.size() > kShortPiece) return encode_long(piece, s, out);
  if (piece.size() > kCachedPiece) return encode_short(piece, s, out);
  if (auto it = s.cache.find(piece); it != s.cache.end()) {
    const auto [offset, count] = it->second;
    out.insert(out.end(), s.cache_ids.begin() + offset, s.cache_ids.begin() + offset + count);
    return;
  }
  const size_t before = out.size();
  encode_short(piece, s, out);
  if (s.cache.size() >= kCacheEntries) s.cache.clear(), s.cache_ids.clear();  // bounded
  const auto offset = static_cast<uint32_t>(s.cache_ids.size());
  s.cache_ids.insert(s.cache_ids.end(), out.begin() + before, out.end());
  s.cache.emplace(piece, std::make_pair(offset, static_cast<uint32_t>(out.size() - before)));
}

// ---- encoding text ---------------------------------------------------------------------

// Encodes the pieces of `subject` from `begin` until one ends at or beyond `stop`, or
// (with more_may_follow) until a piece more text could change; returns where it ended.
size_t BpeTokenizer::encode_pieces(std::string_view subject, size_t begin, size_t stop,
                                   bool more_may_follow, Scratch& s,
                                   std::vector<uint32_t>& out) const {
  size_t pos = begin;
  while (pos < stop) {
    const size_t end = s.matcher.piece_end(subject, pos, more_may_follow);
    if (end == PieceMatcher::kNeedMore) break;
    encode_piece(subject.substr(pos, end - pos), s, out);
    pos = end;
  }
  return pos;
}

// Chunks of subject from `begin` for `threads` threads, each with its stop (the next start).
std::vector<BpeTokenizer::Chunk> BpeTokenizer::plan_chunks(std::string_view subject, size_t begin,
                                                           int threads) {
  const size_t n = subject.size() - begin;
  const size_t wanted = std::min<size_t>(4 * static_cast<size_t>(threads), n / kMinChunk);
  std::vector<Chunk> chunks;
  for (size_t k = 0; k < wanted; ++k) {
    const size_t start = k == 0 ? begin : chunk_start(subject, begin + k * (n / wanted));
    if (!chunks.empty() && start <= chunks.back().begin) continue;
    chunks.emplace_back().begin = start;
  }
  for (size_t k = 0; k < chunks.size(); ++k)
    chunks[k].stop = k + 1 < chunks.size() ? chunks[k + 1].begin : subject.size();
  return chunks;
}

// encode_pieces(subject, begin, subject.size(), ...) over OpenMP's threads: each chunk is
// cut into pieces from its own start; a chunk whose start was not where the previous
// chunk's pieces ended is redone from there, so the result is exactly that of one pass.
// `local` serves the calling thread (and a stream's chunks one after another).
size_t BpeTokenizer::encode_text(std::string_view subject, size_t begin, bool more_may_follow,
                                 Scratch& local, std::vector<uint32_t>& out) const {
  const int threads = omp_get_max_threads();
  if (threads == 1 || subject.size() - begin < kParallelBytes)
    return encode_pieces(subject, begin, subject.size(), more_may_follow, local, out);
  std::vector<Chunk> chunks = plan_chunks(subject, begin, threads);
  std::vector<std::unique_ptr<Scratch>> scratch(threads);
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t k = 0; k < chunks.size(); ++k) {
    try {
      const int t = omp_get_thread_num();
      if (t != 0 && !scratch[t]) scratch[t] = std::make_unique<Scratch>(pattern_);
      Chunk& c = chunks[k];
      c.end = encode_pieces(subject, c.begin, c.stop, more_may_follow, t == 0 ? local : *scratch[t],
                            c.ids);
    } catch (...) {
#pragma omp critical(bpe_encode_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  size_t pos = begin;
  for (Chunk& c : chunks) {
    if (pos != c.begin) {  // the previous chunk's last piece went past this chunk's start
      c.ids.clear();
      c.end =
          pos >= c.stop ? pos : encode_pieces(subject, pos, c.stop, more_may_follow, local, c.ids);
    }
    out.insert(out.end(), c.ids.begin(), c.ids.end());
    pos = c.end;
    if (pos < c.stop) break;  // held back: more text could change the next piece
  }
  return pos;
}

void BpeTokenizer::encode_append(std::string_view utf8, std::vector<uint32_t>& out) const {
  base::check_utf8(utf8);
  Scratch scratch(pattern_);
  encode_text(utf8, 0, false, scratch, out);
}

std::vector<int64_t> BpeTokenizer::encode(const std::string& utf8) const {
  std::vector<uint32_t> ids;
  ids.reserve(utf8.size() / 3);
  encode_append(utf8, ids);
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::string BpeTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size())
      throw std::out_of_range(
          fmt::format("bpe tokenizer: id {} at position {} is outside the vocabulary of {}", ids[i],
                      i, vocab_size()));
    out += token_bytes(static_cast<uint32_t>(ids[i]));
  }
  return out;
}

BpeTokenizer BpeTokenizer::train(std::string_view text, int64_t vocab_size,
                                 std::string split_pattern, EndOfText end_of_text) {
  BpeTrainer trainer(std::move(split_pattern));
  trainer.add_text(text);
  return trainer.train(vocab_size, end_of_text);
}

// ---- BpeStreamEncoder ------------------------------------------------------------------

BpeStreamEncoder::BpeStreamEncoder(const BpeTokenizer& tokenizer)
    : tokenizer_(tokenizer),
      scratch_(std::make_unique<BpeTokenizer::Scratch>(tokenizer.pattern_)),
      text_(tokenizer.pattern_.max_lookbehind()) {}

BpeStreamEncoder::BpeStreamEncoder(const BpeTokenizer& tokenizer,
                                   const std::array<uint32_t, 256>& id_of_byte)
    : BpeStreamEncoder(tokenizer) {
  id_of_byte_ = &id_of_byte;
}

BpeStreamEncoder::~BpeStreamEncoder() = default;

void BpeStreamEncoder::cut(bool more_may_follow, std::vector<uint32_t>& out) {
  const std::string_view subject = text_.subject();
  const size_t before = out.size();
  text_.consume(tokenizer_.encode_text(subject, text_.begin(), more_may_follow, *scratch_, out));
  if (id_of_byte_)
    for (size_t i = before; i < out.size(); ++i)
      if (out[i] < 256) out[i] = (*id_of_byte_)[out[i]];
}

void BpeStreamEncoder::add(std::string_view chunk, std::vector<uint32_t>& out) {
  text_.add(chunk);
  cut(true, out);
}

void BpeStreamEncoder::finish(std::vector<uint32_t>& out) {
  text_.finish();
  cut(false, out);
  text_.reset();
}

}  // namespace data
