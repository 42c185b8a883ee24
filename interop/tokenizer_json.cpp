#include "interop/tokenizer_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "base/json.h"
#include "base/utf8.h"
#include "data/gpt2_tokenizer.h"
#include "data/hf_bpe.h"
#include "data/tokenizer_file.h"
#include "interop/input_bytes.h"
#include "interop/json_stream.h"
#include "interop/model_files.h"
#include "io/tokenizer_section.h"

namespace interop {

namespace {

using json = nlohmann::json;

constexpr size_t kMaxTokens =
    static_cast<size_t>(data::kMaxBpeVocabSize) + data::Gpt2Tokenizer::kMaxSpecialTokens;
constexpr size_t kMaxMerges = static_cast<size_t>(data::kMaxBpeVocabSize) - 256;
constexpr size_t kSmallValue = 64;  // a pre-tokenizer, a decoder: a few short members

// What the file holds, as it was read: the vocabulary's entries, the merges, the added
// tokens, and the small settings (top-level and the model's) kept as JSON.
struct Parsed {
  std::string source;
  std::vector<std::pair<std::string, uint64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<std::pair<uint64_t, std::string>> added;  // id, content
  std::vector<data::AddedToken> added_flags;            // the same, with their flags
  json top = json::object();
  json model = json::object();
  std::set<std::string> seen;  // every key read so far ("model.vocab"), kept or streamed

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw InteropError(fmt::format("{}: {} {}", source, where, what));
  }
  void once(const std::string& where) {
    if (!seen.insert(where).second) fail(where, "appears twice");
  }
};

// model.vocab: token -> id, each counted before it is stored.
struct VocabReader final : JsonReader {
  Parsed& p;
  explicit VocabReader(Parsed& parsed) : p(parsed) {}
  void open(bool object) override {
    if (!object) p.fail("model.vocab", "is an array, not an object of token -> id");
  }
  Use use(const std::string&, size_t) override {
    if (p.vocab.size() >= kMaxTokens)
      p.fail("model.vocab", fmt::format("has more than {} tokens", kMaxTokens));
    return keep(1);
  }
  void value(const std::string& token, size_t, json v) override {
    if (!v.is_number_unsigned())
      p.fail("model.vocab", fmt::format("entry {}: the id is {}, not an unsigned integer",
                                        p.vocab.size(), base::json_kind(v)));
    p.vocab.emplace_back(token, v.get<uint64_t>());
  }
};

// model.merges: "left right" (tokenizers before 0.20) or ["left", "right"].
struct MergesReader final : JsonReader {
  Parsed& p;
  explicit MergesReader(Parsed& parsed) : p(parsed) {}
  void open(bool object) override {
    if (object) p.fail("model.merges", "is an object, not an array");
  }
  Use use(const std::string&, size_t i) override {
    if (i >= kMaxMerges) p.fail("model.merges", fmt::format("has more than {} merges", kMaxMerges));
    return keep(3);
  }
  void value(const std::string&, size_t i, json v) override {
    std::string left, right;
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      if (space != std::string::npos && s.find(' ', space + 1) == std::string::npos)
        left = s.substr(0, space), right = s.substr(space + 1);
    } else if (v.is_array() && v.size() == 2 && v[0].is_string() && v[1].is_string()) {
      left = v[0].get<std::string>(), right = v[1].get<std::string>();
    }
    if (left.empty() || right.empty())
      p.fail(fmt::format("model.merges[{}]", i),
             "is not a merge (\"left right\", or [\"left\", \"right\"], of two tokens)");
    p.merges.emplace_back(std::move(left), std::move(right));
  }
};

// An added token's flag: absent is tokenizers' default.
bool flag(const Parsed& p, const json& v, const char* key, bool fallback, size_t i) {
  const auto it = v.find(key);
  if (it == v.end()) return fallback;
  if (!it->is_boolean()) p.fail(fmt::format("added_tokens[{}].{}", i, key), "is not true or false");
  return it->get<bool>();
}

