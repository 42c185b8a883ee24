#include "interop/gguf_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>

#include "base/utf8.h"
#include "data/chat_format.h"
#include "data/gpt2_tokenizer.h"
#include "data/hf_bpe.h"
#include "interop/model_files.h"
#include "io/tokenizer_section.h"

namespace interop {

namespace {

// llama.cpp's token types (llama_token_type)
constexpr int64_t kNormalToken = 1, kControlToken = 3, kUserDefinedToken = 4;

// The split patterns of the Llama family's tokenizer.json files, as llama.cpp names its
// pre-tokenizers for them (llama-vocab.cpp: LLAMA3, QWEN2, SMOLLM): Llama 3's, Qwen2's (a
// digit a piece) and SmolLM2's (GPT-2's with digits cut alone).
struct PreTokenizerName {
  std::string_view pattern;
  const char* name;
};
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const PreTokenizerName kHfPreTokenizers[] = {{kLlama3Pattern, "llama-bpe"},
                                             {kQwen2Pattern, "qwen2"},
                                             {data::kDigitsGpt2SplitPattern, "smollm"},
                                             {data::kGpt2SplitPattern, "gpt-2"}};

// llama.cpp's pre-tokenizer names for the split patterns attograd has: "gpt-2" is GPT-2's
// regex; "llama-bpe" (LLAMA_VOCAB_PRE_TYPE_LLAMA3) is GPT-4's cl100k pattern, which
// attograd's own bpe uses (llama.cpp spells its contractions out case by case and drops the
// possessive quantifiers; the pieces are the same).
constexpr const char* kGpt2Pre = "gpt-2";
constexpr const char* kGpt4Pre = "llama-bpe";

std::string pre_tokenizer_of(const data::ByteLevelVocab& v) {
  if (v.split_pattern == data::kGpt2SplitPattern) return kGpt2Pre;
  if (v.split_pattern == data::kGpt4SplitPattern) return kGpt4Pre;
  if (v.split_pattern.empty() && v.merges.empty()) return kGpt2Pre;  // byte: no merges to cut
  throw InteropError(
      fmt::format("a GGUF file cannot hold this tokenizer: llama.cpp has no "
                  "pre-tokenizer for its split pattern {}",
                  base::printable(v.split_pattern)));
}

// The split pattern of a pre-tokenizer name llama.cpp reads as GPT-2's or GPT-4's.
std::optional<std::string> gguf_split_pattern_of(const std::string& pre) {
  if (pre == "gpt-2") return std::string(data::kGpt2SplitPattern);
  for (const char* gpt4 : {"llama-bpe", "llama3", "llama-v3", "dbrx", "smaug-bpe"})
    if (pre == gpt4) return std::string(data::kGpt4SplitPattern);
  return std::nullopt;
}

const gguf::Value* array_key(const gguf::File& f, const std::string& key, uint32_t type,
                             size_t count, const std::string& source, std::set<std::string>& used) {
  used.insert(key);
  const gguf::Value* v = f.find(key);
  if (!v) return nullptr;
  const bool integer = type == gguf::kInt32 && v->type != gguf::kString &&
                       v->type != gguf::kFloat32 && v->type != gguf::kFloat64;
  if (!v->is_array || !(v->type == type || integer))
    throw InteropError(
        fmt::format("{}: key {} is not an array of {}", source, key, gguf::value_type_name(type)));
  if (count != 0 && v->count() != count)
    throw InteropError(fmt::format("{}: key {} has {} entries, the model's vocabulary {}", source,
                                   key, v->count(), count));
  return v;
}

std::optional<int64_t> token_id_key(const gguf::File& f, const std::string& key, int64_t vocab,
                                    const std::string& source, std::set<std::string>& used) {
  used.insert(key);
  const gguf::Value* v = f.find(key);
  if (!v) return std::nullopt;
  if (v->is_array || v->ints.size() != 1 || v->ints[0] < 0 || v->ints[0] >= vocab)
    throw InteropError(fmt::format("{}: key {} is not a token id below {}", source, key, vocab));
  return v->ints[0];
}

std::vector<std::pair<std::string, std::string>> merges_of(const gguf::Value* v,
                                                           const std::string& source) {
  std::vector<std::pair<std::string, std::string>> merges;
  if (!v) return merges;
  for (size_t i = 0; i < v->strings.size(); ++i) {
    const std::string& m = v->strings[i];
    const size_t space = m.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == m.size() ||
        m.find(' ', space + 1) != std::string::npos)
      throw InteropError(
          fmt::format("{}: key tokenizer.ggml.merges: entry {} ('{}') is not two "
                      "tokens separated by one space",
                      source, i, excerpt(m)));
    merges.emplace_back(m.substr(0, space), m.substr(space + 1));
  }
  return merges;
}

// The end-of-text token of an hf tokenizer: the first added token of the names these
// families give it (Llama 3's base, Qwen's and SmolLM2's, SentencePiece's)
std::optional<uint32_t> hf_end_of_text(const data::HfBpeSpec& spec) {
  for (const char* name : {"<|end_of_text|>", "<|endoftext|>", "</s>"})
    for (const data::AddedToken& t : spec.added)
      if (t.content == name) return t.id;
  return std::nullopt;
}

// An hf tokenizer (Llama 3's, Qwen's, SmolLM2's tokenizer.json) as llama.cpp's converter
// writes it: each token in its byte-level spelling, added tokens as their text (control when
// special, user-defined otherwise), merges spelled alike, the pre-tokenizer llama.cpp names
// for the split pattern, the template's first id as the BOS llama.cpp adds.
void add_hf_tokenizer_keys(const data::HfBpeTokenizer& tok, int64_t vocab_size, gguf::File& f) {
  using gguf::Value;
  const data::HfBpeSpec& spec = tok.spec();
  if (static_cast<int64_t>(spec.tokens.size()) != vocab_size)
    throw InteropError(fmt::format(
        "a GGUF file cannot hold this tokenizer: it has {} tokens, the model's vocabulary {} "
        "(llama.cpp needs them equal)",
        spec.tokens.size(), vocab_size));
  const auto pre = std::find_if(std::begin(kHfPreTokenizers), std::end(kHfPreTokenizers),
                                [&](const auto& p) { return p.pattern == spec.split_pattern; });
  if (pre == std::end(kHfPreTokenizers) || !spec.suffix.empty() || spec.prefix.size() > 1)
    throw InteropError(fmt::format(
        "a GGUF file cannot hold this tokenizer: llama.cpp has no pre-tokenizer for its split "
        "pattern {}, or no way to add its template's {} ids",
        base::printable(spec.split_pattern), spec.prefix.size() + spec.suffix.size()));
  std::vector<std::string> tokens;
  std::vector<int64_t> types(spec.tokens.size(), kNormalToken);
  for (const std::string& bytes : spec.tokens) tokens.push_back(data::byte_level_text(bytes));
  for (const data::AddedToken& t : spec.added) {
    tokens[t.id] = t.content;
    types[t.id] = t.special ? kControlToken : kUserDefinedToken;
  }
  std::vector<std::string> merges;
  for (const auto& m : spec.merges) merges.push_back(tokens[m.first] + " " + tokens[m.second]);
  f.keys.emplace_back("tokenizer.ggml.model", Value::string("gpt2"));
  f.keys.emplace_back("tokenizer.ggml.pre", Value::string(pre->name));
  f.keys.emplace_back("tokenizer.ggml.tokens", Value::string_array(std::move(tokens)));
  f.keys.emplace_back("tokenizer.ggml.token_type", Value::i32_array(std::move(types)));
  f.keys.emplace_back("tokenizer.ggml.merges", Value::string_array(std::move(merges)));
  const std::optional<uint32_t> eos = hf_end_of_text(spec);
  if (const auto bos = spec.prefix.empty() ? eos : std::optional(spec.prefix[0]))
    f.keys.emplace_back("tokenizer.ggml.bos_token_id", Value::u32(*bos));
  if (eos) f.keys.emplace_back("tokenizer.ggml.eos_token_id", Value::u32(*eos));
  f.keys.emplace_back("tokenizer.ggml.add_bos_token", Value::boolean(!spec.prefix.empty()));
}

// The split pattern of a pre-tokenizer name of kHfPreTokenizers
std::optional<std::string_view> hf_pattern_of(const std::string& pre) {
  for (const auto& p : kHfPreTokenizers)
    if (pre == p.name) return p.pattern;
  return std::nullopt;
}

// What llama.cpp's keys state of an hf tokenizer, read back: added tokens (control or
// user-defined) with their text, every other token its byte-level bytes, merges by their
// tokens' spellings, the pre-tokenizer's pattern (Llama 3's ignoring merges for whole
// words, as llama.cpp's llama-bpe does), add_bos_token's BOS as the template.
io::TokenizerSection hf_section(const gguf::Value& tokens, const gguf::Value* types,
                                const gguf::Value* merges, std::string_view pattern,
                                const std::string& pre, std::optional<int64_t> bos,
                                const std::string& source) {
  data::HfBpeSpec spec;
  spec.split_pattern = std::string(pattern);
  spec.ignore_merges = pre == "llama-bpe";
  if (bos) spec.prefix = {static_cast<uint32_t>(*bos)};
  std::map<std::string, uint32_t> id_of;
  for (size_t id = 0; id < tokens.strings.size(); ++id) {
    const std::string& text = tokens.strings[id];
    const int64_t type = types ? types->ints[id] : kNormalToken;
    if (type == kControlToken || type == kUserDefinedToken) {
      spec.added.push_back({static_cast<uint32_t>(id), text, type == kControlToken, false, false});
      spec.tokens.push_back(text);
      continue;
    }
    const std::optional<std::string> bytes = data::byte_level_bytes(text);
    if (!bytes)
      throw InteropError(
          fmt::format("{}: key tokenizer.ggml.tokens: token {} ('{}') is not "
                      "byte-level text",
                      source, id, excerpt(text)));
    spec.tokens.push_back(*bytes);
    id_of.emplace(text, static_cast<uint32_t>(id));
  }
  for (const auto& [a, b] : merges_of(merges, source)) {
    const auto left = id_of.find(a), right = id_of.find(b);
    if (left == id_of.end() || right == id_of.end())
      throw InteropError(
          fmt::format("{}: key tokenizer.ggml.merges: '{} {}' names a token the "
                      "vocabulary lacks",
                      source, excerpt(a), excerpt(b)));
    spec.merges.emplace_back(left->second, right->second);
  }
  try {
    return io::tokenizer_section(data::HfBpeTokenizer(std::move(spec)));
  } catch (const std::invalid_argument& e) {
    throw InteropError(fmt::format("{}: keys tokenizer.ggml.*: {}", source, e.what()));
  }
}

// Whether llama.cpp's keys need the hf kind: a pre-tokenizer only it has, a BOS added
// before each text, or a user-defined (added, not special) token.
bool needs_hf_kind(const std::string& pre, bool add_bos, const gguf::Value* types) {
  if (pre == "qwen2" || pre == "smollm" || add_bos) return true;
  return types &&
         std::find(types->ints.begin(), types->ints.end(), kUserDefinedToken) != types->ints.end();
}

// tokenizer.ggml.add_bos_token
bool bos_added(const gguf::File& f, std::set<std::string>& used) {
  used.insert("tokenizer.ggml.add_bos_token");
  const gguf::Value* key = f.find("tokenizer.ggml.add_bos_token");
  return key && !key->ints.empty() && key->ints[0] != 0;
}

// The ids that end and begin a text in llama.cpp's keys: eos (where generation stops), eot
// (a chat turn's end), bos.
struct SpecialIds {
  std::optional<int64_t> bos, eos, eot;
};

// The ids a model has past its byte-level tokenizer's vocabulary, appended to v as tokens
// (llama.cpp needs a token for every row of the model): a chat format's special tokens
// (data::ChatTokens gives them those ids), or the one end-of-text id instruct fine-tuning
// appends after each response (data::end_of_text_id). Any other count is refused.
SpecialIds add_ids_past(const data::Tokenizer& tok, int64_t vocab_size,
                        std::optional<data::ChatFormat> chat_format, data::ByteLevelVocab& v) {
  const auto learned = static_cast<int64_t>(v.tokens.size());
  SpecialIds ids{v.end_of_text, v.end_of_text, v.end_of_text};
  if (chat_format) {
    const data::ChatTokens chat(*chat_format, tok);
    for (int64_t id = learned; id < vocab_size && !chat.text_of(id).empty(); ++id)
      v.tokens.emplace_back(chat.text_of(id));
    ids.eos = ids.eot = chat.end_of_turn();
    if (*chat_format == data::ChatFormat::llama3) ids.bos = chat.conversation({}, false).front();
  } else if (vocab_size == learned + 1 && !v.end_of_text) {
    v.tokens.emplace_back("<|endoftext|>");
    ids.bos = ids.eos = ids.eot = learned;
  }
  if (static_cast<int64_t>(v.tokens.size()) != vocab_size)
    throw InteropError(
        fmt::format("a GGUF file cannot hold this tokenizer: it has {} tokens, the "
                    "model's vocabulary {} (llama.cpp needs them equal)",
                    learned, vocab_size));
  return ids;
}

void add_special_ids(const SpecialIds& ids, gguf::File& f) {
  using gguf::Value;
  const std::pair<const char*, std::optional<int64_t>> keys[] = {
      {"tokenizer.ggml.bos_token_id", ids.bos},
      {"tokenizer.ggml.eos_token_id", ids.eos},
      {"tokenizer.ggml.eot_token_id", ids.eot}};
  for (const auto& [key, id] : keys)
    if (id) f.keys.emplace_back(key, Value::u32(static_cast<uint32_t>(*id)));
}

// tokenizer.chat_template: the format's template (data::ChatFormatRow::chat_template), which
// llama.cpp applies to a conversation as attograd's sample --chat writes it.
void add_chat_template(std::optional<data::ChatFormat> chat_format, gguf::File& f) {
  if (!chat_format) return;
  const std::string_view text = data::chat_format_row(*chat_format).chat_template;
  f.keys.emplace_back("tokenizer.chat_template", gguf::Value::string(std::string(text)));
}

}  // namespace

