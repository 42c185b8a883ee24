// Learning BPE merges: the incremental algorithm of production tokenizers.
//
// 1. Count the distinct pieces of the text (PieceCountTable: piece -> occurrences).
// 2. Each distinct piece of two or more bytes becomes a word: a run of symbols (token ids,
//    the bytes at first) with the piece's count as its weight.
// 3. Keep, for every adjacent pair of symbols, its count summed over the words (weighted)
//    and the list of words it occurs in, and a max-priority queue of (count, pair).
// 4. Pop the queue: an entry whose count is no longer the pair's count is stale (a merge
//    since lowered it; counts of existing pairs only ever fall), so it goes back with the
//    current count; otherwise that pair is merged: only the words in its list are
//    rewritten, and the counts of the pairs around each occurrence change in place.
//
// Tie-break: the pair with the highest count; among equal counts, the smallest
// (left, right), comparing left ids first. Deterministic, whatever the order of the text's
// pieces or the hash tables.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <stdexcept>
#include <unordered_map>

#include "base/utf8.h"
#include "data/bpe.h"

namespace data {

// Piece -> count in one open-addressing table, the pieces' bytes in one arena: about 40
// bytes per distinct piece plus its bytes (std::unordered_map<std::string, ...> takes ~90).
struct PieceCountTable {
  struct Entry {
    uint64_t hash, offset;
    uint32_t length;
    int64_t count;
  };
  static constexpr uint32_t kEmpty = UINT32_MAX;
  std::vector<uint32_t> slots = std::vector<uint32_t>(1024, kEmpty);  // index into entries
  std::vector<Entry> entries;
  std::string arena;

  std::string_view piece(const Entry& e) const {
    return std::string_view(arena).substr(e.offset, e.length);
  }

  void add(std::string_view p, int64_t count) {
    const uint64_t hash = std::hash<std::string_view>{}(p);
    const size_t mask = slots.size() - 1;
    size_t slot = hash & mask;
    for (; slots[slot] != kEmpty; slot = (slot + 1) & mask) {
      Entry& e = entries[slots[slot]];
      if (e.hash == hash && piece(e) == p) {
        e.count += count;
        return;
      }
    }
    if (entries.size() >= kEmpty - 1)
      throw std::length_error("bpe trainer: too many distinct pieces");
    slots[slot] = static_cast<uint32_t>(entries.size());
    entries.push_back({hash, arena.size(), static_cast<uint32_t>(p.size()), count});
    arena.append(p);
    if (2 * entries.size() > slots.size()) grow();
  }

  void grow() {
    slots.assign(2 * slots.size(), kEmpty);
    const size_t mask = slots.size() - 1;
    for (size_t i = 0; i < entries.size(); ++i) {
      size_t slot = entries[i].hash & mask;
      while (slots[slot] != kEmpty) slot = (slot + 1) & mask;
      slots[slot] = static_cast<uint32_t>(i);
    }
  }

  size_t memory_bytes() const {
    return slots.capacity() * sizeof(uint32_t) + entries.capacity() * sizeof(Entry) +
           arena.capacity();
  }
};

namespace {

using Merge = BpeTokenizer::Merge;

uint64_t merge_pair_key(uint32_t left, uint32_t right) {
  return (static_cast<uint64_t>(left) << 32) | right;
}

struct QueueEntry {
  int64_t count;
  uint64_t pair;
  // The top of std::priority_queue is the largest: highest count, then smallest pair.
  bool operator<(const QueueEntry& o) const {
    return count != o.count ? count < o.count : pair > o.pair;
  }
};

class MergeLearner {
 public:
  MergeLearner(const std::vector<PieceCountTable::Entry>& entries, std::string_view arena);
  std::vector<Merge> learn(size_t merges_wanted);

 private:
  struct Word {
    uint64_t begin;   // in symbols_
    uint32_t length;  // shrinks as merges apply
    int64_t count;
  };
  void add_pair(uint64_t key, int64_t delta, uint32_t word);
  void apply(uint32_t left, uint32_t right, uint32_t id);
  void merge_in_word(uint32_t w, uint32_t left, uint32_t right, uint32_t id);

