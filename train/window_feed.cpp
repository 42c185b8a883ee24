#include "train/window_feed.h"

#include <algorithm>

#include "data/data_error.h"
#include "data/examples.h"

namespace train {

namespace {

// Window w's inputs and targets from its ids (w.length + 1 of them from w.start on), the
// targets before its counted ones ignored.
void fill(const int64_t* ids, const data::ScoringWindow& w, int64_t* x, int64_t* y) {
  std::copy_n(ids, w.length, x);
  std::copy_n(ids + 1, w.length, y);
  std::fill_n(y, w.length - w.counted, data::kIgnoreTarget);
}

}  // namespace

StoreFeed::StoreFeed(std::vector<const data::TokenStore*> parts, const data::ScoringWindows& rule,
                     int64_t max_windows)
    : WindowFeed(rule), parts_(std::move(parts)) {
  for (const data::TokenStore* p : parts_) size_ += static_cast<int64_t>(p->size());
  count_ = rule_.count(size_);
  if (max_windows > 0 && max_windows < count_) {
    count_ = max_windows;
    for (int64_t w = 0; w < count_; ++w) targets_ += rule_.window(w, size_)->counted;
  } else {
    targets_ = rule_.counted(size_);
  }
}

void StoreFeed::copy(int64_t start, int64_t count, int64_t* out) const {
  for (const data::TokenStore* p : parts_) {
    const auto n = static_cast<int64_t>(p->size());
    if (start < n) {
      const int64_t here = std::min(count, n - start);
      p->copy(static_cast<size_t>(start), static_cast<size_t>(here), out);
      out += here, count -= here;
    }
    start = std::max<int64_t>(0, start - n);
  }
}

FeedBatch StoreFeed::next(int64_t n, int64_t* x, int64_t* y) {
  FeedBatch b;
  for (; b.windows < n && done_ < count_; ++b.windows, ++done_) {
    const data::ScoringWindow w = *rule_.window(done_, size_);
    if (b.windows > 0 && w.length != b.length) break;
    b.length = w.length, b.counted += w.counted;
    if (!failure_.empty()) continue;
    try {
      window_.resize(static_cast<size_t>(w.length) + 1);
      copy(w.start, w.length + 1, window_.data());
      fill(window_.data(), w, x + b.windows * w.length, y + b.windows * w.length);
    } catch (const data::DataError& e) {
      failure_ = e.what();
    }
  }
  return b;
}

int64_t TextFeed::available() {
  const int64_t start = rule_.start(w_), need = start + rule_.full_length() + 1;
  ids_.erase(ids_.begin(), ids_.begin() + std::clamp<int64_t>(start - base_, 0, ids_.size()));
  base_ = std::max(base_, start);
  while (!ended_ && base_ + static_cast<int64_t>(ids_.size()) < need) {
    const size_t before = ids_.size();
    ended_ = !text_.next(ids_);
    read_ += static_cast<int64_t>(ids_.size() - before);
  }
  return base_ + static_cast<int64_t>(ids_.size());
}

FeedBatch TextFeed::next(int64_t n, int64_t* x, int64_t* y) {
  FeedBatch b;
  for (; b.windows < n; ++b.windows, ++w_) {
    const std::optional<data::ScoringWindow> w = rule_.window(w_, available());
    if (!w || (b.windows > 0 && w->length != b.length)) break;
    b.length = w->length, b.counted += w->counted;
    fill(ids_.data() + (w->start - base_), *w, x + b.windows * w->length,
         y + b.windows * w->length);
  }
  return b;
}

}  // namespace train