void add_tokenizer_keys(const io::TokenizerSection& section, int64_t vocab_size,
                        std::optional<data::ChatFormat> chat_format, gguf::File& f) {
  using gguf::Value;
  const std::unique_ptr<data::Tokenizer> tokenizer = io::make_tokenizer(section);
  if (const auto* hf = dynamic_cast<const data::HfBpeTokenizer*>(tokenizer.get())) {
    add_hf_tokenizer_keys(*hf, vocab_size, f);
    if (chat_format)
      f.keys.emplace_back(
          "tokenizer.ggml.eot_token_id",
          Value::u32(static_cast<uint32_t>(data::ChatTokens(*chat_format, *hf).end_of_turn())));
    return add_chat_template(chat_format, f);
  }
  data::ByteLevelVocab v;
  try {
    v = data::byte_level_vocab(*tokenizer);
  } catch (const std::invalid_argument& e) {
    throw InteropError(fmt::format("a GGUF file cannot hold this tokenizer: {}", e.what()));
  }
  const SpecialIds special = add_ids_past(*tokenizer, vocab_size, chat_format, v);
  std::vector<int64_t> types(v.tokens.size(), kNormalToken);
  for (size_t id = 256 + v.merges.size(); id < types.size(); ++id) types[id] = kControlToken;
  std::vector<std::string> merges;
  for (const auto& [a, b] : v.merges) merges.push_back(a + " " + b);
  const std::string pre = pre_tokenizer_of(v);
  f.keys.emplace_back("tokenizer.ggml.model", Value::string("gpt2"));
  f.keys.emplace_back("tokenizer.ggml.pre", Value::string(pre));
  f.keys.emplace_back("tokenizer.ggml.tokens", Value::string_array(std::move(v.tokens)));
  f.keys.emplace_back("tokenizer.ggml.token_type", Value::i32_array(std::move(types)));
  f.keys.emplace_back("tokenizer.ggml.merges", Value::string_array(std::move(merges)));
  add_special_ids(special, f);
  f.keys.emplace_back("tokenizer.ggml.add_bos_token", Value::boolean(false));
  add_chat_template(chat_format, f);
}