// added_tokens: objects with an id, a content and how tokenizers matches them in a text.
struct AddedReader final : JsonReader {
  Parsed& p;
  explicit AddedReader(Parsed& parsed) : p(parsed) {}
  void open(bool object) override {
    if (object) p.fail("added_tokens", "is an object, not an array");
  }
  Use use(const std::string&, size_t i) override {
    if (i >= data::Gpt2Tokenizer::kMaxSpecialTokens)
      p.fail("added_tokens",
             fmt::format("has more than {} tokens", data::Gpt2Tokenizer::kMaxSpecialTokens));
    return keep(16);
  }
  void value(const std::string&, size_t i, json v) override {
    const json id = v.is_object() ? v.value("id", json()) : json();
    const json content = v.is_object() ? v.value("content", json()) : json();
    if (!id.is_number_unsigned() || !content.is_string())
      p.fail(fmt::format("added_tokens[{}]", i),
             "is not an object with an unsigned id and a string content");
    p.added.emplace_back(id.get<uint64_t>(), content.get<std::string>());
    for (const char* key : {"lstrip", "rstrip", "single_word"})
      if (flag(p, v, key, false, i))
        p.fail(fmt::format("added_tokens[{}].{}", i, key),
               "is true: attograd matches an added token's text alone, as it is");
    data::AddedToken t;
    t.id = static_cast<uint32_t>(std::min<uint64_t>(id.get<uint64_t>(), UINT32_MAX));
    t.content = content.get<std::string>();
    t.special = flag(p, v, "special", false, i);
    t.normalized = flag(p, v, "normalized", !t.special, i);
    p.added_flags.push_back(std::move(t));
  }
};

// The keys a file may hold: the model's small ones, the top's small ones.
const std::set<std::string> kModelKeys = {"type",
                                          "dropout",
                                          "unk_token",
                                          "fuse_unk",
                                          "byte_fallback",
                                          "ignore_merges",
                                          "continuing_subword_prefix",
                                          "end_of_word_suffix"};
const std::set<std::string> kTopKeys = {"version",       "truncation",     "padding", "normalizer",
                                        "pre_tokenizer", "post_processor", "decoder"};

struct ModelReader final : JsonReader {
  Parsed& p;
  VocabReader vocab{p};
  MergesReader merges{p};
  explicit ModelReader(Parsed& parsed) : p(parsed) {}
  void open(bool object) override {
    if (!object) p.fail("model", "is an array, not an object");
  }
  Use use(const std::string& key, size_t) override {
    if (key == "vocab" || key == "merges") return p.once("model." + key), stream();
    if (!kModelKeys.count(key))
      p.fail("model", fmt::format("has the key '{}', which attograd does not read", excerpt(key)));
    p.once("model." + key);
    return keep(kSmallValue);
  }
  void value(const std::string& key, size_t, json v) override {
    if (key == "vocab" || key == "merges")
      p.fail("model." + key, fmt::format("is {}, not a container", base::json_kind(v)));
    p.model[key] = std::move(v);
  }
  JsonReader& nested(const std::string& key, size_t) override {
    return key == "vocab" ? static_cast<JsonReader&>(vocab) : merges;
  }
};

struct TopReader final : JsonReader {
  Parsed& p;
  ModelReader model{p};
  AddedReader added{p};
  explicit TopReader(Parsed& parsed) : p(parsed) {}
  void open(bool object) override {
    if (!object) p.fail("the file", "is an array, not a JSON object");
  }
  Use use(const std::string& key, size_t) override {
    if (key == "model" || key == "added_tokens") return p.once(key), stream();
    if (!kTopKeys.count(key))
      p.fail("the file",
             fmt::format("has the key '{}', which attograd does not read", excerpt(key)));
    p.once(key);
    return keep(kSmallValue);
  }
  void value(const std::string& key, size_t, json v) override {
    if (key == "model" || key == "added_tokens")
      p.fail(key, fmt::format("is {}, not a container", base::json_kind(v)));
    p.top[key] = std::move(v);
  }
  JsonReader& nested(const std::string& key, size_t) override {
    return key == "model" ? static_cast<JsonReader&>(model) : added;
  }
};

Parsed parse(const InputBytes& in) {
  Parsed p;
  const std::string& path = in.source();
  p.source = path;
  if (in.size() > kMaxHfTokenizerJsonBytes)
    throw InteropError(fmt::format("{}: {} bytes, more than the {} such a file may have", path,
                                   in.size(), kMaxHfTokenizerJsonBytes));
  TopReader top(p);
  try {
    read_json(in, 0, in.size(), top, data::kMaxSplitPatternBytes);
  } catch (const JsonStreamError& e) {
    throw InteropError(fmt::format("{}: {}", path, e.what()));
  }
  if (!p.seen.count("model")) p.fail("the file", "has no model");
  return p;
}

