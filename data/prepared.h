#pragma once
// Prepared corpora: text files tokenized once, in bounded memory, into a folder that
// training maps instead of reading text (docs/data.md).
//
//   data::PrepareOptions o;
//   o.sources = {"books/"};            // files, or folders: every *.txt below, recursively
//   o.tokenizer = "bpe";               // char | byte | bpe (or o.existing: gpt2, ...)
//   o.vocab_size = 4096;               // bpe only
//   o.out_dir = "books.prepared";
//   o.progress = [](const data::PrepareProgress& p) {   // a bar: p.all_done / p.all_total,
//     ... p.all_done / 1e6 / p.seconds ...               // MB/s over every pass
//   };
//   data::PrepareResult r = data::prepare(o);
//
//   data::PreparedData d = data::open_prepared("books.prepared");   // a millisecond, any size
//   data::BatchSampler sampler(&d.train, batch, T);                  // dataset.h
//   data::EvalWindows windows(d.val.size(), T);                      // dataset.h
//   checkpoint.data_identity = d.identity;
//
//   // a plain text file as --data: the same structure, in memory
//   data::PreparedData t = data::prepare_text(text, "char", 0, 0.1, "input.txt");
//
// The folder (format version 1):
//   tokenizer.json  the tokenizer (tokenizer_file.h)
//   train.bin       the training ids, little-endian uint16 when vocab_size <= 65536, else
//   val.bin         uint32; no header (the counts are in meta.json)
//   meta.json       format, format_version, tokenizer {type, vocab_size, sha256 of
//                   tokenizer.json, end_of_text (below)}, dtype, val_fraction, corpus {bytes,
//                   chars, sources
//                   [{path, bytes, chars, sha256}]}, split {unit, units, val_units,
//                   byte_offset, char_offset}, train and val {tokens, text_bytes,
//                   sha256 and sample_sha256 of the .bin file (below; absent in a folder
//                   prepared before they were recorded, which opens unchecked),
//                   documents (with end_of_text)}
// meta.json is written last, after the other files are complete and renamed into place
// (and the old meta.json removed first), so a folder with a meta.json is complete. A
// prepare holds the folder under an exclusive lock (flock) and open_prepared under a shared
// one, so neither sees the other's half-done work.
//
// The data's identity (what a checkpoint records as data_identity) is "sha256:" and the
// SHA-256 of meta.json's bytes with the source paths left out: preparing the same text the
// same way gives the same identity wherever the files lie (prepared_identity). It covers the
// token files through their hashes, which open_prepared checks: a token file edited since
// is refused, so `resume` never continues on it.
//
// The corpus is the concatenation of the sources in order (each must be valid UTF-8 by
// itself, for every tokenizer). Each source is a document: with a tokenizer that reserves
// <|endoftext|> (Tokenizer::reserved_end_of_text: attograd's byte and bpe), its id follows
// each document, as GPT-2's pipeline puts it, in the part holding the document's end, and
// bpe's pieces and merges never cross a document's end (meta.json's tokenizer.end_of_text
// and each part's `documents`; prepare_text's text is one document). Without one, nothing
// is added and bpe's pieces run on across sources. docs/model.md's split, the last val_fraction,
// counts characters for char and bpe and bytes for byte: val_units = floor(units * val_fraction),
// the last val_units are validation. For char and byte, train.bin and val.bin are exactly
// split_tokens(encode(corpus)) of dataset.h; for bpe the text is split at that character
// first, the merges are learned from the training text only, and each part is encoded on
// its own (no token crosses the boundary). The char vocabulary is every distinct code
// point of the whole corpus, as CharTokenizer::from_text gives it.
//
// Passes over the sources: byte 1 (check, hash, write); char 2 (check UTF-8 and collect
// the code points; encode, hash, write); bpe 3 (check and count; learn merges from the
// training text; encode, hash, write). The SHA-256 recorded is of the bytes the last pass
// encoded; a source that changes between or during the passes (its size, modification
// time or inode) is an error. Memory: chunk_bytes of text, 24 MB of write buffers (the
// token files are written by a background thread, with O_DIRECT where the file system
// allows), and for bpe the trainer's piece counts (bounded by the distinct pieces, not by
// the text's length). Measured: 50 MB peak RSS for char or byte on 1 GB.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/pretokenize.h"
#include "data/token_store.h"
#include "data/tokenizer.h"

