#pragma once
// Hugging Face tokenizers' tokenizer.json read back into attograd's tokenizer (see interop.h
// for the map): every shape data::hf_tokenizer_json writes (char, byte, and byte-level BPE
// with GPT-2's, GPT-4's or any other split pattern) and GPT-2's own file.
//
//   std::vector<std::string> notes;
//   io::TokenizerSection t = interop::read_hf_tokenizer_json("gpt2/tokenizer.json", &notes);
//
// What is read:
//   byte-level BPE  model BPE: vocab (token -> id), merges ("a b" or ["a", "b"]), then
//                   added_tokens (ids after the merges' tokens: the special tokens);
//                   pre_tokenizer ByteLevel (use_regex: GPT-2's pattern; without: no split)
//                   or Sequence [Split (Regex, Isolated), ByteLevel without its regex];
//                   decoder ByteLevel; post_processor none or ByteLevel. In GPT-2's layout
//                   (bytes first, merge i making id 256 + i) and nothing more, the bpe, byte
//                   or gpt2 kind as before (added tokens not matched in a text); any other
//                   layout, or with normalizer NFC, ignore_merges, a TemplateProcessing
//                   post-processor (alone or in a Sequence with ByteLevel) or SmolLM2's
//                   Sequence [Digits (individual_digits), ByteLevel with its regex]: the hf
//                   kind (data/hf_bpe.h: Llama 3's, Qwen2/3's, SmolLM2's files), whose added
//                   tokens are matched in the text as tokenizers matches them
//   char            model BPE without merges over single characters in code point order,
//                   no pre_tokenizer, decoder Fuse
// Anything else (another normalizer, model or pre-tokenizer, BPE dropout, an added token's
// lstrip, rstrip or single_word, byte_fallback, ...) is an InteropError naming the file and
// the key, as is hostile
// input: the file is read as it streams (json_stream.h), at most kMaxHfTokenizerJsonBytes,
// no string over data::kMaxSplitPatternBytes, at most 2^20 + 1024 tokens and 2^20 - 256
// merges counted before they are stored; the vocabulary is then checked as GPT-2's files
// are (data::tokenizer_from_byte_level).
#include <cstdint>
#include <string>
#include <vector>

#include "io/checkpoint.h"

namespace interop {

// GPT-2's is 1.4 MB; the largest in use (200k tokens) are under 30 MB.
inline constexpr uint64_t kMaxHfTokenizerJsonBytes = uint64_t{64} << 20;

// The tokenizer of a tokenizer.json as a checkpoint's section; what the file states that
// the section cannot keep (a char tokenizer's unk_token, truncation, padding) goes to notes.
io::TokenizerSection read_hf_tokenizer_json(const std::string& path,
                                            std::vector<std::string>* notes = nullptr);
// The same from bytes already open (what the fuzz target drives).
class InputBytes;
io::TokenizerSection read_hf_tokenizer_json(const InputBytes& in,
                                            std::vector<std::string>* notes = nullptr);

}  // namespace interop