// ------------------------------------------------------------ what the file states

// A member of a small object, or fallback when it is absent.
json member(const json& object, const char* key, json fallback) {
  const auto it = object.is_object() ? object.find(key) : object.end();
  return it == object.end() ? fallback : *it;
}

std::string type_of(const json& v) {
  const json type = member(v, "type", nullptr);
  return type.is_string() ? type.get<std::string>() : "";
}

// A setting for a message: its type ('NFC', 'TemplateProcessing') or its kind.
std::string described(const json& v) {
  return type_of(v).empty() ? base::json_kind(v) : "'" + excerpt(type_of(v)) + "'";
}

// The normalizer: none, or NFC (Qwen2's).
data::Normalizer normalizer_of(const Parsed& p) {
  const json normalizer = member(p.top, "normalizer", nullptr);
  if (normalizer.is_null()) return data::Normalizer::none;
  if (type_of(normalizer) == "NFC" && normalizer.size() == 1) return data::Normalizer::nfc;
  p.fail("normalizer", fmt::format("is {}: attograd reads none or NFC", described(normalizer)));
}

// A TemplateProcessing's single-sequence template: the ids before and after the text.
void template_ids(const Parsed& p, const json& t, const std::string& where, data::HfBpeSpec& spec) {
  const json single = member(t, "single", nullptr), specials = member(t, "special_tokens", nullptr);
  if (!single.is_array() || !specials.is_object())
    p.fail(where, "has no single template and special_tokens");
  bool text_seen = false;
  for (size_t k = 0; k < single.size(); ++k) {
    const std::string at = fmt::format("{}.single[{}]", where, k);
    const json sequence = member(single[k], "Sequence", nullptr);
    if (sequence.is_object() && member(sequence, "id", nullptr) == "A" && !text_seen) {
      text_seen = true;
      continue;
    }
    const json name = member(member(single[k], "SpecialToken", nullptr), "id", nullptr);
    const json ids =
        name.is_string()
            ? member(member(specials, name.get<std::string>().c_str(), nullptr), "ids", nullptr)
            : json();
    if (!ids.is_array() || ids.size() > data::HfBpeTokenizer::kMaxTemplateIds)
      p.fail(at, "is not the text (Sequence A) nor a special token of special_tokens with its ids");
    for (const json& id : ids) {
      if (!id.is_number_unsigned() || id.get<uint64_t>() > UINT32_MAX)
        p.fail(at, "has an id that is not an unsigned integer");
      (text_seen ? spec.suffix : spec.prefix).push_back(id.get<uint32_t>());
    }
  }
  if (!text_seen) p.fail(where + ".single", "has no Sequence A: the text would be lost");
}

// The post-processor: none, ByteLevel (offsets only: no id changes), TemplateProcessing, or
// a Sequence of those (Llama 3's: ByteLevel then the template adding <|begin_of_text|>).
// Returns whether it adds ids.
bool post_processor_of(const Parsed& p, data::HfBpeSpec& spec) {
  const json post = member(p.top, "post_processor", nullptr);
  std::vector<std::pair<json, std::string>> steps;
  if (type_of(post) == "Sequence") {
    const json list = member(post, "processors", nullptr);
    if (!list.is_array()) p.fail("post_processor.processors", "is not an array");
    for (size_t k = 0; k < list.size(); ++k)
      steps.emplace_back(list[k], fmt::format("post_processor.processors[{}]", k));
  } else if (!post.is_null()) {
    steps.emplace_back(post, "post_processor");
  }
  bool adds = false;
  for (const auto& [step, where] : steps) {
    if (type_of(step) == "ByteLevel") continue;
    if (type_of(step) != "TemplateProcessing" || adds)
      p.fail(where, fmt::format("is {}: attograd reads ByteLevel and one TemplateProcessing",
                                described(step)));
    template_ids(p, step, where, spec);
    adds = true;
  }
  return adds;
}

