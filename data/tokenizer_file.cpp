#include "data/tokenizer_file.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "data/data_error.h"
#include "data/gpt2_tokenizer.h"
#include "data/hf_bpe.h"
#include "data/posix_io.h"
#include "data/strict_json.h"

namespace data {

namespace {

using detail::JsonObject;

std::string header(std::string_view type) {
  return fmt::format("{{\n  \"format\": {},\n  \"format_version\": {},\n  \"type\": {}",
                     nlohmann::json(kTokenizerFileFormat).dump(), kTokenizerFileVersion,
                     nlohmann::json(type).dump());
}

// One line per 16 code points, one per merge: a file a person can read and diff.
std::string char_file(const CharTokenizer& tok) {
  std::string out = header("char") + ",\n  \"code_points\": [";
  const auto& cps = tok.code_points();
  for (size_t i = 0; i < cps.size(); ++i)
    out += fmt::format("{}{}", i == 0 ? "\n    " : i % 16 == 0 ? ",\n    " : ", ", cps[i]);
  return out + (cps.empty() ? "]\n}\n" : "\n  ]\n}\n");
}

std::string merges_list(const std::vector<BpeTokenizer::Merge>& merges) {
  std::string out = ",\n  \"merges\": [";
  for (size_t i = 0; i < merges.size(); ++i)
    out +=
        fmt::format("{}[{}, {}]", i == 0 ? "\n    " : ",\n    ", merges[i].first, merges[i].second);
  return out + (merges.empty() ? "]" : "\n  ]");
}

// A reserved <|endoftext|> is the key special_tokens; a file without it (one written before
// it was reserved) has none, so its ids and vocabulary stay what they were.
std::string end_of_text_key(EndOfText end_of_text) {
  if (end_of_text != EndOfText::reserved) return "";
  return ",\n  \"special_tokens\": " + nlohmann::json::array({kEndOfTextToken}).dump();
}

std::string bpe_file(const BpeTokenizer& tok) {
  return header("bpe") + ",\n  \"split_pattern\": " + nlohmann::json(tok.split_pattern()).dump() +
         merges_list(tok.merges()) + end_of_text_key(tok.end_of_text()) + "\n}\n";
}

// gpt2: its byte order on one line, merges in its own ids, special tokens (ASCII, escaped).
std::string gpt2_file(const Gpt2Tokenizer& tok) {
  return header("gpt2") + ",\n  \"split_pattern\": " + nlohmann::json(tok.split_pattern()).dump() +
         ",\n  \"byte_order\": " + nlohmann::json(tok.byte_order()).dump() +
         merges_list(tok.merges()) +
         ",\n  \"special_tokens\": " + nlohmann::json(tok.special_tokens()).dump(-1, ' ', true) +
         "\n}\n";
}

// hf: every token in byte-level form (bytes_to_unicode, as tokenizer.json writes them), its
// merges in its own ids, and the rest of its spec (hf_settings_json) as an object.
std::string hf_file(const HfBpeTokenizer& tok) {
  std::vector<std::string> tokens;
  for (const std::string& t : tok.spec().tokens) tokens.push_back(byte_level_text(t));
  return header("hf") +
         ",\n  \"split_pattern\": " + nlohmann::json(tok.spec().split_pattern).dump() +
         ",\n  \"tokens\": " + nlohmann::json(tokens).dump(-1, ' ', true) +
         merges_list(tok.spec().merges) + ",\n  \"settings\": " + hf_settings_json(tok.spec()) +
         "\n}\n";
}

// The lists of numbers a tokenizer file may hold, read as they are parsed.
struct Lists {
  Lists() {
    code_points.key = "code_points", code_points.max_value = 0x10FFFF;
    code_points.max_entries = 0x110000, code_points.entry = "a code point (0 to 1114111)";
    merges.key = "merges", merges.group = 2;
    merges.max_entries = static_cast<size_t>(kMaxBpeVocabSize - 256);
    merges.entry = "a pair of token ids [left, right]";
    byte_order.key = "byte_order", byte_order.max_value = 255, byte_order.max_entries = 256;
    byte_order.entry = "a byte (0 to 255)";
  }
  base::NumberList code_points, merges, byte_order;
};

template <class Make>
std::unique_ptr<Tokenizer> construct(const std::string& name, Make make) {
  try {
    return make();
  } catch (const std::invalid_argument& e) {  // what the tokenizer's own checks refuse
    throw DataError(fmt::format("{}: {}", name, e.what()));
  } catch (const std::length_error& e) {
    throw DataError(fmt::format("{}: {}", name, e.what()));
  }
}

std::unique_ptr<Tokenizer> char_from(const JsonObject& top, Lists& lists, const std::string& name) {
  top.expect_keys({"format", "format_version", "type", "code_points"});
  top.array("code_points");
  if (lists.code_points.values.empty())
    top.fail("code_points", "is empty: a char tokenizer needs a vocabulary");
  return construct(
      name, [&] { return std::make_unique<CharTokenizer>(std::move(lists.code_points.values)); });
}

std::string pattern_from(const JsonObject& top) {
  std::string pattern = top.string("split_pattern");
  if (pattern.size() > kMaxSplitPatternBytes)
    top.fail("split_pattern", fmt::format("has {} bytes, more than the {} a pattern may have",
                                          pattern.size(), kMaxSplitPatternBytes));
  return pattern;
}

std::vector<BpeTokenizer::Merge> merges_from(const JsonObject& top, const Lists& lists) {
  top.array("merges");
  const std::vector<uint32_t>& ids = lists.merges.values;
  std::vector<BpeTokenizer::Merge> merges(ids.size() / 2);
  for (size_t i = 0; i < merges.size(); ++i) merges[i] = {ids[2 * i], ids[2 * i + 1]};
  return merges;
}

std::vector<std::string> special_tokens_from(const JsonObject& top) {
  const nlohmann::json& list = top.array("special_tokens");
  std::vector<std::string> specials;
  for (size_t k = 0; k < list.size(); ++k) {
    if (!list[k].is_string())
      top.fail("special_tokens",
               fmt::format("entry {} is {}, not a string", k, base::json_kind(list[k])));
    specials.push_back(list[k].get<std::string>());
  }
  return specials;
}

// byte and bpe: special_tokens, when present, is exactly ["<|endoftext|>"].
EndOfText end_of_text_from(const JsonObject& top) {
  if (!top.has("special_tokens")) return EndOfText::none;
  if (special_tokens_from(top) != std::vector<std::string>{kEndOfTextToken})
    top.fail("special_tokens",
             "must be [\"<|endoftext|>\"], the one token a byte or bpe "
             "tokenizer reserves");
  return EndOfText::reserved;
}

std::unique_ptr<Tokenizer> bpe_from(const JsonObject& top, Lists& lists, const std::string& name) {
  if (top.has("special_tokens"))
    top.expect_keys(
        {"format", "format_version", "type", "split_pattern", "merges", "special_tokens"});
  else
    top.expect_keys({"format", "format_version", "type", "split_pattern", "merges"});
  std::string pattern = pattern_from(top);
  std::vector<BpeTokenizer::Merge> merges = merges_from(top, lists);
  const EndOfText end = end_of_text_from(top);
  return construct(name, [&] {
    return std::make_unique<BpeTokenizer>(std::move(merges), std::move(pattern), end);
  });
}

std::unique_ptr<Tokenizer> gpt2_from(const JsonObject& top, Lists& lists, const std::string& name) {
  top.expect_keys({"format", "format_version", "type", "split_pattern", "byte_order", "merges",
                   "special_tokens"});
  std::string pattern = pattern_from(top);
  top.array("byte_order");
  std::vector<uint8_t> order(lists.byte_order.values.begin(), lists.byte_order.values.end());
  std::vector<BpeTokenizer::Merge> merges = merges_from(top, lists);
  std::vector<std::string> specials = special_tokens_from(top);
  return construct(name, [&] {
    return std::make_unique<Gpt2Tokenizer>(std::move(order), std::move(merges), std::move(pattern),
                                           std::move(specials));
  });
}

std::unique_ptr<Tokenizer> hf_from(const JsonObject& top, Lists& lists, const std::string& name) {
  top.expect_keys(
      {"format", "format_version", "type", "split_pattern", "tokens", "merges", "settings"});
  HfBpeSpec spec;
  spec.split_pattern = pattern_from(top);
  const nlohmann::json& tokens = top.array("tokens");
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::optional<std::string> bytes =
        tokens[id].is_string() ? byte_level_bytes(tokens[id].get_ref<const std::string&>())
                               : std::nullopt;
    if (!bytes) top.fail("tokens", fmt::format("entry {} is not a token in byte-level form", id));
    spec.tokens.push_back(*bytes);
  }
  spec.merges = merges_from(top, lists);
  return construct(name, [&] {
    read_hf_settings(top.value("settings").dump(), spec);
    return std::make_unique<HfBpeTokenizer>(std::move(spec));
  });
}

}  // namespace

