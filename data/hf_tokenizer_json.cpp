// Hugging Face tokenizers' tokenizer.json for attograd's tokenizers (gpt2_tokenizer.h).
//
// What the file cannot say exactly (the same ids for every text attograd encodes, all the
// same): a char tokenizer refuses a character it lacks (unless it has a replacement, the
// file's unk_token), where tokenizers' BPE model drops it; and tokenizers matches an added
// token's text ("<|endoftext|>") in a text as that token, where attograd encodes it as
// ordinary text (tiktoken's encode_ordinary).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/utf8.h"
#include "data/gpt2_tokenizer.h"
#include "data/hf_bpe.h"

namespace data {

namespace {

using Json = nlohmann::ordered_json;

Json byte_level(bool use_regex) {
  return Json{{"type", "ByteLevel"},
              {"add_prefix_space", false},
              {"trim_offsets", true},
              {"use_regex", use_regex}};
}

// GPT-2's pattern is ByteLevel's own regex; any other is a Split before a ByteLevel that
// only maps bytes (attograd keeps the text between matches as pieces: "Isolated").
Json pre_tokenizer(const std::string& pattern) {
  if (pattern == kGpt2SplitPattern) return byte_level(true);
  if (pattern.empty()) return byte_level(false);
  Json split = {{"type", "Split"},
                {"pattern", {{"Regex", pattern}}},
                {"behavior", "Isolated"},
                {"invert", false}};
  return Json{{"type", "Sequence"}, {"pretokenizers", Json::array({split, byte_level(false)})}};
}

Json bpe_model(Json vocab, Json merges, Json unk_token) {
  return Json{{"type", "BPE"},
              {"dropout", nullptr},
              {"unk_token", std::move(unk_token)},
              {"continuing_subword_prefix", ""},
              {"end_of_word_suffix", ""},
              {"fuse_unk", false},
              {"byte_fallback", false},
              {"vocab", std::move(vocab)},
              {"merges", std::move(merges)}};
}

Json file(Json added, Json pre, Json decoder, Json model) {
  return Json{{"version", "1.0"},          {"truncation", nullptr},
              {"padding", nullptr},        {"added_tokens", std::move(added)},
              {"normalizer", nullptr},     {"pre_tokenizer", std::move(pre)},
              {"post_processor", nullptr}, {"decoder", std::move(decoder)},
              {"model", std::move(model)}};
}

Json byte_level_file(const ByteLevelVocab& v) {
  Json vocab = Json::object();
  for (size_t id = 0; id < v.tokens.size(); ++id) vocab[v.tokens[id]] = id;
  Json merges = Json::array();
  for (const auto& [left, right] : v.merges) merges.push_back(left + " " + right);
  Json added = Json::array();
  for (size_t id = 256 + v.merges.size(); id < v.tokens.size(); ++id)
    added.push_back({{"id", id},
                     {"content", v.tokens[id]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", true},
                     {"special", true}});
  Json decoder = byte_level(true);
  return file(std::move(added), pre_tokenizer(v.split_pattern), std::move(decoder),
              bpe_model(std::move(vocab), std::move(merges), nullptr));
}

// Characters as a BPE model without merges and without a pre-tokenizer: the text is one
// word, cut into its characters, each looked up; Fuse joins the decoded characters.
Json char_json(const CharTokenizer& tok) {
  Json vocab = Json::object();
  for (size_t id = 0; id < tok.code_points().size(); ++id) {
    std::string text;
    base::utf8_append(text, tok.code_points()[id]);
    vocab[text] = id;
  }
  Json unk = nullptr;
  if (const std::optional<int64_t> id = tok.replacement_id()) {
    std::string text;
    base::utf8_append(text, tok.code_points()[static_cast<size_t>(*id)]);
    unk = text;
  }
  return file(Json::array(), nullptr, Json{{"type", "Fuse"}},
              bpe_model(std::move(vocab), Json::array(), std::move(unk)));
}

// ---- hf: what it was read from, written back -----------------------------------------

Json added_entry(const AddedToken& t) {
  return Json{{"id", t.id},          {"content", t.content}, {"single_word", false},
              {"lstrip", false},     {"rstrip", false},      {"normalized", t.normalized},
              {"special", t.special}};
}

// A TemplateProcessing around the text (and, as tokenizers needs one, around a pair).
Json template_processing(const HfBpeTokenizer& tok) {
  const HfBpeSpec& spec = tok.spec();
  Json specials = Json::object();
  const auto piece = [&](uint32_t id, int type_id) {
    const std::string name = fmt::format("attograd_{}", id);
    specials[name] = {{"id", name}, {"ids", {id}}, {"tokens", {byte_level_text(spec.tokens[id])}}};
    return Json{{"SpecialToken", {{"id", name}, {"type_id", type_id}}}};
  };
  const auto sequence = [&](const char* which, int type_id) {
    Json out = Json::array();
    for (const uint32_t id : spec.prefix) out.push_back(piece(id, type_id));
    out.push_back({{"Sequence", {{"id", which}, {"type_id", type_id}}}});
    for (const uint32_t id : spec.suffix) out.push_back(piece(id, type_id));
    return out;
  };
  Json pair = sequence("A", 0);
  for (Json& p : sequence("B", 1)) pair.push_back(std::move(p));
  return Json{{"type", "TemplateProcessing"},
              {"single", sequence("A", 0)},
              {"pair", std::move(pair)},
              {"special_tokens", std::move(specials)}};
}

Json hf_pre_tokenizer(const std::string& pattern) {
  if (pattern != kDigitsGpt2SplitPattern) return pre_tokenizer(pattern);
  return Json{{"type", "Sequence"},
              {"pretokenizers",
               Json::array({{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)})}};
}

Json hf_json(const HfBpeTokenizer& tok) {
  const HfBpeSpec& spec = tok.spec();
  std::vector<bool> outside(spec.tokens.size());
  Json added = Json::array();
  for (const AddedToken& t : spec.added) {
    outside[t.id] = !t.in_vocabulary;
    added.push_back(added_entry(t));
  }
  Json vocab = Json::object();
  for (size_t id = 0; id < spec.tokens.size(); ++id)
    if (!outside[id]) vocab[byte_level_text(spec.tokens[id])] = id;
  Json merges = Json::array();
  for (const auto& [left, right] : spec.merges)
    merges.push_back(byte_level_text(spec.tokens[left]) + " " +
                     byte_level_text(spec.tokens[right]));
  Json model = bpe_model(std::move(vocab), std::move(merges), nullptr);
  model["ignore_merges"] = spec.ignore_merges;
  Json out = file(std::move(added), hf_pre_tokenizer(spec.split_pattern), byte_level(true),
                  std::move(model));
  if (spec.normalizer == Normalizer::nfc) out["normalizer"] = {{"type", "NFC"}};
  if (!spec.prefix.empty() || !spec.suffix.empty())
    out["post_processor"] = template_processing(tok);
  return out;
}

}  // namespace

std::string hf_tokenizer_json(const Tokenizer& tok) {
  if (const auto* c = dynamic_cast<const CharTokenizer*>(&tok)) return char_json(*c).dump(2) + "\n";
  if (const auto* h = dynamic_cast<const HfBpeTokenizer*>(&tok)) return hf_json(*h).dump(2) + "\n";
  return byte_level_file(byte_level_vocab(tok)).dump(2) + "\n";
}

}  // namespace data