namespace data {

inline constexpr std::string_view kPreparedFormat = "attograd-prepared";
inline constexpr uint64_t kPreparedVersion = 1;
inline constexpr uint64_t kMaxMetaBytes = uint64_t{16} << 20;
inline constexpr const char* kMetaFile = "meta.json";
inline constexpr const char* kTokenizerFile = "tokenizer.json";
inline constexpr const char* kTrainFile = "train.bin";
inline constexpr const char* kValFile = "val.bin";

// ---- metadata

struct SourceFile {
  std::string path;  // as given (invalid UTF-8 in it replaced by U+FFFD)
  uint64_t bytes = 0, chars = 0;
  std::string sha256;  // 64 lowercase hex digits
};

struct SplitPart {
  uint64_t tokens = 0;      // ids in the .bin file
  uint64_t text_bytes = 0;  // bytes of corpus text they encode (for bits per byte)
  // The .bin file's SHA-256, and token_file_sample_sha256's of it (64 lowercase hex digits
  // each); both empty for a folder prepared before they were recorded.
  std::string sha256, sample_sha256;
  // Documents (sources) whose end is in this part, each followed by PreparedMeta's
  // end_of_text (one of `tokens`); 0 without one.
  uint64_t documents = 0;
};

// What the split counts: a byte tokenizer's text is split by bytes, any other's by
// characters (meta.json's split.unit).
enum class SplitUnit { chars, bytes };
SplitUnit split_unit_of(TokenizerKind kind);

}  // namespace data

template <>
struct base::ChoiceNames<data::SplitUnit> {
  static constexpr const char* key = "split unit";
  static constexpr std::array<std::pair<data::SplitUnit, const char*>, 2> rows = {
      {{data::SplitUnit::chars, "char"}, {data::SplitUnit::bytes, "byte"}}};
};

