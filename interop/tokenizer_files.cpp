#include "interop/tokenizer_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "base/atomic_file.h"
#include "base/json.h"
#include "data/examples.h"
#include "data/gpt2_tokenizer.h"
#include "interop/hf_folder.h"
#include "interop/hub_cache.h"
#include "interop/input_bytes.h"
#include "interop/model_files.h"
#include "interop/tokenizer_json.h"
#include "io/tokenizer_section.h"
#include "train/config.h"

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
    return io::tokenizer_section(*data::bytes_alone_as_byte(
        data::parse_gpt2_tokenizer_files(vocab, merges, vocab_file, merges_file)));
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

namespace {

std::optional<data::ChatFormat> chat_format_in(const std::string& folder,
                                               std::vector<std::string>& notes) {
  if (!has_entry(folder, "tokenizer_config.json")) return std::nullopt;
  const std::string path = file_in(folder, "tokenizer_config.json");
  const nlohmann::json j = read_hf_config(path, {"chat_template"});
  const HfConfigKeys keys{j, path};
  if (!keys.find("chat_template")) return std::nullopt;
  const std::string chat_template = keys.text("chat_template", "");
  const std::optional<data::ChatFormat> format = data::detect_chat_format(chat_template);
  if (!format)
    notes.push_back(fmt::format(
        "{}: 'chat_template' writes neither ChatML (<|im_start|>) nor Llama 3's headers "
        "(<|start_header_id|>), the chat formats attograd knows: sample --chat needs "
        "--chat-format",
        path));
  return format;
}

std::vector<int64_t> stop_ids_in(const std::string& folder) {
  if (!has_entry(folder, "generation_config.json")) return {};
  const std::string path = file_in(folder, "generation_config.json");
  const nlohmann::json j = read_hf_config(path, {"eos_token_id"});
  const HfConfigKeys keys{j, path};
  const nlohmann::json* eos = keys.find("eos_token_id");
  if (!eos) return {};
  if (!eos->is_array()) return {keys.integer("eos_token_id", 0)};
  if (eos->size() > train::kMaxStopTokenIds)
    keys.fail("eos_token_id", fmt::format("lists {} ids, more than the {} attograd keeps",
                                          eos->size(), train::kMaxStopTokenIds));
  std::vector<int64_t> ids;
  for (const nlohmann::json& id : *eos) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0)
      keys.fail("eos_token_id", fmt::format("holds {}, not a token id", base::json_quote(id)));
    ids.push_back(id.get<int64_t>());
  }
  return ids;
}

}  // namespace

ChatSettings read_chat_settings(const std::string& tokenizer_folder,
                                const std::string& model_folder, std::vector<std::string>& notes) {
  return {chat_format_in(tokenizer_folder.empty() ? "." : tokenizer_folder, notes),
          stop_ids_in(model_folder.empty() ? "." : model_folder)};
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

namespace {

// tokenizer.json's text (our own, written just now) with the added tokens after its own
std::string with_added_tokens(const std::string& tokenizer_json,
                              const std::vector<std::pair<int64_t, std::string>>& added) {
  if (added.empty()) return tokenizer_json;
  nlohmann::json j = nlohmann::json::parse(tokenizer_json);
  nlohmann::json& list = j["added_tokens"];
  if (!list.is_array()) list = nlohmann::json::array();
  for (const auto& [id, text] : added)
    list.push_back({{"id", id},
                    {"content", text},
                    {"single_word", false},
                    {"lstrip", false},
                    {"rstrip", false},
                    {"normalized", false},
                    {"special", true}});
  return j.dump(2) + "\n";
}

}  // namespace

void write_tokenizer_files(const io::TokenizerSection& tokenizer, const std::string& folder,
                           const std::vector<std::pair<int64_t, std::string>>& added) {
  try {
    const auto tok = io::make_tokenizer(tokenizer);
    base::write_file_atomically((fs::path(folder) / "tokenizer.json").string(),
                                with_added_tokens(data::hf_tokenizer_json(*tok), added));
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

AddedTokens tokens_past_vocabulary(const io::TokenizerSection& tokenizer, int64_t vocab_size,
                                   std::optional<data::ChatFormat> chat_format) {
  AddedTokens added;
  const auto tok = io::make_tokenizer(tokenizer);
  const int64_t own = tok->vocab_size();
  if (chat_format) {
    const data::ChatTokens chat(*chat_format, *tok);
    for (int64_t id = own; id < vocab_size && !chat.text_of(id).empty(); ++id)
      added.tokens.emplace_back(id, std::string(chat.text_of(id)));
    added.end = chat.end_of_turn();
  } else if (vocab_size == own + 1) {
    added.tokens.emplace_back(own, "<|endoftext|>");
    added.end = own;
  }
  return added;
}

std::optional<int64_t> write_hf_tokenizer(const io::TokenizerSection& tokenizer, int64_t vocab_size,
                                          std::optional<data::ChatFormat> chat_format,
                                          const std::vector<int64_t>& stop_ids,
                                          const std::string& folder) {
  const AddedTokens added = tokens_past_vocabulary(tokenizer, vocab_size, chat_format);
  write_tokenizer_files(tokenizer, folder, added.tokens);
  const std::optional<int64_t> own = end_of_text_id(tokenizer);
  const std::optional<int64_t> end = own ? own : added.end;
  std::vector<int64_t> stops = stop_ids;
  if (stops.empty() && added.end) stops.push_back(*added.end);
  if (!stops.empty() || end) {
    nlohmann::json generation = {
        {"eos_token_id", stops.empty() ? nlohmann::json(*end) : nlohmann::json(stops)}};
    if (end) generation["bos_token_id"] = *end;
    base::write_file_atomically(file_in(folder, "generation_config.json"),
                                generation.dump(2) + "\n");
  }
  return end;
}

}  // namespace interop
