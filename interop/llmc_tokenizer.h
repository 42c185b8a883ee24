#pragma once
// llm.c's tokenizer file, gpt2_tokenizer.bin, which train_gpt2.c opens beside itself to print
// its samples (llm.c's llmc/tokenizer.h reads it; train_gpt2.py's write_tokenizer writes it):
// a header of 256 int32 (magic 20240328, version 2, the number of tokens, the end-of-text
// id; the rest zeros), then for each id in order a uint8 length (1 to 255) and the token's
// bytes. It holds GPT-2's tokenizer (ids to bytes; llm.c decodes with it, never encodes), so
// it is written for a model with GPT-2's tokenizer and an end-of-text token only.
//
//   const CompanionFile t = interop::llmc_tokenizer_of(model, "out/gpt2_124M.bin");
//   interop::write_llmc_tokenizer_beside(model, "out/gpt2_124M.bin");  // t.path, or t.note why not
#include <string>

#include "data/gpt2_tokenizer.h"
#include "interop/float_codec.h"
#include "interop/model_files.h"

namespace interop {

inline constexpr int32_t kLlmcTokenizerMagic = 20240328;
inline constexpr int32_t kLlmcTokenizerVersion = 2;
inline constexpr const char* kLlmcTokenizerFile = "gpt2_tokenizer.bin";  // llm.c's name

// Where an llm.c export at model_path puts the tokenizer file (kLlmcTokenizerFile in the same
// folder), or an empty path and a note saying why the model's tokenizer cannot be written so.
CompanionFile llmc_tokenizer_of(const ModelFiles& model, const std::string& model_path);
// llmc_tokenizer_of's file written, when there is one.
void write_llmc_tokenizer_beside(const ModelFiles& model, const std::string& model_path);

// The file's bytes, to out; a token of more than 255 bytes (a long special token) or no
// <|endoftext|> is an InteropError naming it.
void write_llmc_tokenizer(const data::Gpt2Tokenizer& tokenizer, const ByteSink& out);
// The same into the file at path, replaced whole (atomically) or left as it was.
void write_llmc_tokenizer(const data::Gpt2Tokenizer& tokenizer, const std::string& path);

}  // namespace interop
