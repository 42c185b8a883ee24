#include "interop/tokenizer_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "base/json.h"
#include "base/utf8.h"
#include "data/gpt2_tokenizer.h"
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

// added_tokens: objects with an id and a content (the other members say how tokenizers
// matches them in a text, which attograd never does: encode gives no special token).
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

Parsed parse(const std::string& path) {
  Parsed p;
  p.source = path;
  const InputBytes in = InputBytes::open(path);
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

// What changes the ids of a text beyond the vocabulary, merges and split: refused.
void check_settings(const Parsed& p, std::vector<std::string>* notes) {
  const json normalizer = member(p.top, "normalizer", nullptr);
  if (!normalizer.is_null())
    p.fail("normalizer", fmt::format("is {}: attograd's tokenizers read the text as it is",
                                     described(normalizer)));
  const json post = member(p.top, "post_processor", nullptr);
  if (!post.is_null() && type_of(post) != "ByteLevel")
    p.fail("post_processor",
           fmt::format("is {}: attograd adds no token to a text (none, or ByteLevel's offsets, "
                       "is read)",
                       described(post)));
  for (const char* key : {"truncation", "padding"})
    if (!member(p.top, key, nullptr).is_null() && notes)
      notes->push_back(fmt::format("tokenizer.json's {} (attograd encodes whole texts)", key));
}

// The BPE model's settings: attograd's BPE adds nothing to tokens and applies every merge.
void check_model(const Parsed& p) {
  const json& m = p.model;
  if (member(m, "type", "BPE") != "BPE")
    p.fail("model.type", fmt::format("is {}: attograd reads BPE (and characters as BPE "
                                     "without merges)",
                                     base::json_quote(m["type"])));
  if (!member(m, "dropout", nullptr).is_null())
    p.fail("model.dropout", "is set: BPE dropout makes encoding random");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const json v = member(m, key, ""); !v.is_null() && v != "")
      p.fail(fmt::format("model.{}", key), "is set: attograd's BPE adds nothing to its tokens");
  if (member(m, "byte_fallback", false) != false)
    p.fail("model.byte_fallback", "is not false: attograd's byte-level BPE has every byte");
  if (member(m, "ignore_merges", false) != false)
    p.fail("model.ignore_merges",
           "is not false: attograd applies the merges to every piece, even one in the vocabulary");
  if (const json unk = member(m, "unk_token", nullptr); !unk.is_null() && !unk.is_string())
    p.fail("model.unk_token", fmt::format("is {}, not a string", base::json_kind(unk)));
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

// The split pattern the pre-tokenizer states: ByteLevel's own regex (GPT-2's), none, or a
// Split's Regex before a ByteLevel that only maps bytes (what attograd writes).
std::string split_pattern_of(const Parsed& p) {
  const json pre = member(p.top, "pre_tokenizer", nullptr);
  if (type_of(pre) == "ByteLevel")
    return byte_level_regex(p, pre, "pre_tokenizer") ? std::string(data::kGpt2SplitPattern) : "";
  const json list = type_of(pre) == "Sequence" ? member(pre, "pretokenizers", nullptr) : json();
  if (!list.is_array() || list.size() != 2 || type_of(list[0]) != "Split" ||
      type_of(list[1]) != "ByteLevel")
    p.fail("pre_tokenizer", fmt::format("is {}: attograd reads ByteLevel, or a Sequence of a "
                                        "Split and a ByteLevel",
                                        described(pre)));
  const json pattern = member(list[0], "pattern", nullptr);
  if (!member(pattern, "Regex", nullptr).is_string() || pattern.size() != 1)
    p.fail("pre_tokenizer.pretokenizers[0].pattern", "is not {\"Regex\": PATTERN}");
  if (member(list[0], "behavior", nullptr) != "Isolated" ||
      member(list[0], "invert", false) != false)
    p.fail("pre_tokenizer.pretokenizers[0]",
           "is not an Isolated, not inverted Split: attograd keeps each match as a piece");
  if (byte_level_regex(p, list[1], "pre_tokenizer.pretokenizers[1]"))
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
    const auto tok = data::tokenizer_from_byte_level(std::move(v));
    // the 256 bytes in order and no merges: whatever the split, the byte tokenizer
    if (tok->kind() == data::TokenizerKind::bpe && tok->vocab_size() == 256)
      return io::tokenizer_section(data::ByteTokenizer());
    return io::tokenizer_section(*tok);
  } catch (const std::invalid_argument& e) {
    p.fail("model:", e.what());
  }
}

}  // namespace

io::TokenizerSection read_hf_tokenizer_json(const std::string& path,
                                            std::vector<std::string>* notes) {
  Parsed p = parse(path);
  check_settings(p, notes);
  check_model(p);
  std::vector<std::string> tokens = tokens_of(p);
  if (member(p.top, "pre_tokenizer", nullptr).is_null()) return chars_of(p, tokens, notes);
  return byte_level_of(p, std::move(tokens));
}

}  // namespace interop
