#pragma once
// Which targets `eval` scores over n ids, and with which history (docs/model.md, "Scoring a
// text"). A window reads inputs ids[start, start + length) and predicts targets
// ids[start + 1, start + length + 1); only its last `counted` targets are scored. Every id
// but the first is scored exactly once, whatever the rule:
//   - stride 0 (the default): windows of `context` inputs at 0, context, 2 context, ...,
//     each counting all its targets; the last one shorter when the ids run out (a text
//     shorter than the context is one window), or dropped with drop_partial (the
//     evaluation during training, whose windows all have one shape).
//   - stride S (1 <= S < context): Hugging Face's sliding-window perplexity. Windows of
//     `context` ids (context - 1 inputs) start at 0, S, 2S, ... until one reaches the last
//     id; the first counts every target, each later one the targets past the end of the one
//     before (S of them, fewer in the last), so each counted target sees at least
//     context - S ids of history.
//
//   const data::ScoringWindows rule{.context = 1024, .stride = 512};
//   for (int64_t w = 0; w < rule.count(n); ++w) { auto win = *rule.window(w, n); ... }
#include <cstdint>
#include <optional>

namespace data {

struct ScoringWindow {
  int64_t start = 0, length = 0, counted = 0;
};

struct ScoringWindows {
  int64_t context = 0;        // the model's window, in inputs (stride 0) or in ids (stride > 0)
  int64_t stride = 0;         // 0: windows side by side
  bool drop_partial = false;  // stride 0 only

  // Inputs of a window that does not run out of ids.
  int64_t full_length() const { return stride > 0 ? context - 1 : context; }
  // Where window w starts.
  int64_t start(int64_t w) const { return w * (stride > 0 ? stride : context); }
  // Window w over n_ids ids, or none past the last. n_ids may be any number at least
  // start(w) + full_length() + 1 when the window is full (a text read so far).
  std::optional<ScoringWindow> window(int64_t w, int64_t n_ids) const;
  // How many windows n_ids ids make, and how many targets they count in all.
  int64_t count(int64_t n_ids) const;
  int64_t counted(int64_t n_ids) const;
  // Each of these is a std::invalid_argument unless context >= 1 and 0 <= stride < context.
};

}  // namespace data