std::string tokenizer_file_bytes(const Tokenizer& tokenizer) {
  if (const auto* c = dynamic_cast<const CharTokenizer*>(&tokenizer)) return char_file(*c);
  if (const auto* b = dynamic_cast<const BpeTokenizer*>(&tokenizer)) return bpe_file(*b);
  if (const auto* g = dynamic_cast<const Gpt2Tokenizer*>(&tokenizer)) return gpt2_file(*g);
  if (const auto* h = dynamic_cast<const HfBpeTokenizer*>(&tokenizer)) return hf_file(*h);
  if (const auto* b = dynamic_cast<const ByteTokenizer*>(&tokenizer))
    return header("byte") + end_of_text_key(b->end_of_text()) + "\n}\n";
  throw std::invalid_argument(
      fmt::format("a '{}' tokenizer cannot be saved as a file", tokenizer.type()));
}

std::unique_ptr<Tokenizer> parse_tokenizer_file(std::string_view bytes, const std::string& name) {
  if (bytes.size() > kMaxTokenizerFileBytes)
    throw DataError(fmt::format("{}: {} bytes is more than a tokenizer file may have ({})", name,
                                bytes.size(), kMaxTokenizerFileBytes));
  Lists lists;
  const nlohmann::json json = detail::parse_strict_json(
      bytes, name, {&lists.code_points, &lists.merges, &lists.byte_order});
  const JsonObject top(json, name, "");
  if (top.string("format") != kTokenizerFileFormat)
    top.fail("format", fmt::format("must be \"{}\": this is not an attograd tokenizer file",
                                   kTokenizerFileFormat));
  if (const uint64_t v = top.uint("format_version"); v != kTokenizerFileVersion)
    top.fail("format_version",
             fmt::format("is {}; this attograd reads version {}", v, kTokenizerFileVersion));
  const std::string type = top.string("type");
  switch (base::find_choice<TokenizerKind>(type).value_or(TokenizerKind::none)) {
    case TokenizerKind::chars: return char_from(top, lists, name);
    case TokenizerKind::bpe: return bpe_from(top, lists, name);
    case TokenizerKind::gpt2: return gpt2_from(top, lists, name);
    case TokenizerKind::hf: return hf_from(top, lists, name);
    case TokenizerKind::bytes:
      if (top.has("special_tokens"))
        top.expect_keys({"format", "format_version", "type", "special_tokens"});
      else
        top.expect_keys({"format", "format_version", "type"});
      return std::make_unique<ByteTokenizer>(end_of_text_from(top));
    case TokenizerKind::none: break;
  }
  top.fail("type",
           fmt::format("is {}, not one of char, byte, bpe, gpt2, hf", base::json_quote(type)));
}

std::unique_ptr<Tokenizer> read_tokenizer_file(const std::string& path) {
  detail::InputFile file(path, path);
  return parse_tokenizer_file(file.read_all(kMaxTokenizerFileBytes), path);
}

}  // namespace data
