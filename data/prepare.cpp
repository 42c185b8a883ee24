// prepare(): text files to a prepared folder in at most three streamed passes (prepared.h).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "data/bpe.h"
#include "data/data_error.h"
#include "data/identity.h"
#include "data/posix_io.h"
#include "data/prepared.h"
#include "data/text_scan.h"
#include "data/tokenizer_file.h"

namespace data {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian: a big-endian host needs byte swaps when writing");

namespace {

using detail::InputFile;
using detail::OutputFolder;
using detail::TempFile;

enum class Kind { kChar, kByte, kBpe };

struct Source {
  std::string path;
  dev_t dev = 0;
  ino_t ino = 0;
  uint64_t bytes = 0, chars = 0;  // as the passes found them
  std::string sha256;
};

class Progress {
 public:
  Progress(const PrepareCallback& callback, int passes, uint64_t corpus_bytes)
      : callback_(callback), passes_(passes), bytes_(corpus_bytes) {}
  void start(int pass, std::string_view stage) {
    pass_ = pass, stage_ = stage, done_ = 0;
    report();
  }
  void advance(uint64_t bytes) {
    done_ = std::min(done_ + bytes, bytes_);
    report();
  }

 private:
  void report() const {
    if (!callback_) return;
    PrepareProgress p;
    p.pass = pass_, p.passes = passes_, p.stage = stage_;
    p.bytes_done = done_, p.bytes_total = bytes_;
    p.all_done = (pass_ - 1) * bytes_ + done_, p.all_total = passes_ * bytes_;
    callback_(p);
  }
  const PrepareCallback& callback_;
  int passes_, pass_ = 0;
  uint64_t bytes_, done_ = 0;
  std::string_view stage_;
};

// A source read in chunks that end between characters (the last one: whatever is left).
// The source must be the same file (device and inode) as when it was first opened.
class ChunkReader {
 public:
  ChunkReader(const Source& source, size_t chunk_bytes)
      : file_(source.path, source.path), chunk_(chunk_bytes), buffer_(chunk_bytes + 4) {
    if (file_.device() != source.dev || file_.inode() != source.ino)
      throw DataError(fmt::format("{}: the file was replaced while it was being prepared",
                                  source.path));
  }
  // The next chunk and its offset in the file; false at the end.
  bool next(std::string_view& chunk, uint64_t& offset) {
    const size_t carry = held_ - cut_;
    std::memmove(buffer_.data(), buffer_.data() + cut_, carry);
    offset_ += cut_;
    const size_t got = eof_ ? 0 : file_.read(buffer_.data() + carry, chunk_);
    eof_ = eof_ || got < chunk_;
    held_ = carry + got;
    if (held_ == 0) return false;
    const std::string_view bytes(buffer_.data(), held_);
    cut_ = eof_ ? held_ : detail::complete_prefix(bytes);
    chunk = bytes.substr(0, cut_), offset = offset_;
    return true;
  }
  uint64_t end_offset() const { return offset_ + cut_; }

 private:
  InputFile file_;
  size_t chunk_;
  std::vector<char> buffer_;
  size_t held_ = 0, cut_ = 0;
  uint64_t offset_ = 0;
  bool eof_ = false;
};

[[noreturn]] void changed(const Source& s, const std::string& what) {
  throw DataError(
      fmt::format("{}: the file changed while it was being prepared ({})", s.path, what));
}

// Runs on_chunk(source, chunk, offset in the file) for each chunk of each source, until it
// returns false, and on_end(source, bytes read) after each source. A std::invalid_argument
// from on_chunk (invalid UTF-8, an unknown character) becomes a DataError naming the source.
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
    on_end(s, reader.end_offset());
  }
}

// Pass 1 of char and bpe: every source is valid UTF-8 by itself; its bytes and characters;
// with `collect`, every distinct code point.
detail::Utf8Scan check_pass(std::vector<Source>& sources, bool collect, size_t chunk_bytes,
                            Progress& progress) {
  detail::Utf8Scan scan(collect);
  uint64_t before = 0;
  for_each_chunk(
      sources, chunk_bytes, progress,
      [&](Source&, std::string_view chunk, uint64_t offset) {
        detail::scan_utf8(chunk, offset, scan);
        return true;
      },
      [&](Source& s, uint64_t bytes) {
        s.bytes = bytes, s.chars = scan.chars - before;
        before = scan.chars;
      });
  return scan;
}