// The BPE model's settings: attograd's BPE adds nothing to tokens; ignore_merges is read.
void check_model(const Parsed& p) {
  const json& m = p.model;
  if (member(m, "type", "BPE") != "BPE")
    p.fail("model.type", fmt::format("is {}: attograd reads BPE (and characters as BPE "
                                     "without merges)",
                                     base::json_quote(m["type"])));
  if (const json d = member(m, "dropout", nullptr);
      !d.is_null() && !(d.is_number() && d.get<double>() == 0))
    p.fail("model.dropout", "is set: BPE dropout makes encoding random");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const json v = member(m, key, ""); !v.is_null() && v != "")
      p.fail(fmt::format("model.{}", key), "is set: attograd's BPE adds nothing to its tokens");
  if (member(m, "byte_fallback", false) != false)
    p.fail("model.byte_fallback", "is not false: attograd's byte-level BPE has every byte");
  for (const char* key : {"ignore_merges", "fuse_unk"})
    if (!member(m, key, false).is_boolean())
      p.fail(fmt::format("model.{}", key), "is not true or false");
  if (const json unk = member(m, "unk_token", nullptr); !unk.is_null() && !unk.is_string())
    p.fail("model.unk_token", fmt::format("is {}, not a string", base::json_kind(unk)));
}

void note_unused(const Parsed& p, std::vector<std::string>* notes) {
  for (const char* key : {"truncation", "padding"})
    if (!member(p.top, key, nullptr).is_null() && notes)
      notes->push_back(fmt::format("tokenizer.json's {} (attograd encodes whole texts)", key));
}

// A ByteLevel pre-tokenizer at `where`: whether it splits with GPT-2's regex (use_regex,
// true unless stated) before mapping the bytes to text.
bool byte_level_regex(const Parsed& p, const json& v, const std::string& where) {
  if (member(v, "add_prefix_space", true) != false)
    p.fail(where + ".add_prefix_space", "is not false: attograd puts no space before a text");
  const json regex = member(v, "use_regex", true);
  if (!regex.is_boolean()) p.fail(where + ".use_regex", "is not true or false");
  return regex.get<bool>();
}

// The split pattern the pre-tokenizer states: ByteLevel's own regex (GPT-2's), none, a
// Split's Regex before a ByteLevel that only maps bytes (what attograd writes; Llama 3's and
// Qwen2's), or SmolLM2's Digits (each digit alone) before ByteLevel's regex, which is
// GPT-2's pattern with digits cut alone (data::kDigitsGpt2SplitPattern).
std::string split_pattern_of(const Parsed& p) {
  const json pre = member(p.top, "pre_tokenizer", nullptr);
  if (type_of(pre) == "ByteLevel")
    return byte_level_regex(p, pre, "pre_tokenizer") ? std::string(data::kGpt2SplitPattern) : "";
  const json list = type_of(pre) == "Sequence" ? member(pre, "pretokenizers", nullptr) : json();
  if (!list.is_array() || list.size() != 2 ||
      (type_of(list[0]) != "Split" && type_of(list[0]) != "Digits") ||
      type_of(list[1]) != "ByteLevel")
    p.fail("pre_tokenizer", fmt::format("is {}: attograd reads ByteLevel, or a Sequence of a "
                                        "Split (or Digits) and a ByteLevel",
                                        described(pre)));
  const bool regex = byte_level_regex(p, list[1], "pre_tokenizer.pretokenizers[1]");
  if (type_of(list[0]) == "Digits") {
    if (member(list[0], "individual_digits", false) != true || !regex)
      p.fail("pre_tokenizer.pretokenizers",
             "are not Digits with individual_digits then ByteLevel with its regex (SmolLM2's)");
    return std::string(data::kDigitsGpt2SplitPattern);
  }
  const json pattern = member(list[0], "pattern", nullptr);
  if (!member(pattern, "Regex", nullptr).is_string() || pattern.size() != 1)
    p.fail("pre_tokenizer.pretokenizers[0].pattern", "is not {\"Regex\": PATTERN}");
  if (member(list[0], "behavior", nullptr) != "Isolated" ||
      member(list[0], "invert", false) != false)
    p.fail("pre_tokenizer.pretokenizers[0]",
           "is not an Isolated, not inverted Split: attograd keeps each match as a piece");
  if (regex)
    p.fail("pre_tokenizer.pretokenizers[1].use_regex", "is true: the pieces would be split again");
  return pattern["Regex"].get<std::string>();
}

