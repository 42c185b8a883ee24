#pragma once
// Added tokens (Hugging Face tokenizers' added_tokens: Llama 3's <|begin_of_text|>, Qwen's
// <|im_start|>): texts matched whole in the input before it is cut into pieces, never split,
// as tokenizers matches them: leftmost first, the longest of those starting there.
//
//   data::AddedTokenMatcher m(tokens, /*normalized=*/false);   // the tokens matched raw
//   data::AddedTokenSplitter split(m);
//   split.add(chunk, /*final=*/false, on_text, on_id);          // chunks may end anywhere
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace data {

struct AddedToken {
  uint32_t id = 0;
  std::string content;         // the text matched (UTF-8)
  bool special = true;         // tokenizers' `special` (decoding may skip it)
  bool normalized = false;     // matched in the normalized text, else in the text as it is
  bool in_vocabulary = false;  // the model's vocabulary has it too (BPE may make it)
};

// Finds the added tokens of one kind (normalized or not) in a text.
class AddedTokenMatcher {
 public:
  AddedTokenMatcher(const std::vector<AddedToken>& tokens, bool normalized);
  bool empty() const { return longest_ == 0; }

  struct Found {
    size_t begin = std::string_view::npos;  // npos: none
    size_t end = 0;
    uint32_t id = 0;
  };
  // The first match at or after pos. With more_may_follow, a match that more bytes could
  // make longer or start is not decided: none is returned and `decided` is where the
  // undecided bytes start (no match starts before it); else decided is text.size().
  Found find(std::string_view text, size_t pos, bool more_may_follow, size_t& decided) const;

 private:
  std::vector<size_t> lengths_;  // the distinct lengths, longest first
  std::unordered_map<std::string, uint32_t> ids_;
  bool first_byte_[256] = {};
  size_t longest_ = 0;
};

// Cuts a text that arrives in chunks at the matcher's tokens: each stretch of text between
// them goes to on_text (with `ends`: a token or the end of the text follows it), each match
// to on_id, in order. The matcher must outlive it.
class AddedTokenSplitter {
 public:
  using OnText = std::function<void(std::string_view text, bool ends)>;
  using OnId = std::function<void(uint32_t id)>;
  explicit AddedTokenSplitter(const AddedTokenMatcher& matcher) : matcher_(matcher) {}
  // With final, the text ends after chunk (and the next add starts a new one).
  void add(std::string_view chunk, bool final, const OnText& on_text, const OnId& on_id);

 private:
  const AddedTokenMatcher& matcher_;
  std::string pending_;  // bytes whose match is not decided yet
};

}  // namespace data
