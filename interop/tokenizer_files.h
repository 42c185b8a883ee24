#pragma once
// A tokenizer as the files of other tools hold it, for every format that carries one in a
// folder beside the weights (Hugging Face's, llm.c's --tokenizer DIR).
//
//   auto tok = interop::read_tokenizer_folder("gpt2/", /*required=*/false);   // optional
//   interop::write_tokenizer_files(*model.tokenizer, "out/");
#include <cstdint>
#include <optional>
#include <string>

#include "io/checkpoint.h"

namespace interop {

// GPT-2's tokenizer files in folder (vocab.json + merges.txt, or encoder.json + vocab.bpe, as
// data::read_gpt2_tokenizer_files reads them), as a checkpoint's tokenizer section; nullopt
// when the folder has neither pair, an InteropError then if `required`, and for any entry
// the reader refuses (the message names file and entry).
std::optional<io::TokenizerSection> read_tokenizer_folder(const std::string& folder, bool required);

// What reading the tokenizer files of folder holds at its peak, from their sizes: measured
// at 3.2 times their bytes (the texts, the tokens, the merges' pairs), planned at 4; 0
// without them. Links are not followed here (the reader refuses them).
int64_t tokenizer_folder_bytes(const std::string& folder);

// The id of <|endoftext|> in the tokenizer, when it has one (config.json's bos and eos ids).
std::optional<int64_t> end_of_text_id(const io::TokenizerSection& tokenizer);

// Into folder: Hugging Face tokenizers' tokenizer.json for any tokenizer it can express, and
// vocab.json + merges.txt (GPT2Tokenizer's files) as well when the tokenizer is byte-level
// with GPT-2's split pattern (or without merges). A tokenizer neither can express is an
// InteropError saying why.
void write_tokenizer_files(const io::TokenizerSection& tokenizer, const std::string& folder);

}  // namespace interop
