#pragma once
// A tokenizer as the files of other tools hold it, for every format that carries one in a
// folder beside the weights (Hugging Face's, llm.c's --tokenizer DIR).
//
//   auto tok = interop::read_tokenizer_folder("gpt2/", /*required=*/false);   // optional
//   interop::write_tokenizer_files(*model.tokenizer, "out/");
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/chat_format.h"
#include "io/checkpoint.h"

namespace interop {

// The tokenizer files in folder as a checkpoint's tokenizer section: Hugging Face's
// tokenizer.json (tokenizer_json.h: what `export --format hf` writes for every tokenizer,
// and Llama 3's, Qwen2/3's, SmolLM2's), else GPT-2's (vocab.json + merges.txt, or
// encoder.json + vocab.bpe, as data::parse_gpt2_tokenizer_files reads them). nullopt when the
// folder has none, an InteropError then if `required`, and for anything a reader refuses (the
// message names file and entry). Files are opened through InputBytes: a link only as hub_cache.h
// allows. What a file states that the section cannot keep goes to notes.
std::optional<io::TokenizerSection> read_tokenizer_folder(
    const std::string& folder, bool required, std::vector<std::string>* notes = nullptr);

// What reading the tokenizer files of folder holds at its peak, from their sizes: measured
// at 3.2 times their bytes (the texts, the tokens, the merges' pairs), planned at 4; 0
// without them. A link is judged as the reader judges it (refused unless a snapshot's).
int64_t tokenizer_folder_bytes(const std::string& folder);

// What a Hugging Face folder says of chats, both files optional and bounded as config.json
// is (kMaxHfJsonBytes): tokenizer_config.json's chat_template, recognised by its family
// (data/chat_format.h; another template goes to notes, naming the file and key: its model
// then needs --chat-format), and generation_config.json's eos_token_id, one id or a list
// (the ids that end a reply; at most train::kMaxStopTokenIds). A value of the wrong kind is
// an InteropError naming file and key.
struct ChatSettings {
  std::optional<data::ChatFormat> format;
  std::vector<int64_t> stop_ids;
};
ChatSettings read_chat_settings(const std::string& tokenizer_folder,
                                const std::string& model_folder, std::vector<std::string>& notes);

// The id of <|endoftext|> in the tokenizer, when it has one (config.json's bos and eos ids).
std::optional<int64_t> end_of_text_id(const io::TokenizerSection& tokenizer);

// Into folder: Hugging Face tokenizers' tokenizer.json for any tokenizer it can express, and
// vocab.json + merges.txt (GPT2Tokenizer's files) as well when the tokenizer is byte-level
// with GPT-2's split pattern (or without merges). A tokenizer neither can express is an
// InteropError saying why. `added`: ids past the tokenizer's vocabulary and their texts,
// written as tokenizer.json's special added tokens (tokens_past_vocabulary).
void write_tokenizer_files(const io::TokenizerSection& tokenizer, const std::string& folder,
                           const std::vector<std::pair<int64_t, std::string>>& added = {});

// The ids a fine-tuning added past the tokenizer's vocabulary (the model's vocab_size is
// larger): a chat format's special tokens, or instruct's one end-of-text id, with their
// texts, and the id that ends a reply there (the format's end of turn, or that end of text).
struct AddedTokens {
  std::vector<std::pair<int64_t, std::string>> tokens;
  std::optional<int64_t> end;
};
AddedTokens tokens_past_vocabulary(const io::TokenizerSection& tokenizer, int64_t vocab_size,
                                   std::optional<data::ChatFormat> chat_format);

// export --format hf: write_tokenizer_files, with the added tokens (tokens_past_vocabulary)
// in tokenizer.json's added_tokens (special: matched whole, skipped when decoding), and
// generation_config.json naming the ids that end a reply (the checkpoint's stop ids, else
// the end id), so that transformers stops where attograd stops. Returns the end-of-text id
// config.json names: the tokenizer's own, else the added end id.
std::optional<int64_t> write_hf_tokenizer(const io::TokenizerSection& tokenizer, int64_t vocab_size,
                                          std::optional<data::ChatFormat> chat_format,
                                          const std::vector<int64_t>& stop_ids,
                                          const std::string& folder);

}  // namespace interop
