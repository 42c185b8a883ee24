// meta.json of a prepared folder: writing it, and reading it as hostile input.
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/utf8.h"
#include "data/data_error.h"
#include "data/gpt2_tokenizer.h"
#include "data/identity.h"
#include "data/prepared.h"
#include "data/strict_json.h"
#include "data/tokenizer_file.h"

namespace data {

namespace {

using detail::JsonObject;

// Larger than any corpus, small enough that no count times 4 bytes overflows.
constexpr uint64_t kMaxCount = uint64_t{1} << 60;

nlohmann::json part_json(const SplitPart& p, bool documents) {
  nlohmann::json j = {{"tokens", p.tokens}, {"text_bytes", p.text_bytes}};
  if (!p.sha256.empty()) j["sha256"] = p.sha256, j["sample_sha256"] = p.sample_sha256;
  if (documents) j["documents"] = p.documents;
  return j;
}

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (const char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string sha256_of(const JsonObject& o, std::string_view key) {
  std::string s = o.string(key);
  if (!is_sha256_hex(s))
    o.fail(key,
           fmt::format("must be 64 lowercase hex digits (a SHA-256), not {}", base::json_quote(s)));
  return s;
}

// tokenizer.end_of_text: a byte or bpe tokenizer's last id (absent in older folders).
void read_end_of_text(const JsonObject& o, PreparedMeta& m) {
  if (!o.has("end_of_text")) return;
  m.end_of_text = static_cast<int64_t>(o.uint("end_of_text", INT32_MAX));
  if (m.tokenizer_kind != TokenizerKind::bytes && m.tokenizer_kind != TokenizerKind::bpe)
    o.fail("end_of_text", fmt::format("is for a byte or bpe tokenizer, not {}", m.tokenizer_kind));
  if (*m.end_of_text != m.vocab_size - 1)
    o.fail("end_of_text", fmt::format("is {}; the reserved <|endoftext|> is the last id, {}",
                                      *m.end_of_text, m.vocab_size - 1));
}

void read_tokenizer(const JsonObject& o, PreparedMeta& m) {
  if (o.has("end_of_text"))
    o.expect_keys({"type", "vocab_size", "sha256", "end_of_text"});
  else
    o.expect_keys({"type", "vocab_size", "sha256"});
  const std::string type = o.string("type");
  m.vocab_size = static_cast<int64_t>(o.uint("vocab_size", INT32_MAX));
  m.tokenizer_sha256 = sha256_of(o, "sha256");
  const std::optional<TokenizerKind> kind = base::find_choice<TokenizerKind>(type);
  if (!kind || *kind == TokenizerKind::none)
    o.fail("type",
           fmt::format("is {}, not one of char, byte, bpe, gpt2, hf", base::json_quote(type)));
  const TokenizerKind t = m.tokenizer_kind = *kind;
  if (t == TokenizerKind::bytes && m.vocab_size != 256 && m.vocab_size != 257)
    o.fail("vocab_size",
           fmt::format("is {}; a byte tokenizer has 256, or 257 with <|endoftext|>", m.vocab_size));
  if (t == TokenizerKind::bpe && (m.vocab_size < 256 || m.vocab_size > kMaxBpeVocabSize))
    o.fail("vocab_size",
           fmt::format("is {}; a bpe tokenizer has 256 to {}", m.vocab_size, kMaxBpeVocabSize));
  const int64_t max_gpt2 = kMaxBpeVocabSize + int64_t{Gpt2Tokenizer::kMaxSpecialTokens};
  if ((t == TokenizerKind::gpt2 || t == TokenizerKind::hf) &&
      (m.vocab_size < 256 || m.vocab_size > max_gpt2))
    o.fail("vocab_size",
           fmt::format("is {}; a {} tokenizer has 256 to {}", m.vocab_size, t, max_gpt2));
  if (t == TokenizerKind::chars && (m.vocab_size < 1 || m.vocab_size > 0x110000))
    o.fail("vocab_size", fmt::format("is {}; a char tokenizer has 1 to 1114112", m.vocab_size));
  read_end_of_text(o, m);
}

void read_sources(const JsonObject& corpus, PreparedMeta& m) {
  const nlohmann::json& list = corpus.array("sources");
  if (list.empty()) corpus.fail("sources", "is empty: a corpus has at least one source");
  uint64_t bytes = 0, chars = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const JsonObject src = corpus.element("sources", i);
    src.expect_keys({"path", "bytes", "chars", "sha256"});
    SourceFile f{src.string("path"), src.uint("bytes", kMaxCount), src.uint("chars", kMaxCount),
                 sha256_of(src, "sha256")};
    if (f.chars > f.bytes)
      src.fail("chars", fmt::format("is {}, more than its {} bytes", f.chars, f.bytes));
    if ((bytes += f.bytes) > kMaxCount || (chars += f.chars) > kMaxCount)
      src.fail("bytes", "makes the corpus larger than any this format allows");
    m.sources.push_back(std::move(f));
  }
  if (bytes != m.total_bytes)
    corpus.fail("bytes", fmt::format("is {}, but the sources add up to {}", m.total_bytes, bytes));
  if (chars != m.total_chars)
    corpus.fail("chars", fmt::format("is {}, but the sources add up to {}", m.total_chars, chars));
}

void read_corpus(const JsonObject& o, PreparedMeta& m) {
  o.expect_keys({"bytes", "chars", "sources"});
  m.total_bytes = o.uint("bytes", kMaxCount);
  m.total_chars = o.uint("chars", kMaxCount);
  if (m.total_bytes == 0) o.fail("bytes", "is 0: a prepared corpus is never empty");
  if (m.total_chars > m.total_bytes)
    o.fail("chars", fmt::format("is {}, more than the {} bytes", m.total_chars, m.total_bytes));
  read_sources(o, m);
}

void read_split(const JsonObject& o, PreparedMeta& m) {
  o.expect_keys({"unit", "units", "val_units", "byte_offset", "char_offset"});
  const std::string unit = o.string("unit");
  m.split_unit = split_unit_of(m.tokenizer_kind);
  const bool bytes = m.split_unit == SplitUnit::bytes;
  if (base::find_choice<SplitUnit>(unit) != m.split_unit)
    o.fail("unit", fmt::format("is {}; a {} tokenizer splits by {}", base::json_quote(unit),
                               m.tokenizer_kind, m.split_unit));
  m.split_units = o.uint("units", kMaxCount);
  m.val_units = o.uint("val_units", kMaxCount);
  m.split_byte = o.uint("byte_offset", kMaxCount);
  m.split_char = o.uint("char_offset", kMaxCount);
  const uint64_t units = bytes ? m.total_bytes : m.total_chars;
  if (m.split_units != units)
    o.fail("units",
           fmt::format("is {}, but the corpus has {} {}s", m.split_units, units, m.split_unit));
  if (const uint64_t v = split_val_units(units, m.val_fraction); m.val_units != v)
    o.fail("val_units",
           fmt::format("is {}, but floor({} * {}) is {}", m.val_units, units, m.val_fraction, v));
  if (m.split_byte > m.total_bytes || m.split_char > m.total_chars || m.split_char > m.split_byte ||
      m.total_chars - m.split_char > m.total_bytes - m.split_byte)
    o.fail("byte_offset", fmt::format("{} with char_offset {} is not a place in a corpus of {} "
                                      "bytes and {} characters",
                                      m.split_byte, m.split_char, m.total_bytes, m.total_chars));
  const uint64_t at = bytes ? m.split_byte : m.split_char;
  if (at != units - m.val_units)
    o.fail(bytes ? "byte_offset" : "char_offset",
           fmt::format("is {}, but the last {} of {} {}s are validation", at, m.val_units, units,
                       m.split_unit));
}

// A part's keys: the hashes (a folder prepared before they were recorded has neither) and
// documents (a folder with end_of_text has it).
void expect_part_keys(const JsonObject& o, bool hashed, bool documents) {
  std::vector<std::string_view> keys = {"tokens", "text_bytes"};
  if (hashed) keys.insert(keys.end(), {"sha256", "sample_sha256"});
  if (documents) keys.push_back("documents");
  o.expect_keys(keys);
}

SplitPart read_part(const JsonObject& top, std::string_view key, uint64_t text_bytes,
                    const PreparedMeta& m) {
  const JsonObject o = top.object(key);
  const bool hashed = o.has("sha256") || o.has("sample_sha256");
  expect_part_keys(o, hashed, m.end_of_text.has_value());
  SplitPart p{o.uint("tokens", kMaxCount), o.uint("text_bytes", kMaxCount), "", ""};
  if (hashed) p.sha256 = sha256_of(o, "sha256"), p.sample_sha256 = sha256_of(o, "sample_sha256");
  if (m.end_of_text) p.documents = o.uint("documents", m.sources.size());
  if (p.text_bytes != text_bytes)
    o.fail("text_bytes", fmt::format("is {}, but the split gives {}", p.text_bytes, text_bytes));
  if (p.documents > p.tokens)
    o.fail("tokens",
           fmt::format("is {}, fewer than its {} documents' ends", p.tokens, p.documents));
  const uint64_t text_tokens = p.tokens - p.documents;
  if (text_tokens > p.text_bytes || (text_tokens == 0) != (p.text_bytes == 0))
    o.fail("tokens",
           fmt::format("is {}: {} bytes of text cannot give that many", p.tokens, p.text_bytes));
  return p;
}

// Char and byte give one id per unit, so their counts are known exactly.
void check_tokens(const JsonObject& top, const PreparedMeta& m) {
  if (m.end_of_text && m.train.documents + m.val.documents != m.sources.size())
    top.object("val").fail(
        "documents", fmt::format("is {}, but with train's {} there are {} sources", m.val.documents,
                                 m.train.documents, m.sources.size()));
  if (encodes_by_merges(m.tokenizer_kind)) return;
  const bool bytes = m.tokenizer_kind == TokenizerKind::bytes;
  const uint64_t train_units = bytes ? m.split_byte : m.split_char;
  const uint64_t val_units = (bytes ? m.total_bytes : m.total_chars) - train_units;
  const uint64_t train = train_units + m.train.documents, val = val_units + m.val.documents;
  if (m.train.tokens != train)
    top.object("train").fail("tokens",
                             fmt::format("is {}, but the split gives {}", m.train.tokens, train));
  if (m.val.tokens != val)
    top.object("val").fail("tokens",
                           fmt::format("is {}, but the split gives {}", m.val.tokens, val));
  if (m.tokenizer_kind == TokenizerKind::chars &&
      static_cast<uint64_t>(m.vocab_size) > m.total_chars)
    top.object("tokenizer")
        .fail("vocab_size", fmt::format("is {}, more than the {} characters of "
                                        "the corpus",
                                        m.vocab_size, m.total_chars));
}

nlohmann::json tokenizer_json(const PreparedMeta& m) {
  nlohmann::json j = {{"type", base::choice_name(m.tokenizer_kind)},
                      {"vocab_size", m.vocab_size},
                      {"sha256", m.tokenizer_sha256}};
  if (m.end_of_text) j["end_of_text"] = *m.end_of_text;
  return j;
}

}  // namespace

std::string prepared_meta_bytes(const PreparedMeta& m) {
  nlohmann::json sources = nlohmann::json::array();
  for (const SourceFile& s : m.sources)
    sources.push_back({{"path", base::replace_invalid_utf8(s.path)},
                       {"bytes", s.bytes},
                       {"chars", s.chars},
                       {"sha256", s.sha256}});
  const nlohmann::json j = {
      {"format", kPreparedFormat},
      {"format_version", kPreparedVersion},
      {"tokenizer", tokenizer_json(m)},
      {"dtype", dtype_name(m.dtype)},
      {"val_fraction", m.val_fraction},
      {"corpus", {{"bytes", m.total_bytes}, {"chars", m.total_chars}, {"sources", sources}}},
      {"split",
       {{"unit", base::choice_name(m.split_unit)},
        {"units", m.split_units},
        {"val_units", m.val_units},
        {"byte_offset", m.split_byte},
        {"char_offset", m.split_char}}},
      {"train", part_json(m.train, m.end_of_text.has_value())},
      {"val", part_json(m.val, m.end_of_text.has_value())}};
  return j.dump(2) + "\n";
}

PreparedMeta parse_prepared_meta(std::string_view bytes, const std::string& name) {
  if (bytes.size() > kMaxMetaBytes)
    throw DataError(fmt::format("{}: {} bytes is more than a meta.json may have ({})", name,
                                bytes.size(), kMaxMetaBytes));
  const nlohmann::json json = detail::parse_strict_json(bytes, name);
  const JsonObject top(json, name, "");
  if (top.string("format") != kPreparedFormat)
    top.fail("format", fmt::format("must be \"{}\": this is not a prepared folder's metadata",
                                   kPreparedFormat));
  if (const uint64_t v = top.uint("format_version"); v != kPreparedVersion)
    top.fail("format_version",
             fmt::format("is {}; this attograd reads version {}", v, kPreparedVersion));
  top.expect_keys({"format", "format_version", "tokenizer", "dtype", "val_fraction", "corpus",
                   "split", "train", "val"});
  PreparedMeta m;
  read_tokenizer(top.object("tokenizer"), m);
  const std::string dtype = top.string("dtype");
  if (!parse_dtype(dtype) || *parse_dtype(dtype) != dtype_for_vocab(m.vocab_size))
    top.fail("dtype", fmt::format("is {}, but {} ids are stored as {}", base::json_quote(dtype),
                                  m.vocab_size, dtype_name(dtype_for_vocab(m.vocab_size))));
  m.dtype = dtype_for_vocab(m.vocab_size);
  m.val_fraction = top.number("val_fraction");
  if (!(m.val_fraction >= 0 && m.val_fraction < 1))
    top.fail("val_fraction", fmt::format("is {}, not in [0, 1)", m.val_fraction));
  read_corpus(top.object("corpus"), m);
  read_split(top.object("split"), m);
  m.train = read_part(top, "train", m.split_byte, m);
  m.val = read_part(top, "val", m.total_bytes - m.split_byte, m);
  check_tokens(top, m);
  return m;
}

uint64_t split_val_units(uint64_t units, double val_fraction) {
  // the arithmetic of dataset.h's split_tokens: size_t times double, floored
  return static_cast<uint64_t>(std::floor(static_cast<size_t>(units) * val_fraction));
}

std::string prepared_identity(const PreparedMeta& meta) {
  PreparedMeta anywhere = meta;
  for (SourceFile& s : anywhere.sources) s.path.clear();
  return text_identity(prepared_meta_bytes(anywhere));
}

}  // namespace data
