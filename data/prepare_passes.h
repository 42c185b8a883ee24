#pragma once
// The passes of prepare() over its sources (internal to the library): the sources and how
// they are read in chunks (prepare_sources.cpp), and the last pass, which encodes them
// into train.bin and val.bin (prepare_encode.cpp). prepare.cpp runs them.
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/bpe.h"
#include "data/data_error.h"
#include "data/posix_io.h"
#include "data/prepared.h"
#include "data/text_scan.h"

namespace data::detail {

enum class Kind { kChar, kByte, kBpe };

struct Source {
  std::string path;
  FileStamp stamp;     // when first opened: every pass must find the file so
  uint64_t chars = 0;  // as the first pass that decodes it counted them
  std::string sha256;  // of the bytes the last pass read
};

// The sources of a prepare, each opened once to check it is a regular file and not given
// twice. A DataError for a missing or unreadable file, or an empty corpus.
std::vector<Source> open_sources(const std::vector<std::string>& paths, bool recursive);

// A DataError: the source was replaced, edited or resized since the prepare began.
[[noreturn]] void source_changed(const Source& s, const std::string& what);

class Progress {
 public:
  Progress(const PrepareCallback& callback, int passes, uint64_t corpus_bytes);
  void start(int pass, std::string_view stage);
  void advance(uint64_t bytes);

 private:
  void report() const;
  const PrepareCallback& callback_;
  int passes_, pass_ = 0;
  uint64_t bytes_, done_ = 0;
  std::string_view stage_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// A source read in chunks that end between characters (the last: whatever is left). The
// file must still be the one open_sources() saw (its FileStamp), at the start and the end.
class ChunkReader {
 public:
  ChunkReader(const Source& source, size_t chunk_bytes);
  // The next chunk and its offset in the file; false at the end, after checking the file.
  bool next(std::string_view& chunk, uint64_t& offset);

 private:
  const Source& source_;
  InputFile file_;
  size_t chunk_;
  std::vector<char> buffer_;
  size_t held_ = 0, cut_ = 0;
  uint64_t offset_ = 0;
  bool eof_ = false;
};

// Runs on_chunk(source, chunk, offset in the file) for each chunk of each source until it
// returns false, and on_end(source) after each source read to its end. A
// std::invalid_argument from on_chunk (invalid UTF-8, an unknown character) becomes a
// DataError naming the source.
template <class OnChunk, class OnEnd>
void for_each_chunk(std::vector<Source>& sources, size_t chunk_bytes, Progress& progress,
                    OnChunk on_chunk, OnEnd on_end) {
  for (Source& s : sources) {
    ChunkReader reader(s, chunk_bytes);
    std::string_view chunk;
    uint64_t offset = 0;
    while (reader.next(chunk, offset)) {
      try {
        if (!on_chunk(s, chunk, offset)) return;
      } catch (const std::invalid_argument& e) {
        throw DataError(fmt::format("{}: {}", s.path, e.what()));
      }
      progress.advance(chunk.size());
    }
    on_end(s);
  }
}

// The last pass: encodes the corpus into train.bin and val.bin (temporary files until
// commit()), hashing each source. The first `train_units` units (characters for char and
// bpe, bytes for byte) are training text, the rest validation; bpe encodes the two parts
// as two texts, so no token crosses the split. A tokenizer's reserved <|endoftext|> follows
// each source, in the part its last unit went to (bpe: each source a text of its own).
class EncodePass {
 public:
  EncodePass(Kind kind, const Tokenizer& tokenizer, uint64_t train_units, OutputFolder& folder);
  void run(std::vector<Source>& sources, size_t chunk_bytes, Progress& progress);
  void close(bool sync) { train_.close(sync), val_.close(sync); }
  void commit() { train_.commit(), val_.commit(); }
  uint64_t tokens(bool val) const;
  // train.bin's (val false) or val.bin's counts and hashes, for meta.json; close() first.
  SplitPart part(bool val, uint64_t text_bytes) const;
  // Where validation starts: a byte offset in the corpus, and the characters before it.
  uint64_t split_byte() const { return split_byte_; }
  uint64_t split_char() const { return split_char_; }

 private:
  void encode(std::string_view chunk, uint64_t offset);
  void encode_slice(std::string_view slice, uint64_t offset);
  void encode_bpe(std::string_view chunk, uint64_t offset);
  void end_source(Source& s);
  void end_document();
  template <class T>
  void route(const T* ids, size_t n, std::string_view text);
  template <class T>
  void write(TempFile& file, const T* ids, size_t n);

  Kind kind_;
  TokenDtype dtype_;
  uint64_t train_units_;
  std::optional<int64_t> end_of_text_;  // after each source (a document), when reserved
  uint64_t documents_[2] = {0, 0};      // ended in train, in val
  std::optional<CharIds> char_ids_;
  std::unique_ptr<BpeStreamEncoder> bpe_;
  TempFile train_, val_;
  std::vector<uint16_t> ids16_;
  std::vector<uint32_t> ids32_;
  std::optional<Sha256> sha_;
  uint64_t units_ = 0, bytes_ = 0, chars_ = 0, source_chars_ = 0;  // before the current text
  bool split_found_ = false;
  uint64_t split_byte_ = 0, split_char_ = 0;
};

}  // namespace data::detail
