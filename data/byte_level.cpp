// Byte-level form (bytes_to_unicode) and byte-level vocabularies to and from tokenizers.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "base/utf8.h"
#include "data/byte_level_error.h"
#include "data/gpt2_tokenizer.h"
#include "data/tokenizer_file.h"

namespace data {

namespace detail {

ByteLevelError::ByteLevelError(Part p, size_t i, const std::string& w)
    : std::invalid_argument(p == Part::whole   ? w
                            : p == Part::token ? fmt::format("token {}: {}", i, w)
                                               : fmt::format("merge {}: {}", i, w)),
      part(p),
      index(i),
      why(w) {}

std::string quoted_token(std::string_view token) {
  constexpr size_t kShown = 60;
  return fmt::format("'{}{}'", base::printable(token.substr(0, kShown)),
                     token.size() > kShown ? "..." : "");
}

}  // namespace detail

namespace {

using detail::ByteLevelError;
using Part = ByteLevelError::Part;

// bytes_to_unicode: the byte each code point U+0100 + n stands for, and each byte's code point.
struct ByteTable {
  std::array<uint32_t, 256> code_point{};
  std::array<int16_t, 324> byte_of{};  // code points 0-323; -1: stands for no byte
  ByteTable() {
    byte_of.fill(-1);
    const std::vector<uint8_t> order = Gpt2Tokenizer::gpt2_byte_order();
    uint32_t next = 256;
    for (size_t i = 0; i < 256; ++i) {
      const uint8_t b = order[i];
      const bool printable = i < 188;  // the first 188 of the order stand for themselves
      code_point[b] = printable ? b : next++;
      byte_of[code_point[b]] = b;
    }
  }
};

const ByteTable& table() {
  static const ByteTable t;
  return t;
}

void check_no_duplicates(const ByteLevelVocab& v) {
  std::unordered_map<std::string_view, size_t> seen;
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (auto [it, fresh] = seen.emplace(v.tokens[i], i); !fresh)
      throw std::invalid_argument(fmt::format(
          "tokens {} and {} are both {}: a byte-level vocabulary maps each text to one id",
          it->second, i, detail::quoted_token(v.tokens[i])));
}

template <class Tok>
void add_merges(const Tok& tok, const std::vector<BpeTokenizer::Merge>& merges, ByteLevelVocab& v) {
  for (size_t i = 0; i < merges.size(); ++i) {
    v.tokens.push_back(byte_level_text(tok.token_bytes(static_cast<uint32_t>(256 + i))));
    v.merges.emplace_back(byte_level_text(tok.token_bytes(merges[i].first)),
                          byte_level_text(tok.token_bytes(merges[i].second)));
  }
}

// A reserved <|endoftext|> (attograd's byte and bpe): a special token after the merges.
void add_end_of_text(EndOfText end_of_text, ByteLevelVocab& v) {
  if (end_of_text != EndOfText::reserved) return;
  v.end_of_text = static_cast<int64_t>(v.tokens.size());
  v.tokens.emplace_back(kEndOfTextToken);
}

}  // namespace

std::string byte_level_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) base::utf8_append(out, table().code_point[static_cast<uint8_t>(c)]);
  return out;
}

std::optional<std::string> byte_level_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t n = base::utf8_char(text, i, cp);
    if (n == 0 || cp >= table().byte_of.size() || table().byte_of[cp] < 0) return std::nullopt;
    out += static_cast<char>(table().byte_of[cp]);
    i += n;
  }
  return out;
}

ByteLevelVocab byte_level_vocab(const Tokenizer& tok) {
  ByteLevelVocab v;
  if (const auto* g = dynamic_cast<const Gpt2Tokenizer*>(&tok)) {
    for (uint32_t id = 0; id < 256; ++id) v.tokens.push_back(byte_level_text(g->token_bytes(id)));
    add_merges(*g, g->merges(), v);
    for (const std::string& s : g->special_tokens()) v.tokens.push_back(s);
    v.split_pattern = g->split_pattern();
    v.end_of_text = g->special_id("<|endoftext|>");
  } else if (const auto* b = dynamic_cast<const BpeTokenizer*>(&tok)) {
    for (uint32_t id = 0; id < 256; ++id) v.tokens.push_back(byte_level_text(b->token_bytes(id)));
    add_merges(*b, b->merges(), v);
    v.split_pattern = b->split_pattern();
    add_end_of_text(b->end_of_text(), v);
  } else if (const auto* bytes = dynamic_cast<const ByteTokenizer*>(&tok)) {
    for (int byte = 0; byte < 256; ++byte)
      v.tokens.push_back(byte_level_text(std::string(1, static_cast<char>(byte))));
    add_end_of_text(bytes->end_of_text(), v);
  } else {
    throw std::invalid_argument(fmt::format(
        "a {} tokenizer cannot be written as a byte-level vocabulary: its ids stand for {}, "
        "not for bytes and merges of bytes",
        tok.type(),
        tok.kind() == TokenizerKind::chars ? "characters"
        : tok.kind() == TokenizerKind::hf
            ? "a tokenizer.json's vocabulary, with added tokens matched in the text"
            : "something else"));
  }
  check_no_duplicates(v);
  return v;
}