// Pass 2 of bpe: merges learned from the first train_chars characters of the corpus, one
// text (as the in-memory path sees the concatenation).
BpeTokenizer learn_pass(std::vector<Source>& sources, uint64_t train_chars,
                        const PrepareOptions& o, Progress& progress) {
  BpeTrainer trainer(o.split_pattern);
  detail::Utf8Scan scan(false);  // checked again: the offsets of a file that changed
  for_each_chunk(
      sources, o.chunk_bytes, progress,
      [&](Source&, std::string_view chunk, uint64_t offset) {
        const uint64_t before = scan.chars;
        if (before >= train_chars) return false;
        detail::scan_utf8(chunk, offset, scan);
        trainer.add_text(scan.chars <= train_chars
                             ? chunk
                             : chunk.substr(0, detail::skip_chars(chunk, train_chars - before)));
        return true;
      },
      [](Source&, uint64_t) {});
  return trainer.train(o.vocab_size);
}

// The last pass: encodes the corpus into train.bin and val.bin (temporary files until
// commit), hashing each source and checking it is what the earlier passes saw.
class EncodePass {
 public:
  EncodePass(Kind kind, const Tokenizer& tokenizer, TokenDtype dtype, uint64_t train_units,
             OutputFolder& folder, size_t chunk_bytes);
  void run(std::vector<Source>& sources, size_t chunk_bytes, Progress& progress);
  void close(bool sync) { train_.close(sync), val_.close(sync); }
  void commit() { train_.commit(), val_.commit(); }
  uint64_t tokens(bool val) const {
    return (val ? val_ : train_).bytes_written() / dtype_bytes(dtype_);
  }
  uint64_t split_byte() const { return split_byte_; }
  uint64_t split_char() const { return split_char_; }

 private:
  void encode(std::string_view chunk, uint64_t offset);
  void encode_bpe(std::string_view chunk);
  void end_source(Source& s, uint64_t bytes);
  template <class T>
  void route(const T* ids, size_t n, std::string_view chunk);
  template <class T>
  void write(TempFile& file, const T* ids, size_t n);

  Kind kind_;
  TokenDtype dtype_;
  uint64_t train_units_;
  std::optional<detail::CharIds> char_ids_;
  std::unique_ptr<BpeStreamEncoder> bpe_;
  TempFile train_, val_;
  detail::Utf8Scan scan_{false};
  std::vector<uint16_t> ids16_;
  std::vector<uint32_t> ids32_;
  std::optional<detail::Sha256> sha_;
  uint64_t units_ = 0, bytes_ = 0, chars_ = 0, file_chars_ = 0;  // before the chunk
  bool split_found_ = false;
  uint64_t split_byte_ = 0, split_char_ = 0;
};

EncodePass::EncodePass(Kind kind, const Tokenizer& tokenizer, TokenDtype dtype,
                       uint64_t train_units, OutputFolder& folder, size_t chunk_bytes)
    : kind_(kind),
      dtype_(dtype),
      train_units_(train_units),
      train_(folder, kTrainFile),
      val_(folder, kValFile) {
  if (kind == Kind::kChar)
    char_ids_.emplace(dynamic_cast<const CharTokenizer&>(tokenizer).code_points());
  if (kind == Kind::kBpe)
    bpe_ = std::make_unique<BpeStreamEncoder>(dynamic_cast<const BpeTokenizer&>(tokenizer));
  if (kind != Kind::kBpe && dtype == TokenDtype::kUint16) ids16_.resize(chunk_bytes + 4);
  if (kind == Kind::kChar && dtype == TokenDtype::kUint32) ids32_.resize(chunk_bytes + 4);
}

void EncodePass::run(std::vector<Source>& sources, size_t chunk_bytes, Progress& progress) {
  for_each_chunk(
      sources, chunk_bytes, progress,
      [&](Source&, std::string_view chunk, uint64_t offset) {
        if (!sha_) sha_.emplace();
        sha_->update(chunk);
        encode(chunk, offset);
        return true;
      },
      [&](Source& s, uint64_t bytes) { end_source(s, bytes); });
  if (kind_ == Kind::kBpe) {
    ids32_.clear();
    bpe_->finish(ids32_);
    write(split_found_ ? val_ : train_, ids32_.data(), ids32_.size());
  }
  if (!split_found_) split_byte_ = bytes_, split_char_ = chars_;  // validation is empty
}