// Two ids of one token, found by sorting the ids by their token (4 bytes an id).
void refuse_twice(const Parsed& p, const std::vector<std::string>& tokens) {
  std::vector<uint32_t> order(tokens.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return tokens[a] < tokens[b]; });
  for (size_t i = 1; i < order.size(); ++i)
    if (tokens[order[i - 1]] == tokens[order[i]])
      p.fail("model.vocab", fmt::format("gives one token ids {} and {}", order[i - 1], order[i]));
}

// The tokens in id order: the vocabulary's (ids 0 to N-1, each once), then the added tokens
// past it (an added token the vocabulary has must have its id there).
std::vector<std::string> tokens_of(Parsed& p) {
  std::vector<std::string> tokens(p.vocab.size());
  std::vector<bool> taken(p.vocab.size());
  for (auto& [token, id] : p.vocab) {
    if (id >= tokens.size() || taken[id])
      p.fail("model.vocab", fmt::format("gives id {}, but its {} tokens must have ids 0 to {}, "
                                        "each once",
                                        id, tokens.size(), tokens.size() - 1));
    taken[id] = true;
    tokens[id] = std::move(token);
  }
  if (tokens.empty()) p.fail("model.vocab", "has no tokens");
  std::sort(p.added.begin(), p.added.end());
  for (auto& [id, content] : p.added) {
    if (id < tokens.size() && tokens[id] != content)
      p.fail("added_tokens", fmt::format("give id {} to another token than model.vocab", id));
    if (id > tokens.size())
      p.fail("added_tokens", fmt::format("give id {}, but the next id is {}", id, tokens.size()));
    if (id == tokens.size()) tokens.push_back(std::move(content));
  }
  refuse_twice(p, tokens);
  return tokens;
}

// Characters: one code point a token, numbered in code point order (CharTokenizer's ids).
io::TokenizerSection chars_of(const Parsed& p, const std::vector<std::string>& tokens,
                              std::vector<std::string>* notes) {
  if (type_of(member(p.top, "decoder", nullptr)) != "Fuse")
    p.fail("decoder", "is not Fuse: without a pre_tokenizer, attograd reads characters");
  if (!p.merges.empty() || !p.added.empty())
    p.fail("model",
           "has merges or added tokens: without a pre_tokenizer, attograd reads characters");
  std::vector<uint32_t> code_points;
  for (size_t id = 0; id < tokens.size(); ++id) {
    uint32_t cp = 0;
    if (tokens[id].empty() || base::utf8_char(tokens[id], 0, cp) != tokens[id].size())
      p.fail("model.vocab", fmt::format("token {} is not one character", id));
    if (!code_points.empty() && cp <= code_points.back())
      p.fail("model.vocab",
             fmt::format("token {} (U+{:04X}) is not after token {} (U+{:04X}): characters are "
                         "numbered in code point order",
                         id, cp, id - 1, code_points.back()));
    code_points.push_back(cp);
  }
  if (member(p.model, "unk_token", nullptr).is_string() && notes)
    notes->push_back("tokenizer.json's unk_token (the char tokenizer refuses what it lacks)");
  return io::tokenizer_section(data::CharTokenizer(std::move(code_points)));
}

io::TokenizerSection byte_level_of(Parsed& p, std::vector<std::string> tokens) {
  if (type_of(member(p.top, "decoder", nullptr)) != "ByteLevel")
    p.fail("decoder", "is not ByteLevel, which a byte-level pre_tokenizer needs");
  data::ByteLevelVocab v;
  v.split_pattern = split_pattern_of(p);
  for (size_t id = 256 + p.merges.size(); id < tokens.size(); ++id)
    if (tokens[id] == "<|endoftext|>") v.end_of_text = static_cast<int64_t>(id);
  v.tokens = std::move(tokens);
  v.merges = std::move(p.merges);
  try {
    return io::tokenizer_section(
        *data::bytes_alone_as_byte(data::tokenizer_from_byte_level(std::move(v))));
  } catch (const std::invalid_argument& e) {
    p.fail("model:", e.what());
  }
}

