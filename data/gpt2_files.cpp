// GPT-2's tokenizer files: vocab.json + merges.txt (or encoder.json + vocab.bpe), read as
// hostile input and written atomically (gpt2_tokenizer.h).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>

#include "base/atomic_file.h"
#include "base/utf8.h"
#include "data/byte_level_error.h"
#include "data/data_error.h"
#include "data/gpt2_tokenizer.h"
#include "data/posix_io.h"
#include "data/tokenizer_file.h"

namespace data {

namespace {

using detail::ByteLevelError;
using detail::quoted_token;

// vocab.json, parsed event by event: one object of token -> id, nothing else. Memory is
// bounded by the entries allowed, whatever the file holds.
class VocabReader : public nlohmann::json_sax<nlohmann::json> {
 public:
  static constexpr size_t kMaxEntries =
      static_cast<size_t>(kMaxBpeVocabSize) + Gpt2Tokenizer::kMaxSpecialTokens;

  bool null() override { return refuse("null"); }
  bool boolean(bool) override { return refuse("a boolean"); }
  bool number_integer(number_integer_t v) override { return refuse(fmt::format("{}", v)); }
  bool number_unsigned(number_unsigned_t v) override {
    if (depth_ != 1 || !has_key_) return refuse("a number");
    entries_.emplace_back(std::move(key_), v);
    has_key_ = false;
    return true;
  }
  bool number_float(number_float_t, const string_t& s) override { return refuse(s); }
  bool string(string_t&) override { return refuse("a string"); }
  bool binary(binary_t&) override { return refuse("binary data"); }
  bool start_object(std::size_t) override {
    if (depth_++ != 0) return refuse("an object");
    return true;
  }
  bool key(string_t& k) override {
    if (entries_.size() >= kMaxEntries)
      return fail(fmt::format("more than {} tokens", kMaxEntries));
    key_ = k;
    has_key_ = true;
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return refuse("an array"); }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    // nlohmann's message ends quoting the bytes last read: the file is named, never quoted
    const std::string what = e.what();
    return fail(fmt::format("not valid JSON: {}",
                            base::printable(what.substr(0, what.find("; last read")))));
  }

  const std::string& error() const { return error_; }
  std::vector<std::pair<std::string, uint64_t>>& entries() { return entries_; }

 private:
  bool fail(const std::string& why) {
    if (error_.empty()) error_ = why;
    return false;
  }
  bool refuse(const std::string& what) {
    if (depth_ == 0) return fail(fmt::format("{} where an object of token -> id should be", what));
    return fail(fmt::format("the token {} has {} where its id (an unsigned integer) should be",
                            has_key_ ? quoted_token(key_) : std::string("before it"),
                            base::printable(what.substr(0, 40))));
  }

  int depth_ = 0;
  bool has_key_ = false;
  std::string key_, error_;
  std::vector<std::pair<std::string, uint64_t>> entries_;
};

// A token given twice, found by sorting the entries' indices (4 bytes a token, where a
// table of the tokens seen would hold each again).
void refuse_twice(const std::vector<std::pair<std::string, uint64_t>>& entries,
                  const std::string& name) {
  std::vector<uint32_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return entries[a].first < entries[b].first; });
  for (size_t i = 1; i < order.size(); ++i)
    if (entries[order[i - 1]].first == entries[order[i]].first)
      throw DataError(fmt::format("{}: the token {} appears twice (entries {} and {})", name,
                                  quoted_token(entries[order[i]].first), order[i - 1], order[i]));
}

// The tokens in id order; ids must be 0 to N-1, each once.
std::vector<std::string> parse_vocab(std::string_view bytes, const std::string& name) {
  if (bytes.size() > kMaxGpt2VocabFileBytes)
    throw DataError(fmt::format("{}: {} bytes is more than the {} such a file may have", name,
                                bytes.size(), kMaxGpt2VocabFileBytes));
  VocabReader reader;
  if (!nlohmann::json::sax_parse(bytes.begin(), bytes.end(), &reader) || !reader.error().empty())
    throw DataError(
        fmt::format("{}: {}", name, reader.error().empty() ? "not valid JSON" : reader.error()));
  auto& entries = reader.entries();
  refuse_twice(entries, name);
  std::vector<std::string> tokens(entries.size());
  std::vector<bool> taken(entries.size());
  for (auto& [token, id] : entries) {
    if (id >= entries.size())
      throw DataError(fmt::format("{}: the token {} has id {}, but {} tokens have ids 0 to {}",
                                  name, quoted_token(token), id, entries.size(),
                                  entries.size() - 1));
    if (taken[id])
      throw DataError(fmt::format("{}: id {} is given to both {} and {}", name, id,
                                  quoted_token(tokens[id]), quoted_token(token)));
    taken[id] = true;
    tokens[id] = std::move(token);
  }
  if (tokens.empty()) throw DataError(fmt::format("{}: no tokens", name));
  return tokens;
}

struct MergeLines {
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<uint64_t> lines;  // each merge's line, 1-based
};