void EncodePass::end_source(Source& s, uint64_t bytes) {
  if (!sha_) sha_.emplace();  // an empty file
  s.sha256 = sha_->hex();
  sha_.reset();
  const uint64_t chars = chars_ - file_chars_;
  file_chars_ = chars_;
  if (bytes != s.bytes) changed(s, fmt::format("{} bytes, {} before", bytes, s.bytes));
  if (kind_ == Kind::kByte) s.chars = chars;  // the one pass: no count before
  else if (chars != s.chars) changed(s, fmt::format("{} characters, {} before", chars, s.chars));
}

void EncodePass::encode(std::string_view chunk, uint64_t offset) {
  if (kind_ == Kind::kChar) {
    const size_t n = dtype_ == TokenDtype::kUint16
                         ? char_ids_->encode(chunk, offset, ids16_.data())
                         : char_ids_->encode(chunk, offset, ids32_.data());
    scan_.chars += n;
    if (dtype_ == TokenDtype::kUint16) route(ids16_.data(), n, chunk);
    else route(ids32_.data(), n, chunk);
  } else {
    detail::scan_utf8(chunk, offset, scan_);
    if (kind_ == Kind::kBpe) {
      encode_bpe(chunk);
    } else {
      const auto* p = reinterpret_cast<const unsigned char*>(chunk.data());
      for (size_t i = 0; i < chunk.size(); ++i) ids16_[i] = p[i];
      route(ids16_.data(), chunk.size(), chunk);
    }
  }
  bytes_ += chunk.size();
  chars_ = scan_.chars;
}

// One id per unit (char: characters, byte: bytes): the ids before the split go to
// train.bin, the rest to val.bin.
template <class T>
void EncodePass::route(const T* ids, size_t n, std::string_view chunk) {
  size_t k = units_ + n <= train_units_ ? n : 0;
  if (!split_found_ && units_ <= train_units_ && train_units_ < units_ + n) {
    k = train_units_ - units_;
    split_found_ = true;
    const bool chars = kind_ == Kind::kChar;
    split_byte_ = bytes_ + (chars ? detail::skip_chars(chunk, k) : k);
    split_char_ = chars_ + (chars ? k : detail::count_chars(chunk.substr(0, k)));
  }
  write(train_, ids, k);
  write(val_, ids + k, n - k);
  units_ += n;
}

// Pieces of BPE never cross the split: the training text ends there (finish) and the
// validation text starts as a new text.
void EncodePass::encode_bpe(std::string_view chunk) {
  ids32_.clear();
  if (split_found_ || scan_.chars < train_units_) {
    bpe_->add(chunk, ids32_);
    write(split_found_ ? val_ : train_, ids32_.data(), ids32_.size());
    return;
  }
  const size_t cut = detail::skip_chars(chunk, train_units_ - chars_);
  bpe_->add(chunk.substr(0, cut), ids32_);
  bpe_->finish(ids32_);
  write(train_, ids32_.data(), ids32_.size());
  split_found_ = true, split_byte_ = bytes_ + cut, split_char_ = train_units_;
  ids32_.clear();
  bpe_->add(chunk.substr(cut), ids32_);
  write(val_, ids32_.data(), ids32_.size());
}

template <class T>
void EncodePass::write(TempFile& file, const T* ids, size_t n) {
  if (n == 0) return;
  if (sizeof(T) == 2 || dtype_ == TokenDtype::kUint32) return file.write(ids, n * sizeof(T));
  if (ids16_.size() < n) ids16_.resize(n);
  for (size_t i = 0; i < n; ++i) ids16_[i] = static_cast<uint16_t>(ids[i]);
  file.write(ids16_.data(), n * 2);
}

}  // namespace