// Whether the vocabulary is laid out as GPT-2's (and attograd's own) are: the 256 byte
// tokens first, merge i's result at id 256 + i, then the added tokens. Such a file, with
// nothing of the hf kind's (a normalizer, a template, ignore_merges), reads as before.
bool gpt2_layout(const Parsed& p, const std::vector<std::string>& tokens) {
  const size_t m = p.merges.size();
  if (tokens.size() < 256 + m) return false;
  for (size_t id = 0; id < 256; ++id)
    if (const auto bytes = data::byte_level_bytes(tokens[id]); !bytes || bytes->size() != 1)
      return false;
  for (size_t i = 0; i < m; ++i)
    if (p.merges[i].first.size() + p.merges[i].second.size() != tokens[256 + i].size() ||
        p.merges[i].first + p.merges[i].second != tokens[256 + i])
      return false;
  size_t past_merges = 0;
  for (const data::AddedToken& t : p.added_flags) past_merges += t.id >= 256 + m ? 1 : 0;
  return past_merges == p.added_flags.size() && tokens.size() - (256 + m) == past_merges;
}

// The bytes an added token decodes to: tokenizers' ByteLevel decoder reads its text as
// byte-level form when every character of it stands for a byte, else as it is.
std::string added_bytes(const std::string& content) {
  return data::byte_level_bytes(content).value_or(content);
}

// Ids of the merges' parts, by their text in model.vocab.
std::vector<data::BpeTokenizer::Merge> merge_ids(const Parsed& p,
                                                 const std::vector<std::string>& tokens,
                                                 size_t in_vocab) {
  std::unordered_map<std::string_view, uint32_t> ids;
  ids.reserve(in_vocab);
  for (size_t id = 0; id < in_vocab; ++id) ids.emplace(tokens[id], static_cast<uint32_t>(id));
  std::vector<data::BpeTokenizer::Merge> merges(p.merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto left = ids.find(p.merges[i].first), right = ids.find(p.merges[i].second);
    if (left == ids.end() || right == ids.end())
      p.fail(fmt::format("model.merges[{}]", i), "names a token that model.vocab does not have");
    merges[i] = {left->second, right->second};
  }
  return merges;
}

// Any other byte-level BPE: the hf kind (data::HfBpeTokenizer), which keeps it all.
io::TokenizerSection hf_of(Parsed& p, const std::vector<std::string>& tokens,
                           data::HfBpeSpec spec) {
  if (type_of(member(p.top, "decoder", nullptr)) != "ByteLevel")
    p.fail("decoder", "is not ByteLevel, which a byte-level pre_tokenizer needs");
  const size_t in_vocab = p.vocab.size();
  std::vector<bool> added(tokens.size());
  for (data::AddedToken& t : p.added_flags) {
    t.in_vocabulary = t.id < in_vocab;
    added[t.id] = true;
  }
  spec.tokens.resize(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::optional<std::string> bytes =
        added[id] ? added_bytes(tokens[id]) : data::byte_level_bytes(tokens[id]);
    if (!bytes)
      p.fail("model.vocab",
             fmt::format("token {} is not in byte-level form (bytes_to_unicode)", id));
    spec.tokens[id] = *bytes;
  }
  spec.merges = merge_ids(p, tokens, in_vocab);
  spec.added = std::move(p.added_flags);
  try {
    return io::tokenizer_section(data::HfBpeTokenizer(std::move(spec)));
  } catch (const std::invalid_argument& e) {
    p.fail("model:", e.what());
  }
}

}  // namespace

io::TokenizerSection read_hf_tokenizer_json(const std::string& path,
                                            std::vector<std::string>* notes) {
  return read_hf_tokenizer_json(InputBytes::open(path), notes);
}

io::TokenizerSection read_hf_tokenizer_json(const InputBytes& in, std::vector<std::string>* notes) {
  Parsed p = parse(in);
  note_unused(p, notes);
  check_model(p);
  data::HfBpeSpec spec;
  spec.normalizer = normalizer_of(p);
  const bool adds = post_processor_of(p, spec);
  spec.ignore_merges = member(p.model, "ignore_merges", false) == true;
  std::vector<std::string> tokens = tokens_of(p);
  const bool hf_only = spec.normalizer != data::Normalizer::none || adds || spec.ignore_merges;
  if (member(p.top, "pre_tokenizer", nullptr).is_null()) {
    if (hf_only)
      p.fail("pre_tokenizer",
             "is null: attograd reads characters then, with no normalizer, "
             "template or ignore_merges");
    return chars_of(p, tokens, notes);
  }
  spec.split_pattern = split_pattern_of(p);
  if (!hf_only && gpt2_layout(p, tokens)) return byte_level_of(p, std::move(tokens));
  return hf_of(p, tokens, std::move(spec));
}

}  // namespace interop