// One merge a line, "left right"; a first line starting with "#version" is skipped, and so
// is the empty rest after the last newline.
MergeLines parse_merges(std::string_view bytes, const std::string& name) {
  if (bytes.size() > kMaxGpt2MergesFileBytes)
    throw DataError(fmt::format("{}: {} bytes is more than the {} such a file may have", name,
                                bytes.size(), kMaxGpt2MergesFileBytes));
  // counted before any is stored: a file of more lines than merges is refused at no cost
  const auto lines = static_cast<uint64_t>(std::count(bytes.begin(), bytes.end(), '\n'));
  if (lines > static_cast<uint64_t>(kMaxBpeVocabSize - 256) + 1 + 1)  // #version, last line
    throw DataError(fmt::format("{}: {} lines, more than the {} merges a vocabulary may have", name,
                                lines, kMaxBpeVocabSize - 256));
  MergeLines out;
  uint64_t line = 0;
  for (size_t pos = 0; pos < bytes.size();) {
    const size_t end = std::min(bytes.find('\n', pos), bytes.size());
    const std::string_view text = bytes.substr(pos, end - pos);
    pos = end + 1;
    if (++line == 1 && text.rfind("#version", 0) == 0) continue;
    const size_t space = text.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == text.size() ||
        text.find(' ', space + 1) != std::string_view::npos)
      throw DataError(
          fmt::format("{}: line {}: is not a merge (two tokens and one space)", name, line));
    if (out.merges.size() >= static_cast<size_t>(kMaxBpeVocabSize) - 256)
      throw DataError(
          fmt::format("{}: line {}: more than {} merges", name, line, kMaxBpeVocabSize - 256));
    out.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    out.lines.push_back(line);
  }
  return out;
}

}  // namespace

std::unique_ptr<Tokenizer> parse_gpt2_tokenizer_files(std::string_view vocab_json,
                                                      std::string_view merges_txt,
                                                      const std::string& vocab_name,
                                                      const std::string& merges_name) {
  ByteLevelVocab vocab;
  vocab.tokens = parse_vocab(vocab_json, vocab_name);
  MergeLines m = parse_merges(merges_txt, merges_name);
  vocab.merges = std::move(m.merges);
  vocab.split_pattern = std::string(kGpt2SplitPattern);
  for (size_t id = 256 + vocab.merges.size(); id < vocab.tokens.size(); ++id)
    if (vocab.tokens[id] == "<|endoftext|>") vocab.end_of_text = static_cast<int64_t>(id);
  try {
    return tokenizer_from_byte_level(std::move(vocab));
  } catch (const ByteLevelError& e) {
    switch (e.part) {
      case ByteLevelError::Part::token:
        throw DataError(fmt::format("{}: token {}: {}", vocab_name, e.index, e.why));
      case ByteLevelError::Part::merge:
        throw DataError(fmt::format("{}: line {}: {}", merges_name, m.lines[e.index], e.why));
      case ByteLevelError::Part::whole: break;
    }
    throw DataError(fmt::format("{} with {}: {}", vocab_name, merges_name, e.why));
  }
}

std::unique_ptr<Tokenizer> read_gpt2_tokenizer_files(const std::string& folder) {
  const detail::InputFolder dir(folder);
  const bool hf = dir.has("vocab.json") || dir.has("merges.txt");
  if (!hf && !dir.has("encoder.json") && !dir.has("vocab.bpe"))
    throw DataError(fmt::format(
        "{}: neither vocab.json + merges.txt nor encoder.json + vocab.bpe (GPT-2's tokenizer "
        "files) is there",
        base::printable(dir.path())));
  const std::string vocab_file = hf ? "vocab.json" : "encoder.json";
  const std::string merges_file = hf ? "merges.txt" : "vocab.bpe";
  for (const std::string& f : {vocab_file, merges_file})
    if (!dir.has(f))
      throw DataError(fmt::format("{}: has {} but no {}", base::printable(dir.path()),
                                  f == vocab_file ? merges_file : vocab_file, f));
  const std::string vocab_name = base::printable(dir.display(vocab_file));
  const std::string merges_name = base::printable(dir.display(merges_file));
  const std::string vocab =
      detail::InputFile(vocab_file, vocab_name, dir.fd()).read_all(kMaxGpt2VocabFileBytes);
  const std::string merges =
      detail::InputFile(merges_file, merges_name, dir.fd()).read_all(kMaxGpt2MergesFileBytes);
  return parse_gpt2_tokenizer_files(vocab, merges, vocab_name, merges_name);
}

// ---- writing ---------------------------------------------------------------------------

std::string gpt2_vocab_json(const ByteLevelVocab& vocab) {
  std::string out = "{";
  for (size_t id = 0; id < vocab.tokens.size(); ++id)
    out += fmt::format("{}\n  {}: {}", id == 0 ? "" : ",", nlohmann::json(vocab.tokens[id]).dump(),
                       id);
  return out + "\n}\n";
}

std::string gpt2_merges_txt(const ByteLevelVocab& vocab) {
  std::string out = "#version: 0.2\n";
  for (const auto& [left, right] : vocab.merges) out += left + ' ' + right + '\n';
  return out;
}

void write_gpt2_tokenizer_files(const Tokenizer& tok, const std::string& folder) {
  const ByteLevelVocab vocab = byte_level_vocab(tok);
  std::error_code ec;
  std::filesystem::create_directory(folder, ec);
  if (ec)
    throw std::runtime_error(
        fmt::format("cannot make the folder '{}': {}", base::printable(folder), ec.message()));
  base::write_file_atomically(folder + "/vocab.json", gpt2_vocab_json(vocab));
  base::write_file_atomically(folder + "/merges.txt", gpt2_merges_txt(vocab));
}

}  // namespace data
