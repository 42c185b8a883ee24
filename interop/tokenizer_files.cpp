#include "interop/tokenizer_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "base/atomic_file.h"
#include "data/examples.h"
#include "data/gpt2_tokenizer.h"
#include "interop/hub_cache.h"
#include "interop/input_bytes.h"
#include "interop/model_files.h"
#include "interop/tokenizer_json.h"
#include "io/tokenizer_section.h"

namespace interop {

namespace {

namespace fs = std::filesystem;

std::string file_in(const std::string& folder, const char* name) {
  return (fs::path(folder) / name).string();
}

// GPT-2's pair of files (vocab.json + merges.txt, or encoder.json + vocab.bpe), read through
// InputBytes (so a hub snapshot's links are followed into its blobs, and no other link),
// each within its bound.
io::TokenizerSection read_gpt2_files(const std::string& folder, const char* vocab_name,
                                     const char* merges_name) {
  for (const char* name : {vocab_name, merges_name})
    if (!has_entry(folder, name))
      throw InteropError(fmt::format("{}: has {} but no {}", folder,
                                     name == vocab_name ? merges_name : vocab_name, name));
  const std::string vocab_file = file_in(folder, vocab_name);
  const std::string merges_file = file_in(folder, merges_name);
  const std::string vocab = read_whole_file(vocab_file, data::kMaxGpt2VocabFileBytes);
  const std::string merges = read_whole_file(merges_file, data::kMaxGpt2MergesFileBytes);
  try {
    const auto tok = data::parse_gpt2_tokenizer_files(vocab, merges, vocab_file, merges_file);
    // the 256 bytes in order and no merges: whatever the split, the byte tokenizer
    if (tok->kind() == data::TokenizerKind::bpe && tok->vocab_size() == 256)
      return io::tokenizer_section(data::ByteTokenizer());
    return io::tokenizer_section(*tok);
  } catch (const std::exception& e) {
    throw InteropError(e.what());
  }
}

}  // namespace

std::optional<io::TokenizerSection> read_tokenizer_folder(const std::string& folder, bool required,
                                                          std::vector<std::string>* notes) {
  const std::string where = folder.empty() ? "." : folder;
  // tokenizer.json first: beside it, vocab.json + merges.txt lack what it adds (Qwen2's
  // folders hold both; its added tokens and NFC are in tokenizer.json alone)
  if (has_entry(where, "tokenizer.json"))
    return read_hf_tokenizer_json(file_in(where, "tokenizer.json"), notes);
  if (has_entry(where, "vocab.json") || has_entry(where, "merges.txt"))
    return read_gpt2_files(where, "vocab.json", "merges.txt");
  if (has_entry(where, "encoder.json") || has_entry(where, "vocab.bpe"))
    return read_gpt2_files(where, "encoder.json", "vocab.bpe");
  if (!required) return std::nullopt;
  throw InteropError(
      fmt::format("{}: no tokenizer files (vocab.json and merges.txt, encoder.json and "
                  "vocab.bpe, or tokenizer.json)",
                  where));
}

int64_t tokenizer_folder_bytes(const std::string& folder) {
  const std::string where = folder.empty() ? "." : folder;
  uint64_t bytes = 0;
  for (const char* name :
       {"vocab.json", "merges.txt", "encoder.json", "vocab.bpe", "tokenizer.json"})
    if (has_entry(where, name)) bytes += InputBytes::open(file_in(where, name)).size();
  return static_cast<int64_t>(std::min<uint64_t>(bytes, INT64_MAX / 8) * 4);
}

std::optional<int64_t> end_of_text_id(const io::TokenizerSection& tokenizer) {
  const data::TokenizerKind kind = io::tokenizer_kind(tokenizer);
  if (kind == data::TokenizerKind::chars || kind == data::TokenizerKind::none) return std::nullopt;
  if (kind == data::TokenizerKind::hf) {
    const int64_t id = data::end_of_text_id(*io::make_tokenizer(tokenizer));
    return id < static_cast<int64_t>(tokenizer.token_ends.size()) ? std::optional(id)
                                                                  : std::nullopt;
  }
  return data::byte_level_vocab(*io::make_tokenizer(tokenizer)).end_of_text;
}

void write_tokenizer_files(const io::TokenizerSection& tokenizer, const std::string& folder) {
  try {
    const auto tok = io::make_tokenizer(tokenizer);
    base::write_file_atomically((fs::path(folder) / "tokenizer.json").string(),
                                data::hf_tokenizer_json(*tok));
    // char, and hf (its added tokens, normalizer and template): tokenizer.json alone
    const data::TokenizerKind kind = io::tokenizer_kind(tokenizer);
    if (kind == data::TokenizerKind::chars || kind == data::TokenizerKind::hf) return;
    // GPT2Tokenizer splits with GPT-2's pattern: the same ids only for that pattern, or
    // with no merges (bytes alone: any split gives the same ids)
    const data::ByteLevelVocab vocab = data::byte_level_vocab(*tok);
    if (vocab.split_pattern == data::kGpt2SplitPattern || vocab.merges.empty())
      data::write_gpt2_tokenizer_files(*tok, folder);
  } catch (const std::invalid_argument& e) {
    throw InteropError(fmt::format("{}: the tokenizer cannot be written: {}", folder, e.what()));
  }
}

}  // namespace interop
