// Gpt2Tokenizer: attograd's BPE machinery under GPT-2's numbering of the byte tokens, with
// special tokens after the merges (gpt2_tokenizer.h).
#include "data/gpt2_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "base/utf8.h"
#include "data/hf_bpe.h"

namespace data {

namespace {

std::vector<uint8_t> checked_order(std::vector<uint8_t> order) {
  if (order.size() != 256)
    throw std::invalid_argument(fmt::format(
        "gpt2 tokenizer: {} byte tokens; a byte-level vocabulary has all 256", order.size()));
  std::array<int, 256> id_of{};
  id_of.fill(-1);
  for (size_t i = 0; i < 256; ++i) {
    if (id_of[order[i]] >= 0)
      throw std::invalid_argument(fmt::format(
          "gpt2 tokenizer: byte {} is both token {} and token {}", order[i], id_of[order[i]], i));
    id_of[order[i]] = static_cast<int>(i);
  }
  return order;
}

std::array<uint32_t, 256> inverse(const std::vector<uint8_t>& order) {
  std::array<uint32_t, 256> id_of{};
  for (uint32_t i = 0; i < 256; ++i) id_of[order[i]] = i;
  return id_of;
}

// The merges over byte-valued ids (what BpeTokenizer numbers), after the check that each
// part exists before the merge, in this vocabulary's ids (so the message uses them).
std::vector<BpeTokenizer::Merge> byte_valued(const std::vector<BpeTokenizer::Merge>& merges,
                                             const std::vector<uint8_t>& order) {
  std::vector<BpeTokenizer::Merge> out(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto [left, right] = merges[i];
    for (const uint32_t part : {left, right})
      if (part >= 256 + i)
        throw std::invalid_argument(fmt::format(
            "gpt2 tokenizer: merge {} ({}, {}) uses token {}, which does not exist before it "
            "(merge {} may only use ids below {})",
            i, left, right, part, i, 256 + i));
    out[i] = {left < 256 ? order[left] : left, right < 256 ? order[right] : right};
  }
  return out;
}

BpeTokenizer make_gpt2_bpe(std::vector<BpeTokenizer::Merge> merges, std::string pattern) {
  try {
    return BpeTokenizer(std::move(merges), std::move(pattern));
  } catch (const std::invalid_argument& e) {
    std::string why = e.what();
    if (why.rfind("bpe tokenizer: ", 0) == 0) why.erase(0, 15);
    throw std::invalid_argument("gpt2 tokenizer: " + why);
  }
}

std::vector<std::string> checked_specials(std::vector<std::string> specials, size_t first_id) {
  if (specials.size() > Gpt2Tokenizer::kMaxSpecialTokens)
    throw std::invalid_argument(fmt::format("gpt2 tokenizer: {} special tokens; at most {}",
                                            specials.size(), Gpt2Tokenizer::kMaxSpecialTokens));
  for (size_t k = 0; k < specials.size(); ++k) {
    const std::string& s = specials[k];
    const std::string what =
        fmt::format("gpt2 tokenizer: special token {} (id {})", k, first_id + k);
    if (s.empty() || s.size() > Gpt2Tokenizer::kMaxSpecialTokenBytes)
      throw std::invalid_argument(fmt::format("{} has {} bytes; 1 to {} expected", what, s.size(),
                                              Gpt2Tokenizer::kMaxSpecialTokenBytes));
    try {
      base::check_utf8(s);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("{}: {}", what, e.what()));
    }
    for (size_t j = 0; j < k; ++j)
      if (specials[j] == s)
        throw std::invalid_argument(
            fmt::format("{} repeats special token {} ('{}')", what, j, base::printable(s)));
  }
  return specials;
}

}  // namespace

Gpt2Tokenizer::Gpt2Tokenizer(std::vector<uint8_t> byte_order, std::vector<Merge> merges,
                             std::string split_pattern, std::vector<std::string> special_tokens)
    : byte_order_(checked_order(std::move(byte_order))),
      id_of_byte_(inverse(byte_order_)),
      merges_(std::move(merges)),
      bpe_(make_gpt2_bpe(byte_valued(merges_, byte_order_), std::move(split_pattern))),
      specials_(checked_specials(std::move(special_tokens), 256 + merges_.size())) {}

std::vector<uint8_t> Gpt2Tokenizer::gpt2_byte_order() {
  std::vector<uint8_t> order;
  const auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  for (int b = 0; b < 256; ++b)
    if (printable(b)) order.push_back(static_cast<uint8_t>(b));
  for (int b = 0; b < 256; ++b)
    if (!printable(b)) order.push_back(static_cast<uint8_t>(b));
  return order;
}

int64_t Gpt2Tokenizer::vocab_size() const {
  return first_special_id() + static_cast<int64_t>(specials_.size());
}

void Gpt2Tokenizer::encode_append(std::string_view utf8, std::vector<uint32_t>& out) const {
  const size_t before = out.size();
  bpe_.encode_append(utf8, out);
  for (size_t i = before; i < out.size(); ++i)
    if (out[i] < 256) out[i] = id_of_byte_[out[i]];
}

std::vector<int64_t> Gpt2Tokenizer::encode(const std::string& utf8) const {
  std::vector<uint32_t> ids;
  ids.reserve(utf8.size() / 3);
  encode_append(utf8, ids);
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::string_view Gpt2Tokenizer::token_bytes(uint32_t id) const {
  if (id < 256) return bpe_.token_bytes(byte_order_[id]);
  if (id < first_special_id()) return bpe_.token_bytes(id);
  return specials_[id - first_special_id()];
}

std::string Gpt2Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size())
      throw std::out_of_range(
          fmt::format("gpt2 tokenizer: id {} at position {} is outside the vocabulary of {}",
                      ids[i], i, vocab_size()));
    out += token_bytes(static_cast<uint32_t>(ids[i]));
  }
  return out;
}

std::optional<int64_t> Gpt2Tokenizer::special_id(std::string_view text) const {
  for (size_t k = 0; k < specials_.size(); ++k)
    if (specials_[k] == text) return first_special_id() + static_cast<int64_t>(k);
  return std::nullopt;
}

std::unique_ptr<BpeStreamEncoder> make_stream_encoder(const Tokenizer& tokenizer) {
  if (const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tokenizer))
    return std::make_unique<BpeStreamEncoder>(*bpe);
  if (const auto* gpt2 = dynamic_cast<const Gpt2Tokenizer*>(&tokenizer))
    return std::make_unique<BpeStreamEncoder>(gpt2->byte_ordered(), gpt2->id_of_byte());
  if (const auto* hf = dynamic_cast<const HfBpeTokenizer*>(&tokenizer))
    return make_hf_stream_encoder(*hf);
  return nullptr;
}

}  // namespace data
