#pragma once
// The windows `eval` and the evaluation during training score (data/scoring_windows.h), a
// batch at a time and in order: from token stores (a prepared folder's parts, or a text's
// ids split as training splits them) or from a text read a chunk at a time.
#include <cstdint>
#include <string>
#include <vector>

#include "data/scoring_windows.h"
#include "data/text_ids.h"
#include "data/token_store.h"

namespace train {

// Windows of one length: inputs in x and targets in y ([windows, length] each), the
// targets a window does not count set to data::kIgnoreTarget.
struct FeedBatch {
  int64_t windows = 0, length = 0;
  int64_t counted = 0;  // targets counted in all
};

class WindowFeed {
 public:
  explicit WindowFeed(const data::ScoringWindows& rule) : rule_(rule) {}
  virtual ~WindowFeed() = default;
  // Up to n windows of one length (x and y hold n * the rule's full length); none at the end.
  virtual FeedBatch next(int64_t n, int64_t* x, int64_t* y) = 0;
  // The targets all windows count, when known ahead (-1: not until the end is seen).
  virtual int64_t known_targets() const { return -1; }
  // Why the ids could not be read (damaged data), once it happened: the windows from then
  // on are counted but not filled, so every rank still takes part in the gathering.
  const std::string& failure() const { return failure_; }

 protected:
  data::ScoringWindows rule_;
  std::string failure_;
};

// The ids of stores one after the other (a prepared folder's training then validation part
// for `eval --split all`); at most max_windows windows (0: all).
class StoreFeed : public WindowFeed {
 public:
  StoreFeed(std::vector<const data::TokenStore*> parts, const data::ScoringWindows& rule,
            int64_t max_windows);
  FeedBatch next(int64_t n, int64_t* x, int64_t* y) override;
  int64_t known_targets() const override { return targets_; }

 private:
  void copy(int64_t start, int64_t count, int64_t* out) const;
  std::vector<const data::TokenStore*> parts_;
  int64_t size_ = 0, count_ = 0, targets_ = 0, done_ = 0;
  std::vector<int64_t> window_;
};

// A text read a chunk at a time: ids are kept only from the next window's start on.
class TextFeed : public WindowFeed {
 public:
  TextFeed(data::TextIds& text, const data::ScoringWindows& rule) : WindowFeed(rule), text_(text) {}
  FeedBatch next(int64_t n, int64_t* x, int64_t* y) override;
  int64_t ids_read() const { return read_; }

 private:
  int64_t available();  // ids known from base_ on: enough for window w_ or all the text has
  data::TextIds& text_;
  std::vector<int64_t> ids_;  // ids[base_, base_ + size)
  int64_t base_ = 0, w_ = 0, read_ = 0;
  bool ended_ = false;
};

}  // namespace train
