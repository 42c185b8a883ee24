#include "data/scoring_windows.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace data {

namespace {

void check(const ScoringWindows& r) {
  if (r.context < 1 || r.stride < 0 || (r.stride > 0 && r.stride >= r.context))
    throw std::invalid_argument(fmt::format(
        "scoring windows of context {} and stride {}: need context >= 1 and 0 <= stride < "
        "context",
        r.context, r.stride));
}

}  // namespace

std::optional<ScoringWindow> ScoringWindows::window(int64_t w, int64_t n_ids) const {
  check(*this);
  const int64_t s = start(w);
  if (w < 0 || s + 1 >= n_ids) return std::nullopt;  // not one target left
  const int64_t length = std::min(full_length(), n_ids - 1 - s);
  if (stride == 0) {
    if (drop_partial && length < context) return std::nullopt;
    return ScoringWindow{s, length, length};
  }
  if (w == 0) return ScoringWindow{s, length, length};
  const int64_t previous_end = start(w - 1) + context;  // one past the last id it read
  if (previous_end >= n_ids) return std::nullopt;       // it reached the last id
  return ScoringWindow{s, length, s + length + 1 - previous_end};
}

int64_t ScoringWindows::count(int64_t n_ids) const {
  check(*this);
  if (n_ids < 2) return 0;
  const int64_t targets = n_ids - 1;
  if (stride == 0) return targets / context + (targets % context != 0 && !drop_partial ? 1 : 0);
  if (n_ids <= context) return 1;
  return 1 + (n_ids - context + stride - 1) / stride;
}

int64_t ScoringWindows::counted(int64_t n_ids) const {
  check(*this);
  if (n_ids < 2) return 0;
  const int64_t targets = n_ids - 1;
  return stride == 0 && drop_partial ? targets / context * context : targets;
}

}  // namespace data
