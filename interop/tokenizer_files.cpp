#include "interop/tokenizer_files.h"

#include <fmt/format.h>

#include <filesystem>

#include "base/atomic_file.h"
#include "data/gpt2_tokenizer.h"
#include "interop/model_files.h"
#include "io/tokenizer_section.h"

namespace interop {

namespace {

namespace fs = std::filesystem;

bool has_files(const std::string& folder, const char* a, const char* b) {
  std::error_code ec;
  return fs::exists(fs::path(folder) / a, ec) && fs::exists(fs::path(folder) / b, ec);
}

}  // namespace

std::optional<io::TokenizerSection> read_tokenizer_folder(const std::string& folder,
                                                          bool required) {
  const std::string where = folder.empty() ? "." : folder;
  if (!has_files(where, "vocab.json", "merges.txt") &&
      !has_files(where, "encoder.json", "vocab.bpe")) {
    if (!required) return std::nullopt;
    throw InteropError(
        fmt::format("{}: no GPT-2 tokenizer files (vocab.json and merges.txt, or "
                    "encoder.json and vocab.bpe)",
                    where));
  }
  try {
    const auto tok = data::read_gpt2_tokenizer_files(where);
    // the 256 bytes in order and no merges: whatever the split, the byte tokenizer
    if (tok->kind() == data::TokenizerKind::bpe && tok->vocab_size() == 256)
      return io::tokenizer_section(data::ByteTokenizer());
    return io::tokenizer_section(*tok);
  } catch (const std::exception& e) {
    throw InteropError(e.what());
  }
}

int64_t tokenizer_folder_bytes(const std::string& folder) {
  std::error_code ec;
  uint64_t bytes = 0;
  for (const char* name : {"vocab.json", "merges.txt", "encoder.json", "vocab.bpe"}) {
    const fs::path file = fs::path(folder.empty() ? "." : folder) / name;
    const auto status = fs::symlink_status(file, ec);
    if (!ec && fs::is_regular_file(status)) bytes += fs::file_size(file, ec);
  }
  return static_cast<int64_t>(std::min<uint64_t>(bytes, INT64_MAX / 8) * 4);
}

std::optional<int64_t> end_of_text_id(const io::TokenizerSection& tokenizer) {
  const data::TokenizerKind kind = io::tokenizer_kind(tokenizer);
  if (kind == data::TokenizerKind::chars || kind == data::TokenizerKind::none) return std::nullopt;
  return data::byte_level_vocab(*io::make_tokenizer(tokenizer)).end_of_text;
}

void write_tokenizer_files(const io::TokenizerSection& tokenizer, const std::string& folder) {
  try {
    const auto tok = io::make_tokenizer(tokenizer);
    base::write_file_atomically((fs::path(folder) / "tokenizer.json").string(),
                                data::hf_tokenizer_json(*tok));
    if (io::tokenizer_kind(tokenizer) == data::TokenizerKind::chars) return;
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