namespace {

Kind check_options(const PrepareOptions& o) {
  if (o.sources.empty()) throw std::invalid_argument("prepare: no source files given");
  if (o.out_dir.empty()) throw std::invalid_argument("prepare: no output folder given");
  if (!(o.val_fraction >= 0 && o.val_fraction < 1))
    throw std::invalid_argument(
        fmt::format("prepare: val_fraction must be in [0, 1), got {}", o.val_fraction));
  if (o.chunk_bytes < 16 || o.chunk_bytes > (size_t{1} << 30))
    throw std::invalid_argument(
        fmt::format("prepare: chunk_bytes must be in [16, 2^30], got {}", o.chunk_bytes));
  if (o.tokenizer != "char" && o.tokenizer != "byte" && o.tokenizer != "bpe")
    throw std::invalid_argument(
        fmt::format("prepare: the tokenizer must be char, byte or bpe, not '{}'",
                    replace_invalid_utf8(o.tokenizer)));
  const Kind kind = o.tokenizer == "char"   ? Kind::kChar
                    : o.tokenizer == "byte" ? Kind::kByte
                                            : Kind::kBpe;
  if (kind == Kind::kBpe && (o.vocab_size < 256 || o.vocab_size > INT32_MAX))
    throw std::invalid_argument(fmt::format(
        "prepare: a bpe vocabulary has 256 to 2^31 - 1 tokens, got {}", o.vocab_size));
  if (kind != Kind::kBpe && o.vocab_size != 0)
    throw std::invalid_argument(fmt::format(
        "prepare: vocab_size is for bpe only ({} has {}), got {}", o.tokenizer,
        kind == Kind::kByte ? "256 ids" : "one id per distinct character", o.vocab_size));
  return kind;
}

std::vector<std::string> txt_files_under(const std::string& dir, bool recursive) {
  namespace fs = std::filesystem;
  std::vector<std::string> found;
  std::error_code ec;
  const auto visit = [&](const fs::directory_entry& e) {
    std::error_code ignored;  // a dangling link: kept, and refused by name when opened
    if (e.path().extension() == ".txt" && !e.is_directory(ignored)) found.push_back(e.path());
  };
  if (recursive) {
    fs::recursive_directory_iterator it(dir, ec), end;
    for (; !ec && it != end; it.increment(ec)) visit(*it);
  } else {
    fs::directory_iterator it(dir, ec), end;
    for (; !ec && it != end; it.increment(ec)) visit(*it);
  }
  if (ec) throw DataError(fmt::format("{}: cannot list the folder: {}", dir, ec.message()));
  std::sort(found.begin(), found.end());
  return found;
}

// Opens each source once to check it (a regular file, not given twice) and note its size.
std::vector<Source> open_sources(const PrepareOptions& o) {
  std::vector<Source> sources;
  for (const std::string& path : list_sources(o.sources, o.recursive)) {
    const InputFile file(path, path);
    for (const Source& s : sources)
      if (s.dev == file.device() && s.ino == file.inode())
        throw DataError(fmt::format("{}: the same file as {}, given twice", path, s.path));
    sources.push_back({path, file.device(), file.inode(), file.size(), 0, ""});
  }
  return sources;
}

// A source that is one of the files the prepare replaces would be destroyed by it.
void refuse_sources_in(const OutputFolder& folder, const std::vector<Source>& sources) {
  for (const Source& s : sources)
    if (const std::string name = folder.entry_of(s.dev, s.ino); !name.empty())
      throw DataError(fmt::format("{}: is {}, which this prepare replaces; refusing to overwrite "
                                  "an input",
                                  s.path, folder.display(name)));
}

PreparedMeta build_meta(const PrepareOptions& o, const std::vector<Source>& sources,
                        const Tokenizer& tok, const EncodePass& enc, uint64_t units,
                        uint64_t val_units) {
  PreparedMeta m;
  m.tokenizer_type = tok.type();
  m.vocab_size = tok.vocab_size();
  m.dtype = dtype_for_vocab(m.vocab_size);
  m.val_fraction = o.val_fraction;
  for (const Source& s : sources) {
    m.sources.push_back({s.path, s.bytes, s.chars, s.sha256});
    m.total_bytes += s.bytes, m.total_chars += s.chars;
  }
  m.split_unit = m.tokenizer_type == "byte" ? "byte" : "char";
  m.split_units = units, m.val_units = val_units;
  m.split_byte = enc.split_byte(), m.split_char = enc.split_char();
  m.train = {enc.tokens(false), m.split_byte};
  m.val = {enc.tokens(true), m.total_bytes - m.split_byte};
  return m;
}

// Everything is written to temporary files first; the old meta.json goes before any file is
// renamed and the new one comes last, so the folder never holds a meta.json with files
// that do not belong to it.
void finish_folder(OutputFolder& folder, EncodePass& enc, const std::string& tokenizer_bytes,
                   const std::string& meta_bytes, bool sync) {
  TempFile tokenizer(folder, kTokenizerFile);
  tokenizer.write(tokenizer_bytes.data(), tokenizer_bytes.size());
  tokenizer.close(sync);
  enc.close(sync);
  TempFile meta(folder, kMetaFile);
  meta.write(meta_bytes.data(), meta_bytes.size());
  meta.close(sync);
  folder.remove(kMetaFile);
  if (sync) folder.sync();
  tokenizer.commit();
  enc.commit();
  meta.commit();
  if (sync) folder.sync();
}

}  // namespace

