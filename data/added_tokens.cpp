#include "data/added_tokens.h"

#include <algorithm>

namespace data {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens, bool normalized) {
  for (const AddedToken& t : tokens) {
    if (t.normalized != normalized || t.content.empty()) continue;
    ids_.emplace(t.content, t.id);
    first_byte_[static_cast<unsigned char>(t.content[0])] = true;
    if (std::find(lengths_.begin(), lengths_.end(), t.content.size()) == lengths_.end())
      lengths_.push_back(t.content.size());
    longest_ = std::max(longest_, t.content.size());
  }
  std::sort(lengths_.rbegin(), lengths_.rend());
}

AddedTokenMatcher::Found AddedTokenMatcher::find(std::string_view text, size_t pos,
                                                 bool more_may_follow, size_t& decided) const {
  decided = text.size();
  if (empty()) return {};
  for (size_t i = pos; i < text.size(); ++i) {
    if (more_may_follow && i + longest_ > text.size()) {
      decided = i;  // a longer match, or one at all, may need bytes still to come
      return {};
    }
    if (!first_byte_[static_cast<unsigned char>(text[i])]) continue;
    for (const size_t length : lengths_) {
      if (i + length > text.size()) continue;
      const auto it = ids_.find(std::string(text.substr(i, length)));
      if (it != ids_.end()) return {i, i + length, it->second};
    }
  }
  return {};
}

void AddedTokenSplitter::add(std::string_view chunk, bool final, const OnText& on_text,
                             const OnId& on_id) {
  pending_ += chunk;
  const std::string_view text(pending_);
  size_t pos = 0;
  for (;;) {
    size_t decided = 0;
    const AddedTokenMatcher::Found found = matcher_.find(text, pos, !final, decided);
    if (found.begin == std::string_view::npos) {
      if (decided > pos || final) on_text(text.substr(pos, decided - pos), final);
      pos = decided;
      break;
    }
    on_text(text.substr(pos, found.begin - pos), true);
    on_id(found.id);
    pos = found.end;
  }
  pending_.erase(0, pos);
}

}  // namespace data