namespace {

// The checks of tokenizer_from_byte_level, in the order a reader meets the entries.
class VocabCheck {
 public:
  explicit VocabCheck(const ByteLevelVocab& v) : v_(v), merges_(v.merges.size()) {}

  void bounds() const {
    const size_t max_tokens =
        static_cast<size_t>(kMaxBpeVocabSize) + Gpt2Tokenizer::kMaxSpecialTokens;
    if (v_.tokens.size() > max_tokens)
      throw ByteLevelError(Part::whole, 0,
                           fmt::format("{} tokens; at most {}", v_.tokens.size(), max_tokens));
    if (merges_ > static_cast<size_t>(kMaxBpeVocabSize) - 256)
      throw ByteLevelError(Part::whole, 0,
                           fmt::format("{} merges; at most {}", merges_, kMaxBpeVocabSize - 256));
    if (v_.tokens.size() < 256 + merges_)
      throw ByteLevelError(
          Part::whole, 0,
          fmt::format("{} tokens cannot hold the 256 byte tokens and the results of {} merges",
                      v_.tokens.size(), merges_));
    if (v_.split_pattern.size() > kMaxSplitPatternBytes)
      throw ByteLevelError(Part::whole, 0,
                           fmt::format("the split pattern has {} bytes; at most {}",
                                       v_.split_pattern.size(), kMaxSplitPatternBytes));
  }

  // Ids 0-255: one byte each, every byte once.
  std::vector<uint8_t> byte_order() {
    std::vector<uint8_t> order(256);
    std::array<int, 256> id_of{};
    id_of.fill(-1);
    for (size_t id = 0; id < 256; ++id) {
      const std::optional<std::string> bytes = byte_level_bytes(v_.tokens[id]);
      if (!bytes || bytes->size() != 1)
        throw ByteLevelError(Part::token, id,
                             fmt::format("{} is not one byte in byte-level form (a vocabulary "
                                         "starts with its 256 byte tokens)",
                                         detail::quoted_token(v_.tokens[id])));
      const uint8_t b = static_cast<uint8_t>((*bytes)[0]);
      if (id_of[b] >= 0)
        throw ByteLevelError(
            Part::token, id,
            fmt::format("{} repeats token {}", detail::quoted_token(v_.tokens[id]), id_of[b]));
      id_of[b] = static_cast<int>(id);
      order[id] = b;
      ids_.emplace(v_.tokens[id], static_cast<uint32_t>(id));
      bytes_.push_back(1);
    }
    return order;
  }

  // Merge i: parts that are tokens before it, making the token of id 256 + i.
  std::vector<BpeTokenizer::Merge> merges() {
    std::vector<BpeTokenizer::Merge> out(merges_);
    uint64_t total = 256;
    for (size_t i = 0; i < merges_; ++i) {
      const auto& [left, right] = v_.merges[i];
      out[i] = {part_id(i, left), part_id(i, right)};
      const std::string made = left + right;
      const std::string& listed = v_.tokens[256 + i];
      if (listed != made) {
        const auto it = std::find(v_.tokens.begin(), v_.tokens.end(), made);
        throw ByteLevelError(
            Part::merge, i,
            fmt::format("{} {} makes {}, {}; merge {} must make token {}, which is {}",
                        detail::quoted_token(left), detail::quoted_token(right),
                        detail::quoted_token(made),
                        it != v_.tokens.end() ? fmt::format("token {}", it - v_.tokens.begin())
                                              : std::string("which is not in the vocabulary"),
                        i, 256 + i, detail::quoted_token(listed)));
      }
      const uint64_t length = bytes_[out[i].first] + bytes_[out[i].second];
      total += length;
      if (length > BpeTokenizer::kMaxTokenBytes || total > BpeTokenizer::kMaxTotalTokenBytes)
        throw ByteLevelError(
            Part::merge, i,
            fmt::format("its token of {} bytes passes the limit of {} bytes a "
                        "token ({} in all)",
                        length, BpeTokenizer::kMaxTokenBytes, BpeTokenizer::kMaxTotalTokenBytes));
      if (!ids_.emplace(listed, static_cast<uint32_t>(256 + i)).second)
        throw ByteLevelError(
            Part::token, 256 + i,
            fmt::format("{} repeats token {}", detail::quoted_token(listed), ids_.at(listed)));
      bytes_.push_back(static_cast<uint32_t>(length));
    }
    return out;
  }