std::vector<std::string> list_sources(const std::vector<std::string>& paths, bool recursive) {
  std::vector<std::string> out;
  for (const std::string& path : paths) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec) throw DataError(fmt::format("{}: cannot read: {}", path, ec.message()));
    if (!std::filesystem::is_directory(status)) {
      out.push_back(path);
      continue;
    }
    std::vector<std::string> found = txt_files_under(path, recursive);
    if (found.empty())
      throw DataError(fmt::format("{}: the folder has no *.txt files{}", path,
                                  recursive ? ", in it or below" : ""));
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

PrepareResult prepare(const PrepareOptions& o) {
  const Kind kind = check_options(o);
  std::vector<Source> sources = open_sources(o);
  uint64_t total = 0;
  for (const Source& s : sources) total += s.bytes;
  if (total == 0) throw DataError(fmt::format("the corpus ({} files) is empty", sources.size()));
  OutputFolder folder(o.out_dir, {kMetaFile, kTokenizerFile, kTrainFile, kValFile});
  refuse_sources_in(folder, sources);
  const int passes = kind == Kind::kByte ? 1 : kind == Kind::kChar ? 2 : 3;
  Progress progress(o.progress, passes, total);
  std::unique_ptr<Tokenizer> tok = std::make_unique<ByteTokenizer>();
  uint64_t units = total;
  if (kind != Kind::kByte) {
    progress.start(1, "checking");
    const detail::Utf8Scan scan = check_pass(sources, kind == Kind::kChar, o.chunk_bytes, progress);
    units = scan.chars;
    if (kind == Kind::kChar) tok = std::make_unique<CharTokenizer>(scan.distinct_code_points());
  }
  const auto val_units = static_cast<uint64_t>(std::floor(static_cast<size_t>(units) * o.val_fraction));
  if (kind == Kind::kBpe) {
    progress.start(2, "learning merges");
    tok = std::make_unique<BpeTokenizer>(learn_pass(sources, units - val_units, o, progress));
  }
  progress.start(passes, "encoding");
  const TokenDtype dtype = dtype_for_vocab(tok->vocab_size());
  EncodePass enc(kind, *tok, dtype, units - val_units, folder, o.chunk_bytes);
  enc.run(sources, o.chunk_bytes, progress);
  PreparedMeta meta = build_meta(o, sources, *tok, enc, units, val_units);
  const std::string tokenizer_bytes = tokenizer_file_bytes(*tok);
  meta.tokenizer_sha256 = text_identity(tokenizer_bytes).substr(7);
  const std::string meta_bytes = prepared_meta_bytes(meta);
  parse_prepared_meta(meta_bytes, folder.display(kMetaFile));  // what open_prepared will check
  finish_folder(folder, enc, tokenizer_bytes, meta_bytes, o.sync);
  return {std::move(meta), text_identity(meta_bytes)};
}

PrepareResult prepare(const std::vector<std::string>& sources, const std::string& tokenizer,
                      int64_t vocab_size, double val_fraction, const std::string& out_dir,
                      PrepareCallback progress) {
  PrepareOptions o;
  o.sources = sources, o.tokenizer = tokenizer, o.vocab_size = vocab_size;
  o.val_fraction = val_fraction, o.out_dir = out_dir, o.progress = std::move(progress);
  return prepare(o);
}

}  // namespace data
