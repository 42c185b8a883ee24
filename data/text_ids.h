#pragma once
// A text file's token ids, read and encoded a chunk at a time: what `eval` reads, so that
// a text of any length is evaluated in the memory of one chunk and its ids.
//
//   data::TextIds text("book.txt", tokenizer);   // a DataError if it is not a readable file
//   std::vector<int64_t> ids;
//   while (text.next(ids)) { ... use ids, clear what is used ... }
//
// The ids are exactly tokenizer.encode() of the whole file (BPE through its stream
// encoder, whose pieces never depend on where a chunk ends), then a tokenizer's reserved
// <|endoftext|> (the file is one document, as prepare and prepare_text take it). The text must be
// valid UTF-8 for every tokenizer; invalid UTF-8, a character outside a char vocabulary, or a file
// that changes while it is read is a DataError naming the file and the byte offset.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace data {

class TextIds {
 public:
  // The tokenizer must outlive the reader.
  TextIds(const std::string& path, const Tokenizer& tokenizer,
          size_t chunk_bytes = size_t{256} << 10);
  ~TextIds();
  TextIds(const TextIds&) = delete;
  TextIds& operator=(const TextIds&) = delete;

  // Appends the ids of the next chunk to out; false once the text has ended (then nothing
  // more is appended).
  bool next(std::vector<int64_t>& out);
  uint64_t bytes_read() const;

  struct State;  // text_ids.cpp

 private:
  std::unique_ptr<State> s_;
};

}  // namespace data