  // The tokens after the merges' results: special tokens, as their text.
  std::vector<std::string> specials() {
    std::vector<std::string> out;
    for (size_t id = 256 + merges_; id < v_.tokens.size(); ++id) {
      const std::string& s = v_.tokens[id];
      if (s.empty() || s.size() > Gpt2Tokenizer::kMaxSpecialTokenBytes)
        throw ByteLevelError(Part::token, id,
                             fmt::format("a special token of {} bytes; 1 to {} expected", s.size(),
                                         Gpt2Tokenizer::kMaxSpecialTokenBytes));
      if (!ids_.emplace(s, static_cast<uint32_t>(id)).second)
        throw ByteLevelError(
            Part::token, id,
            fmt::format("{} repeats token {}", detail::quoted_token(s), ids_.at(s)));
      out.push_back(s);
    }
    if (out.size() > Gpt2Tokenizer::kMaxSpecialTokens)
      throw ByteLevelError(Part::whole, 0,
                           fmt::format("{} special tokens after the merges' results; at most {}",
                                       out.size(), Gpt2Tokenizer::kMaxSpecialTokens));
    if (v_.end_of_text && (*v_.end_of_text < static_cast<int64_t>(256 + merges_) ||
                           *v_.end_of_text >= static_cast<int64_t>(v_.tokens.size()) ||
                           v_.tokens[static_cast<size_t>(*v_.end_of_text)] != "<|endoftext|>"))
      throw ByteLevelError(Part::whole, 0,
                           fmt::format("end_of_text is {}, which is not the id of a special "
                                       "token <|endoftext|>",
                                       *v_.end_of_text));
    return out;
  }

 private:
  uint32_t part_id(size_t i, const std::string& part) const {
    const auto it = ids_.find(part);
    if (it == ids_.end())
      throw ByteLevelError(
          Part::merge, i,
          fmt::format("{} is not a token made before merge {}", detail::quoted_token(part), i));
    return it->second;
  }

  const ByteLevelVocab& v_;
  size_t merges_;
  std::unordered_map<std::string_view, uint32_t> ids_;  // text -> id, as far as checked
  std::vector<uint32_t> bytes_;                         // each token's length in bytes
};

// The tokenizer's own constructor checks the split pattern (the rest passed above).
template <class Make>
std::unique_ptr<Tokenizer> construct_tokenizer(Make make) {
  try {
    return make();
  } catch (const ByteLevelError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw ByteLevelError(Part::whole, 0, e.what());
  }
}

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_from_byte_level(ByteLevelVocab vocab) {
  VocabCheck check(vocab);
  check.bounds();
  std::vector<uint8_t> order = check.byte_order();
  std::vector<BpeTokenizer::Merge> merges = check.merges();
  std::vector<std::string> specials = check.specials();
  bool in_byte_order = true;
  for (size_t id = 0; id < 256; ++id) in_byte_order = in_byte_order && order[id] == id;
  // attograd's own kinds: no special token, or <|endoftext|> alone (reserved, the last id)
  const bool own =
      in_byte_order && specials.size() <= 1 && (specials.empty() || specials[0] == kEndOfTextToken);
  const EndOfText end = specials.empty() ? EndOfText::none : EndOfText::reserved;
  if (own && merges.empty() && vocab.split_pattern.empty())
    return std::make_unique<ByteTokenizer>(end);
  if (vocab.split_pattern.empty())
    throw ByteLevelError(Part::whole, 0,
                         "no split pattern: a vocabulary with merges or special tokens needs one");
  if (own)
    return construct_tokenizer([&] {
      return std::make_unique<BpeTokenizer>(std::move(merges), std::move(vocab.split_pattern), end);
    });
  return construct_tokenizer([&] {
    return std::make_unique<Gpt2Tokenizer>(std::move(order), std::move(merges),
                                           std::move(vocab.split_pattern), std::move(specials));
  });
}

std::unique_ptr<Tokenizer> bytes_alone_as_byte(std::unique_ptr<Tokenizer> tok) {
  const auto* bpe = dynamic_cast<const BpeTokenizer*>(tok.get());
  if (!bpe || !bpe->merges().empty()) return tok;
  return std::make_unique<ByteTokenizer>(bpe->end_of_text());
}

}  // namespace data
