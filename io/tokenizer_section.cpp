#include "io/tokenizer_section.h"

#include <fmt/format.h>

#include "base/json.h"
#include "base/utf8.h"
#include "data/gpt2_tokenizer.h"
#include "data/hf_bpe.h"
#include "io/read_protocol.h"

namespace io {

data::TokenizerKind tokenizer_kind(const TokenizerSection& section) {
  if (const auto kind = base::find_choice<data::TokenizerKind>(section.type)) return *kind;
  throw std::invalid_argument(
      fmt::format("unsupported tokenizer type '{}'", base::printable(section.type)));
}

namespace {

std::unique_ptr<data::Tokenizer> make_gpt2_tokenizer(const TokenizerSection& section) {
  std::vector<uint8_t> order(section.byte_order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    if (section.byte_order[i] > 255)
      throw std::invalid_argument(fmt::format("gpt2 tokenizer: byte_order[{}] is {}, not a byte", i,
                                              section.byte_order[i]));
    order[i] = static_cast<uint8_t>(section.byte_order[i]);
  }
  return std::make_unique<data::Gpt2Tokenizer>(std::move(order), section.merges,
                                               section.split_pattern, section.special_tokens);
}

// The section's token bytes cut at their ends, and its settings.
std::unique_ptr<data::Tokenizer> make_hf_tokenizer(const TokenizerSection& section) {
  data::HfBpeSpec spec;
  uint64_t begin = 0;
  for (size_t id = 0; id < section.token_ends.size(); ++id) {
    const uint64_t end = section.token_ends[id];
    if (end < begin || end > section.token_bytes.size())
      throw std::invalid_argument(
          fmt::format("hf tokenizer: token {} ends at byte {}, not between {} and {}", id, end,
                      begin, section.token_bytes.size()));
    spec.tokens.push_back(section.token_bytes.substr(begin, end - begin));
    begin = end;
  }
  if (begin != section.token_bytes.size())
    throw std::invalid_argument(fmt::format("hf tokenizer: {} bytes after the last token",
                                            section.token_bytes.size() - begin));
  spec.merges = section.merges;
  spec.split_pattern = section.split_pattern;
  data::read_hf_settings(section.hf_settings, spec);
  return std::make_unique<data::HfBpeTokenizer>(std::move(spec));
}

// byte and bpe: no special tokens (a file written before <|endoftext|> was reserved), or
// that one alone.
data::EndOfText end_of_text(const TokenizerSection& section) {
  if (section.special_tokens.empty()) return data::EndOfText::none;
  if (section.special_tokens != std::vector<std::string>{data::kEndOfTextToken})
    throw std::invalid_argument(
        fmt::format("{} tokenizer: special_tokens must be [\"<|endoftext|>\"], the one token it "
                    "reserves",
                    section.type));
  return data::EndOfText::reserved;
}

}  // namespace

std::unique_ptr<data::Tokenizer> make_tokenizer(const TokenizerSection& section) {
  const std::optional<data::TokenizerKind> kind =
      base::find_choice<data::TokenizerKind>(section.type);
  switch (kind.value_or(data::TokenizerKind::none)) {
    case data::TokenizerKind::chars: return std::make_unique<data::CharTokenizer>(section.vocab);
    case data::TokenizerKind::bytes:
      return std::make_unique<data::ByteTokenizer>(end_of_text(section));
    case data::TokenizerKind::bpe:
      return std::make_unique<data::BpeTokenizer>(section.merges, section.split_pattern,
                                                  end_of_text(section));
    case data::TokenizerKind::gpt2: return make_gpt2_tokenizer(section);
    case data::TokenizerKind::hf: return make_hf_tokenizer(section);
    case data::TokenizerKind::none: break;
  }
  throw std::runtime_error(fmt::format("unsupported tokenizer type '{}'", section.type));
}

TokenizerSection tokenizer_section(const data::Tokenizer& tok) {
  TokenizerSection s;
  s.type = tok.type();
  if (auto* ct = dynamic_cast<const data::CharTokenizer*>(&tok)) s.vocab = ct->code_points();
  if (auto* bt = dynamic_cast<const data::BpeTokenizer*>(&tok)) {
    s.merges = bt->merges();
    s.split_pattern = bt->split_pattern();
  }
  if (tok.reserved_end_of_text()) s.special_tokens = {data::kEndOfTextToken};
  if (auto* gt = dynamic_cast<const data::Gpt2Tokenizer*>(&tok)) {
    s.merges = gt->merges();
    s.split_pattern = gt->split_pattern();
    s.byte_order.assign(gt->byte_order().begin(), gt->byte_order().end());
    s.special_tokens = gt->special_tokens();
  }
  if (auto* ht = dynamic_cast<const data::HfBpeTokenizer*>(&tok)) {
    const data::HfBpeSpec& spec = ht->spec();
    for (const std::string& t : spec.tokens) {
      s.token_bytes += t;
      s.token_ends.push_back(static_cast<uint32_t>(s.token_bytes.size()));
    }
    s.merges = spec.merges;
    s.split_pattern = spec.split_pattern;
    s.hf_settings = data::hf_settings_json(spec);
  }
  return s;
}

std::string special_tokens_json(const std::vector<std::string>& tokens) {
  const std::string json = nlohmann::json(tokens).dump(-1, ' ', /*ensure_ascii=*/true);
  if (json.size() > kMaxSpecialTokensJsonBytes)
    throw std::invalid_argument(fmt::format("the special tokens take {} bytes as JSON; at most {}",
                                            json.size(), kMaxSpecialTokensJsonBytes));
  return json;
}

std::vector<std::string> parse_special_tokens_json(const std::string& json) {
  if (json.size() > kMaxSpecialTokensJsonBytes)
    throw std::runtime_error(
        fmt::format("{} bytes; at most {}", json.size(), kMaxSpecialTokensJsonBytes));
  nlohmann::json value;
  try {
    value = base::parse_json(json);
  } catch (const base::JsonError& e) {
    throw std::runtime_error(e.what());
  }
  if (!value.is_array()) throw std::runtime_error("not a JSON array of strings");
  std::vector<std::string> tokens;
  for (const auto& v : value) {
    if (!v.is_string())
      throw std::runtime_error(
          fmt::format("entry {} is {}, not a string", tokens.size(), base::json_kind(v)));
    tokens.push_back(v.get<std::string>());
  }
  return tokens;
}

namespace detail {

namespace {

bool row_is(size_t row, const char* name) {
  return row == row_of(Section::tokenizer, name);
}

}  // namespace

bool tokenizer_holds(const TokenizerSection& t, size_t row) {
  if (row_is(row, "type")) return true;
  if (row_is(row, "vocab")) return !t.vocab.empty();
  if (row_is(row, "split_pattern")) return !t.split_pattern.empty();
  if (row_is(row, "merges")) return !t.merges.empty();
  if (row_is(row, "byte_order")) return !t.byte_order.empty();
  if (row_is(row, "token_bytes")) return !t.token_bytes.empty();
  if (row_is(row, "token_ends")) return !t.token_ends.empty();
  if (row_is(row, "hf_settings")) return !t.hf_settings.empty();
  return !t.special_tokens.empty();
}

std::string tokenizer_text(const TokenizerSection& t, size_t row, TextFor text_for) {
  if (row_is(row, "type")) return t.type;
  if (row_is(row, "split_pattern")) return t.split_pattern;
  if (row_is(row, "hf_settings")) return t.hf_settings;
  if (text_for == TextFor::file) return special_tokens_json(t.special_tokens);
  return nlohmann::json(t.special_tokens).dump(-1, ' ', /*ensure_ascii=*/false);
}

std::vector<uint64_t> tokenizer_integers(const TokenizerSection& t, size_t row,
                                         std::vector<uint64_t>& dims) {
  if (row_is(row, "merges")) {
    std::vector<uint64_t> pairs;
    pairs.reserve(2 * t.merges.size());
    for (const auto& [left, right] : t.merges) pairs.insert(pairs.end(), {left, right});
    dims = {t.merges.size(), 2};
    return pairs;
  }
  if (row_is(row, "token_bytes")) {
    dims = {t.token_bytes.size()};
    std::vector<uint64_t> bytes(t.token_bytes.size());
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(t.token_bytes[i]);
    return bytes;
  }
  const std::vector<uint32_t>& values = row_is(row, "vocab")        ? t.vocab
                                        : row_is(row, "token_ends") ? t.token_ends
                                                                    : t.byte_order;
  dims = {values.size()};
  return {values.begin(), values.end()};
}

void set_tokenizer_text(TokenizerSection& t, size_t row, const std::string& text) {
  if (row_is(row, "type"))
    t.type = text;
  else if (row_is(row, "split_pattern"))
    t.split_pattern = text;
  else if (row_is(row, "hf_settings"))
    t.hf_settings = text;
  else
    t.special_tokens = parse_special_tokens_json(text);
}

void set_tokenizer_integers(TokenizerSection& t, size_t row, const std::vector<uint64_t>& values) {
  if (row_is(row, "merges")) {
    t.merges.resize(values.size() / 2);
    for (size_t i = 0; i < t.merges.size(); ++i)
      t.merges[i] = {static_cast<uint32_t>(values[2 * i]),
                     static_cast<uint32_t>(values[2 * i + 1])};
    return;
  }
  if (row_is(row, "token_bytes")) {
    t.token_bytes.resize(values.size());
    for (size_t i = 0; i < values.size(); ++i) t.token_bytes[i] = static_cast<char>(values[i]);
    return;
  }
  (row_is(row, "vocab")        ? t.vocab
   : row_is(row, "token_ends") ? t.token_ends
                               : t.byte_order)
      .assign(values.begin(), values.end());
}

void for_each_tokenizer_item(
    const TokenizerSection& t, TextFor text_for, bool also_misplaced,
    const std::function<void(size_t row, const std::string& text)>& on_text,
    const std::function<void(size_t row, const std::vector<uint64_t>& dims,
                             const std::vector<uint64_t>& values)>& on_integers) {
  const auto items = layout(Section::tokenizer).items;
  for (size_t row = 0; row < items.size(); ++row) {
    const bool held = held_for(items[row], t.type) && (!optional_for(items[row], t.type) ||
                                                       tokenizer_holds(t, row));  // none: left out
    if (!held && !(also_misplaced && tokenizer_holds(t, row))) continue;
    if (items[row].kind == ItemKind::text) {
      on_text(row, tokenizer_text(t, row, text_for));
      continue;
    }
    std::vector<uint64_t> dims;
    const std::vector<uint64_t> values = tokenizer_integers(t, row, dims);
    on_integers(row, dims, values);
  }
}

}  // namespace detail

}  // namespace io