std::optional<io::TokenizerSection> read_tokenizer_keys(const gguf::File& f, int64_t vocab,
                                                        const std::string& source,
                                                        std::set<std::string>& used,
                                                        std::vector<std::string>& dropped) {
  used.insert("tokenizer.ggml.model");
  const gguf::Value* model = f.find("tokenizer.ggml.model");
  if (!model) return std::nullopt;
  if (model->is_array || model->type != gguf::kString || model->strings[0] != "gpt2")
    throw InteropError(
        fmt::format("{}: key tokenizer.ggml.model is not 'gpt2': only byte-level "
                    "BPE tokenizers (GPT-2's kind) are read",
                    source));
  data::ByteLevelVocab v;
  const gguf::Value* tokens = array_key(f, "tokenizer.ggml.tokens", gguf::kString,
                                        static_cast<size_t>(vocab), source, used);
  if (!tokens) throw InteropError(fmt::format("{}: key tokenizer.ggml.tokens is missing", source));
  const gguf::Value* types = array_key(f, "tokenizer.ggml.token_type", gguf::kInt32,
                                       static_cast<size_t>(vocab), source, used);
  const gguf::Value* merges = array_key(f, "tokenizer.ggml.merges", gguf::kString, 0, source, used);
  used.insert("tokenizer.ggml.pre");
  const gguf::Value* pre = f.find("tokenizer.ggml.pre");
  const std::string pre_name =
      pre && !pre->is_array && pre->type == gguf::kString ? pre->strings[0] : "default";
  const std::optional<int64_t> eos = token_id_key(f, "tokenizer.ggml.eos_token_id", vocab, source,
                                                  used),
                               bos = token_id_key(f, "tokenizer.ggml.bos_token_id", vocab, source,
                                                  used);
  const bool add_bos = bos_added(f, used), bos_template = add_bos && bos;  // a BOS to add
  if (const auto hf = hf_pattern_of(pre_name); hf && needs_hf_kind(pre_name, bos_template, types))
    return hf_section(*tokens, types, merges, *hf, pre_name, bos_template ? bos : std::nullopt,
                      source);
  v.tokens = tokens->strings;
  v.merges = merges_of(merges, source);
  const std::optional<std::string> pattern = gguf_split_pattern_of(pre_name);
  if (!pattern)
    throw InteropError(
        fmt::format("{}: key tokenizer.ggml.pre is '{}': only gpt-2, llama-bpe (GPT-4's split "
                    "pattern), qwen2 and smollm are read",
                    source, excerpt(pre_name)));
  if (!pre) dropped.push_back("no tokenizer.ggml.pre: GPT-2's split pattern is assumed");
  // without merges or special tokens the split changes nothing (a byte tokenizer)
  v.split_pattern = v.merges.empty() && v.tokens.size() == 256 ? "" : *pattern;
  // eos names <|endoftext|>, or another token (a chat format's end of turn: ChatTokens finds
  // it again by its text)
  if (eos && tokens->strings[static_cast<size_t>(*eos)] == "<|endoftext|>") v.end_of_text = eos;
  if (add_bos)
    dropped.push_back("tokenizer.ggml.add_bos_token true (attograd puts no token before a text)");
  try {
    return io::tokenizer_section(
        *data::bytes_alone_as_byte(data::tokenizer_from_byte_level(std::move(v))));
  } catch (const std::invalid_argument& e) {
    throw InteropError(
        fmt::format("{}: keys tokenizer.ggml.tokens and merges: {}", source, e.what()));
  }
}

}  // namespace interop
