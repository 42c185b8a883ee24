#include "serve/reply_text.h"

#include <algorithm>

#include "base/utf8.h"

namespace serve {

std::string ReplyText::add(std::string_view bytes) {
  if (stopped_) return {};
  pending_ += bytes;
  size_t first_stop = std::string::npos;
  for (const std::string& stop : stops_) first_stop = std::min(first_stop, pending_.find(stop));
  if (first_stop != std::string::npos) {
    std::string out = pending_.substr(0, first_stop);
    pending_.clear();
    stopped_ = true;
    return out;
  }
  // held: the longest end of the text that begins a stop text, and a split character
  size_t held = 0;
  for (const std::string& stop : stops_)
    for (size_t k = std::min(stop.size() - 1, pending_.size()); k > held; --k)
      if (pending_.compare(pending_.size() - k, k, stop, 0, k) == 0) {
        held = k;
        break;
      }
  const size_t whole = base::utf8_complete_prefix(pending_);
  const size_t sent = std::min(pending_.size() - held, whole);
  std::string out = pending_.substr(0, sent);
  pending_.erase(0, sent);
  return out;
}

std::string ReplyText::finish() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace serve
