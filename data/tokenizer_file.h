#pragma once
// A tokenizer as a small JSON file (a prepared folder's tokenizer.json), read as hostile
// input: every key checked, nothing unknown accepted, the vocabulary or merges validated
// by the tokenizer's own constructor. Saving and reading give the same tokenizer, and
// saving it again gives the same bytes.
//
//   {"format": "attograd-tokenizer", "format_version": 1, "type": "char",
//    "code_points": [10, 32, 33, ...]}                   strictly ascending, id = rank
//   {"format": "attograd-tokenizer", "format_version": 1, "type": "byte",
//    "special_tokens": ["<|endoftext|>"]}                 id 256; a file without the key
//                                                          (written before) has 256 ids
//   {"format": "attograd-tokenizer", "format_version": 1, "type": "bpe",
//    "split_pattern": "...", "merges": [[104, 101], ...],  merge i makes token 256 + i
//    "special_tokens": ["<|endoftext|>"]}                 id 256 + M, when reserved
//   {"format": "attograd-tokenizer", "format_version": 1, "type": "gpt2",
//    "split_pattern": "...", "byte_order": [33, 34, ...],   the byte of each of ids 0-255
//    "merges": [[220, 83], ...], "special_tokens": ["<|endoftext|>"]}  ids 256 + M onwards
//
//   std::string bytes = data::tokenizer_file_bytes(tokenizer);
//   std::unique_ptr<data::Tokenizer> same = data::read_tokenizer_file("run/tokenizer.json");
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "data/tokenizer.h"

namespace data {

inline constexpr std::string_view kTokenizerFileFormat = "attograd-tokenizer";
inline constexpr uint64_t kTokenizerFileVersion = 1;
// The largest bpe vocabulary a file (or a prepare) may have: 2^20 ids, four times the
// largest vocabularies in use, so a hostile file cannot ask for unbounded memory.
inline constexpr int64_t kMaxBpeVocabSize = int64_t{1} << 20;
inline constexpr size_t kMaxSplitPatternBytes = size_t{1} << 16;
// No valid tokenizer file comes near this (every code point: 11 MB; 2^20 ids: 26 MB).
// Reading one costs the file's bytes and 4 bytes a number, never a JSON value per number.
inline constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{32} << 20;

// The file's bytes for a char, byte, bpe or gpt2 tokenizer (std::invalid_argument for another).
std::string tokenizer_file_bytes(const Tokenizer& tokenizer);

// Rebuilds the tokenizer from a file's bytes; `name` names the file in messages. Anything
// wrong is a DataError "NAME: ..." saying what and where ("'merges'[12]: ...").
std::unique_ptr<Tokenizer> parse_tokenizer_file(std::string_view bytes, const std::string& name);
// The file at path (a regular file of at most kMaxTokenizerFileBytes).
std::unique_ptr<Tokenizer> read_tokenizer_file(const std::string& path);

}  // namespace data