namespace data {

struct PreparedMeta {
  TokenizerKind tokenizer_kind = TokenizerKind::chars;  // char, byte, bpe or gpt2
  std::string tokenizer_sha256;                         // of tokenizer.json's bytes
  int64_t vocab_size = 0;
  // The id after each document (a tokenizer's reserved <|endoftext|>: the last id); none in
  // a folder whose tokenizer reserves none, or one prepared before it was reserved.
  std::optional<int64_t> end_of_text;
  TokenDtype dtype = TokenDtype::kUint16;
  double val_fraction = 0;
  std::vector<SourceFile> sources;  // in corpus order
  uint64_t total_bytes = 0, total_chars = 0;
  SplitUnit split_unit = SplitUnit::chars;  // bytes for a byte tokenizer, else characters
  uint64_t split_units = 0, val_units = 0;
  // Where validation starts in the corpus: a byte offset, and the number of characters
  // that start before it.
  uint64_t split_byte = 0, split_char = 0;
  SplitPart train, val;
};

// meta.json's bytes (JSON, keys sorted, two-space indent, a final newline).
std::string prepared_meta_bytes(const PreparedMeta& meta);
// Reads and checks meta.json: every key and type, and that the numbers agree with each
// other (sums of the sources, the split rule, token counts against text, the dtype
// against the vocabulary). A DataError "NAME: ..." says what is wrong and where.
PreparedMeta parse_prepared_meta(std::string_view bytes, const std::string& name);

// ---- preparing

struct PrepareProgress {
  int pass = 0, passes = 0;                  // 1-based
  std::string_view stage;                    // "checking", "learning merges", "encoding"
  uint64_t bytes_done = 0, bytes_total = 0;  // of this pass (bytes_total: the corpus)
  uint64_t all_done = 0, all_total = 0;      // over all passes: one bar for the whole run
  double seconds = 0;                        // since prepare() began
};
// Called at the start of each pass and after each chunk. Throwing from it stops the
// prepare (the exception propagates; the folder is left as it was).
using PrepareCallback = std::function<void(const PrepareProgress&)>;

struct PrepareOptions {
  std::vector<std::string> sources;                // text files, or folders (their *.txt files)
  bool recursive = true;                           // into the folders' subfolders
  TokenizerKind tokenizer = TokenizerKind::chars;  // char, byte or bpe
  int64_t vocab_size = 0;                          // bpe: the vocabulary wanted (>= 256); else 0
  // A tokenizer made already (a checkpoint's, GPT-2's files), used as it is instead of one
  // made from the text: `tokenizer` must then be its type and vocab_size 0. A char
  // vocabulary must hold every character of the corpus (an unknown one is an error).
  std::shared_ptr<const Tokenizer> existing;
  std::string split_pattern = std::string(kGpt4SplitPattern);  // bpe
  double val_fraction = 0.1;                                   // in [0, 1)
  std::string out_dir;                    // new, empty, or a prepared folder to replace
  size_t chunk_bytes = size_t{16} << 20;  // text read at a time (memory: this + ~30 MB)
  bool sync = true;  // fsync the files before they are renamed (survives power loss)
  PrepareCallback progress;
};

struct PrepareResult {
  PreparedMeta meta;
  std::string identity;  // prepared_identity(meta): what a checkpoint records
};

// Writes options.out_dir. Refused (DataError, before any work): a source that is not a
// regular file or is given twice, a folder with no *.txt, an empty corpus, an out_dir
// that is a symbolic link or not a folder, one that holds anything but a prepared folder's
// files (or such files without a prepared folder's meta.json), one of whose files is a
// source, one another process is writing or opening; options out of range are
// std::invalid_argument. Invalid UTF-8 is a DataError naming the source and the byte offset
// in it. On any error the folder is left as it was (a new one stays, empty).
PrepareResult prepare(const PrepareOptions& options);
PrepareResult prepare(const std::vector<std::string>& sources, TokenizerKind tokenizer,
                      int64_t vocab_size, double val_fraction, const std::string& out_dir,
                      PrepareCallback progress = {});

// The files prepare() reads for these sources, in corpus order: a file as given; a folder's
// *.txt files (regular files or links to them; subfolders when recursive, never through a
// link), sorted by path. DataError for a missing path or a folder without *.txt.
std::vector<std::string> list_sources(const std::vector<std::string>& paths, bool recursive = true);

// docs/model.md's split rule, in split_tokens' arithmetic: floor(units * val_fraction).
uint64_t split_val_units(uint64_t units, double val_fraction);

// ---- the token files' hashes (meta.json's train.sha256, train.sample_sha256, and val's)

// prepare() records each .bin file's SHA-256 and a sampled SHA-256: over kSampleBlocks
// blocks of kSampleBlockBytes spread evenly from its first byte to its last (the whole
// file when it is no larger). open_prepared checks a file of at most kFullCheckBytes whole
// (64 MB: about 30 ms at SHA-256's 2 GB/s) and a larger one by its sample (4 MB read
// whatever its size, so a terabyte opens as fast as a gigabyte), unless asked for a full
// check (TokenCheck::kFull, `attograd inspect DIR`). Every id is still checked against the
// vocabulary as it is read.
inline constexpr uint32_t kSampleBlocks = 64;
inline constexpr uint32_t kSampleBlockBytes = 64 << 10;
inline constexpr uint64_t kFullCheckBytes = uint64_t{64} << 20;
enum class TokenCheck { kAuto, kFull };
std::string token_file_sha256(int fd, uint64_t size, const std::string& name);
std::string token_file_sample_sha256(int fd, uint64_t size, const std::string& name);
// A DataError naming the file when its hash is not the one `part` records (nothing to check
// when part has none: a folder prepared before they were recorded).
void check_token_file(int fd, uint64_t size, const SplitPart& part, const std::string& name,
                      const std::string& meta_path, TokenCheck check = TokenCheck::kAuto);

// ---- using prepared data

// Whether `path` is a folder holding a meta.json (a prepared folder, or a damaged one that
// open_prepared will explain): how a command tells `--data DIR` from a text file.
bool is_prepared_folder(const std::string& path);

struct PreparedData {
  std::unique_ptr<Tokenizer> tokenizer;
  TokenStore train, val;
  std::string identity;  // a folder: prepared_identity(meta); a text: text_identity(text)
  uint64_t train_text_bytes = 0, val_text_bytes = 0;  // for bits per byte
  std::optional<PreparedMeta> meta;                   // a folder's
};

// Opens a prepared folder: meta.json checked, tokenizer.json checked against it (its
// SHA-256, type, vocabulary size), train.bin and val.bin opened after their sizes are
// checked against the counts and their hashes (above), then opened (token_store.h). Every
// id is checked against the vocabulary as it is copied. Errors are DataErrors naming the file (a
// folder without meta.json: not prepared, or interrupted; a symbolic link or anything but a regular
// file where a file should be; a prepare writing the folder now).
PreparedData open_prepared(const std::string& dir,
                           TokenStore::FileAccess access = TokenStore::FileAccess::kAuto,
                           TokenCheck check = TokenCheck::kAuto);

// "sha256:" + SHA-256 of prepared_meta_bytes(meta) with every source path made "".
std::string prepared_identity(const PreparedMeta& meta);

// The bytes of text each id stands for (char: its code point's UTF-8 length; byte: 1;
// bpe: its token's bytes; a reserved <|endoftext|>: 0), for bits per byte over any stretch
// of ids.
std::vector<uint32_t> token_byte_lengths(const Tokenizer& tokenizer);

// The same structure from a text in memory, as prepare() would make it from a file holding
// that text (same tokenizer, split and ids; identity = text_identity(text), what
// checkpoints trained on a text file record). `name` names the text in messages. The
// stores are owned, not mapped: 2 or 4 bytes per id.
PreparedData prepare_text(std::string_view text, TokenizerKind tokenizer, int64_t vocab_size,
                          double val_fraction, const std::string& name = "text");
// With a tokenizer already made (a checkpoint's): bpe splits the text at the split
// character and encodes each part; any other splits the ids of the whole text.
PreparedData prepare_text(std::string_view text, std::unique_ptr<Tokenizer> tokenizer,
                          double val_fraction, const std::string& name = "text");

}  // namespace data