  std::vector<uint32_t> symbols_;
  std::vector<Word> words_;
  std::unordered_map<uint64_t, int64_t> pair_counts_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where_;  // pair -> words, no repeats
  std::priority_queue<QueueEntry> queue_;
  std::vector<uint64_t> created_;       // pairs a merge made, queued when it is done
  std::vector<uint32_t> token_length_;  // bytes per token, against kMaxTokenBytes
};

MergeLearner::MergeLearner(const std::vector<PieceCountTable::Entry>& entries,
                           std::string_view arena) {
  for (const auto& e : entries) {
    if (e.length < 2) continue;  // no pair to merge
    const auto w = static_cast<uint32_t>(words_.size());
    words_.push_back({symbols_.size(), e.length, e.count});
    for (uint32_t i = 0; i < e.length; ++i) {
      symbols_.push_back(static_cast<unsigned char>(arena[e.offset + i]));
      if (i > 0)
        add_pair(merge_pair_key(symbols_[symbols_.size() - 2], symbols_.back()), e.count, w);
    }
  }
  std::vector<QueueEntry> initial;
  initial.reserve(pair_counts_.size());
  for (const auto& [key, count] : pair_counts_) initial.push_back({count, key});
  queue_ = std::priority_queue<QueueEntry>(std::less<QueueEntry>(), std::move(initial));
  token_length_.assign(256, 1);
}

void MergeLearner::add_pair(uint64_t key, int64_t delta, uint32_t word) {
  pair_counts_[key] += delta;
  if (delta <= 0) return;
  auto& list = where_[key];
  if (list.empty() || list.back() != word) list.push_back(word);  // a word's pairs come together
}

// Rewrites one word in place, left to right. Each occurrence (left, right) becomes id; the
// pair it formed with the symbol before (already rewritten, so possibly id itself) and
// with the one after lose the word's count, and the new pairs with id gain it. Two
// occurrences in a row work out: the first adds (id, left), the second takes it back.
void MergeLearner::merge_in_word(uint32_t w, uint32_t left, uint32_t right, uint32_t id) {
  Word& word = words_[w];
  uint32_t* s = symbols_.data() + word.begin;
  const uint32_t n = word.length;
  const int64_t c = word.count;
  uint32_t out = 0;
  for (uint32_t i = 0; i < n;) {
    if (i + 1 < n && s[i] == left && s[i + 1] == right) {
      if (out > 0) {
        add_pair(merge_pair_key(s[out - 1], left), -c, w);
        add_pair(merge_pair_key(s[out - 1], id), c, w);
        created_.push_back(merge_pair_key(s[out - 1], id));
      }
      if (i + 2 < n) {
        add_pair(merge_pair_key(right, s[i + 2]), -c, w);
        add_pair(merge_pair_key(id, s[i + 2]), c, w);
        created_.push_back(merge_pair_key(id, s[i + 2]));
      }
      s[out++] = id;
      i += 2;
    } else {
      s[out++] = s[i++];
    }
  }
  word.length = out;
}

void MergeLearner::apply(uint32_t left, uint32_t right, uint32_t id) {
  const uint64_t key = merge_pair_key(left, right);
  std::vector<uint32_t> words;
  if (auto it = where_.find(key); it != where_.end()) {
    words = std::move(it->second);
    where_.erase(it);
  }
  created_.clear();
  // A word listed may have lost the pair to an earlier merge; it is then left unchanged.
  for (const uint32_t w : words) merge_in_word(w, left, right, id);
  pair_counts_.erase(key);  // every occurrence is gone
  std::sort(created_.begin(), created_.end());
  created_.erase(std::unique(created_.begin(), created_.end()), created_.end());
  for (const uint64_t pair : created_)
    if (const int64_t count = pair_counts_[pair]; count > 0) queue_.push({count, pair});
}

std::vector<Merge> MergeLearner::learn(size_t merges_wanted) {
  std::vector<Merge> merges;
  merges.reserve(merges_wanted);
  while (merges.size() < merges_wanted && !queue_.empty()) {
    const QueueEntry top = queue_.top();
    queue_.pop();
    const auto it = pair_counts_.find(top.pair);
    const int64_t count = it == pair_counts_.end() ? 0 : it->second;
    if (count <= 0) continue;  // gone
    if (count != top.count) {  // stale: a merge lowered it since it was queued
      queue_.push({count, top.pair});
      continue;
    }
    const auto left = static_cast<uint32_t>(top.pair >> 32);
    const auto right = static_cast<uint32_t>(top.pair & 0xFFFFFFFFu);
    const uint32_t length = token_length_[left] + token_length_[right];
    // Such a pair is dropped for good: the tokenizer refuses tokens this long.
    if (length > BpeTokenizer::kMaxTokenBytes) continue;
    const auto id = static_cast<uint32_t>(256 + merges.size());
    merges.emplace_back(left, right);
    token_length_.push_back(length);
    apply(left, right, id);
  }
  return merges;
}

}  // namespace

BpeTrainer::BpeTrainer(std::string split_pattern)
    : pattern_(std::move(split_pattern)),
      stream_(std::make_unique<PieceStream>(pattern_)),
      counts_(std::make_unique<PieceCountTable>()) {}

BpeTrainer::~BpeTrainer() = default;
BpeTrainer::BpeTrainer(BpeTrainer&&) noexcept = default;
BpeTrainer& BpeTrainer::operator=(BpeTrainer&&) noexcept = default;

void BpeTrainer::add_text(std::string_view chunk) {
  stream_->add(chunk, [this](std::string_view piece) { counts_->add(piece, 1); });
}

void BpeTrainer::end_text() {
  stream_->finish([this](std::string_view piece) { counts_->add(piece, 1); });
}

void BpeTrainer::add_piece(std::string_view piece, int64_t count) {
  if (count <= 0)
    throw std::invalid_argument(fmt::format("bpe trainer: piece count must be > 0, got {}", count));
  base::check_utf8(piece);
  if (!piece.empty()) counts_->add(piece, count);
}

BpeTokenizer BpeTrainer::train(int64_t vocab_size, EndOfText end_of_text) {
  const int64_t fixed = end_of_text == EndOfText::reserved ? 257 : 256;
  if (vocab_size < fixed || vocab_size > INT32_MAX)
    throw std::invalid_argument(fmt::format(
        "bpe trainer: vocab_size must be at least {} (the byte tokens{}) and below 2^31, got {}",
        fixed, fixed == 257 ? " and <|endoftext|>" : "", vocab_size));
  end_text();
  MergeLearner learner(counts_->entries, counts_->arena);
  return BpeTokenizer(learner.learn(static_cast<size_t>(vocab_size - fixed)), pattern_.pattern(),
                      end_of_text);
}

uint64_t BpeTrainer::bytes_added() const {
  return stream_->bytes_added();
}
size_t BpeTrainer::distinct_pieces() const {
  return counts_->entries.size();
}
size_t BpeTrainer::memory_bytes() const {
  return counts_->memory_bytes();
}

}  // namespace data
