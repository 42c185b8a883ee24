#include "interop/llmc_tokenizer.h"

#include <fmt/format.h>

#include <array>
#include <filesystem>
#include <optional>

#include "base/atomic_file.h"
#include "base/utf8.h"
#include "io/tokenizer_section.h"

namespace interop {

namespace {

constexpr size_t kMaxTokenBytes = 255;  // the length is one byte, and never 0

// The first id whose token llm.c's file cannot hold (empty, or over 255 bytes), if any.
std::optional<int64_t> unwritable_token(const data::Gpt2Tokenizer& tokenizer) {
  for (int64_t id = 0; id < tokenizer.vocab_size(); ++id)
    if (const size_t bytes = tokenizer.token_bytes(static_cast<uint32_t>(id)).size();
        bytes == 0 || bytes > kMaxTokenBytes)
      return id;
  return std::nullopt;
}

}  // namespace

CompanionFile llmc_tokenizer_of(const ModelFiles& model, const std::string& model_path) {
  if (!model.tokenizer)
    return {"", fmt::format("no {}: the model has no tokenizer", kLlmcTokenizerFile)};
  const auto tokenizer = io::make_tokenizer(*model.tokenizer);
  const auto* gpt2 = dynamic_cast<const data::Gpt2Tokenizer*>(tokenizer.get());
  if (!gpt2)
    return {"", fmt::format("no {}: llm.c's tokenizer file holds GPT-2's tokenizer, and this "
                            "model's is {}",
                            kLlmcTokenizerFile, tokenizer->type())};
  if (!gpt2->special_id("<|endoftext|>"))
    return {"", fmt::format("no {}: llm.c's tokenizer file names an <|endoftext|> token, which "
                            "this GPT-2 tokenizer lacks",
                            kLlmcTokenizerFile)};
  if (const auto id = unwritable_token(*gpt2))
    return {"", fmt::format("no {}: its token {} is {} bytes, and llm.c's file holds 1 to {}",
                            kLlmcTokenizerFile, *id,
                            gpt2->token_bytes(static_cast<uint32_t>(*id)).size(), kMaxTokenBytes)};
  const std::filesystem::path model_file(model_path);
  if (model_file.filename() == kLlmcTokenizerFile)
    return {"",
            fmt::format("no {}: the model itself is written under that name", kLlmcTokenizerFile)};
  return {(model_file.parent_path() / kLlmcTokenizerFile).string(), ""};
}

void write_llmc_tokenizer(const data::Gpt2Tokenizer& tokenizer, const ByteSink& out) {
  const std::optional<int64_t> eot = tokenizer.special_id("<|endoftext|>");
  if (!eot) throw InteropError("the tokenizer has no <|endoftext|>, which llm.c's file names");
  const int64_t n = tokenizer.vocab_size();
  if (const auto id = unwritable_token(tokenizer))
    throw InteropError(fmt::format("token {} is {} bytes; llm.c's tokenizer file holds 1 to {}",
                                   *id, tokenizer.token_bytes(static_cast<uint32_t>(*id)).size(),
                                   kMaxTokenBytes));
  std::array<int32_t, 256> header{};
  header[0] = kLlmcTokenizerMagic;
  header[1] = kLlmcTokenizerVersion;
  header[2] = static_cast<int32_t>(n);
  header[3] = static_cast<int32_t>(*eot);
  out(reinterpret_cast<const char*>(header.data()), sizeof header);  // little-endian, as the CPU
  for (int64_t id = 0; id < n; ++id) {
    const std::string_view token = tokenizer.token_bytes(static_cast<uint32_t>(id));
    const char length = static_cast<char>(static_cast<uint8_t>(token.size()));
    out(&length, 1);
    out(token.data(), token.size());
  }
}

void write_llmc_tokenizer(const data::Gpt2Tokenizer& tokenizer, const std::string& path) {
  try {
    base::write_file_atomically(path, [&](int fd) {
      base::BufferedWriter file(fd, path);
      write_llmc_tokenizer(tokenizer, [&](const char* data, size_t n) { file.write(data, n); });
      file.flush();
    });
  } catch (const InteropError& e) {
    throw InteropError(fmt::format("{}: {}", base::printable(path), e.what()));
  }
}

void write_llmc_tokenizer_beside(const ModelFiles& model, const std::string& model_path) {
  const CompanionFile file = llmc_tokenizer_of(model, model_path);
  if (file.path.empty()) return;
  const auto tokenizer = io::make_tokenizer(*model.tokenizer);
  write_llmc_tokenizer(dynamic_cast<const data::Gpt2Tokenizer&>(*tokenizer), file.path);
}

}  // namespace interop
