#pragma once
// A tokenizer as the files of other tools hold it, for every format that carries one in a
// folder beside the weights (Hugging Face's, llm.c's --tokenizer DIR).
//
//   auto tok = interop::read_tokenizer_folder("gpt2/", /*required=*/false);   // optional
//   interop::write_tokenizer_files(*model.tokenizer, "out/");
#include <optional>
#include <string>

#include "io/checkpoint.h"

namespace interop {

// GPT-2's tokenizer files in folder (vocab.json + merges.txt, or encoder.json + vocab.bpe, as
// data::read_gpt2_tokenizer_files reads them), as a checkpoint's tokenizer section; nullopt
// when the folder has neither pair, an InteropError then if `required`, and for any entry
// the reader refuses (the message names file and entry).
std::optional<io::TokenizerSection> read_tokenizer_folder(const std::string& folder, bool required);

// Into folder: Hugging Face tokenizers' tokenizer.json for any tokenizer it can express, and
// vocab.json + merges.txt (GPT2Tokenizer's files) as well when the tokenizer is byte-level
// with GPT-2's split pattern (or without merges). A tokenizer neither can express is an
// InteropError saying why.
void write_tokenizer_files(const io::TokenizerSection& tokenizer, const std::string& folder);

}  // namespace interop
