// prepare(): text files to a prepared folder in at most three streamed passes (prepared.h).
#include <fmt/format.h>

#include "base/utf8.h"
#include "data/identity.h"
#include "data/prepare_passes.h"
#include "data/strict_json.h"
#include "data/tokenizer_file.h"

namespace data {

namespace {

using detail::Kind;
using detail::OutputFolder;
using detail::Progress;
using detail::Source;
using detail::TempFile;

// How a kind of tokenizer encodes a corpus: gpt2 as bpe.
Kind encoding_of(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::chars: return Kind::kChar;
    case TokenizerKind::bytes: return Kind::kByte;
    case TokenizerKind::bpe:
    case TokenizerKind::gpt2:
    case TokenizerKind::hf: return Kind::kBpe;
    case TokenizerKind::none: break;
  }
  throw std::invalid_argument(fmt::format("prepare: a '{}' tokenizer cannot prepare text", kind));
}

// A tokenizer given: encoded as its type's own is (gpt2 as bpe), nothing learned.
Kind existing_kind(const PrepareOptions& o) {
  const TokenizerKind kind = o.existing->kind();
  if (o.tokenizer != kind || o.vocab_size != 0)
    throw std::invalid_argument(
        fmt::format("prepare: with a tokenizer given, tokenizer must be its type ({}) and "
                    "vocab_size 0, not '{}' and {}",
                    kind, o.tokenizer, o.vocab_size));
  if (const auto* c = dynamic_cast<const CharTokenizer*>(o.existing.get());
      c && c->has_replacement())
    throw std::invalid_argument("prepare: a char tokenizer that replaces unknown characters");
  return encoding_of(kind);
}

Kind check_options(const PrepareOptions& o) {
  if (o.sources.empty()) throw std::invalid_argument("prepare: no source files given");
  if (o.out_dir.empty()) throw std::invalid_argument("prepare: no output folder given");
  if (!(o.val_fraction >= 0 && o.val_fraction < 1))
    throw std::invalid_argument(
        fmt::format("prepare: val_fraction must be in [0, 1), got {}", o.val_fraction));
  if (o.chunk_bytes < 16 || o.chunk_bytes > (size_t{1} << 30))
    throw std::invalid_argument(
        fmt::format("prepare: chunk_bytes must be in [16, 2^30], got {}", o.chunk_bytes));
  if (o.existing) return existing_kind(o);
  if (o.tokenizer == TokenizerKind::gpt2 || o.tokenizer == TokenizerKind::none)
    throw std::invalid_argument(
        fmt::format("prepare: the tokenizer must be char, byte or bpe, not '{}'", o.tokenizer));
  const Kind kind = encoding_of(o.tokenizer);
  if (kind == Kind::kBpe && (o.vocab_size < 257 || o.vocab_size > kMaxBpeVocabSize))
    throw std::invalid_argument(fmt::format(
        "prepare: a bpe vocabulary has 257 to {} tokens (the 256 bytes, merges, <|endoftext|>), "
        "got {}",
        kMaxBpeVocabSize, o.vocab_size));
  if (o.split_pattern.size() > kMaxSplitPatternBytes)
    throw std::invalid_argument(fmt::format("prepare: the split pattern has {} bytes; at most {}",
                                            o.split_pattern.size(), kMaxSplitPatternBytes));
  if (kind != Kind::kBpe && o.vocab_size != 0)
    throw std::invalid_argument(fmt::format(
        "prepare: vocab_size is for bpe only ({} has {}), got {}", o.tokenizer,
        kind == Kind::kByte ? "257 ids" : "one id per distinct character", o.vocab_size));
  return kind;
}

// The folder may be replaced only when it is new, empty, or a prepared folder, and when
// none of its files is one of the sources (renaming over it would destroy an input).
void check_replaceable(OutputFolder& folder, const std::vector<Source>& sources) {
  for (const Source& s : sources)
    if (const std::string name = folder.entry_of(s.stamp.dev, s.stamp.ino); !name.empty())
      throw DataError(
          fmt::format("{}: is {}, which this prepare replaces; refusing to overwrite "
                      "an input",
                      s.path, folder.display(name)));
  if (folder.empty()) return;
  const std::string meta = folder.display(kMetaFile);
  const auto refuse = [&](const std::string& why) {
    throw DataError(
        fmt::format("{}: {}; refusing to replace what may be someone else's files "
                    "(remove them, or choose a new or empty folder)",
                    folder.path(), why));
  };
  if (!folder.has(kMetaFile))
    refuse(fmt::format("it has no {}, so it is not a prepared folder", kMetaFile));
  const std::string bytes = detail::InputFile(kMetaFile, meta, folder.fd()).read_all(kMaxMetaBytes);
  nlohmann::json j;
  try {
    j = detail::parse_strict_json(bytes, meta);
  } catch (const DataError&) {
  }
  if (!j.is_object() || !j.contains("format") || j["format"] != kPreparedFormat)
    refuse(fmt::format("{} is not the metadata of a prepared folder", meta));
}

// meta.json lists every source: so many that it would pass the reader's limit are refused
// before any work (each entry takes its path and about 200 bytes).
void check_meta_size(const std::vector<Source>& sources) {
  uint64_t bytes = 4096;
  for (const Source& s : sources) bytes += 200 + 6 * s.path.size();  // \u escapes at worst
  if (bytes > kMaxMetaBytes)
    throw DataError(
        fmt::format("{} source files are more than one prepared folder can list "
                    "(its meta.json may have {} bytes); join them into fewer files",
                    sources.size(), kMaxMetaBytes));
}

// Pass 1 of char and bpe: every source is valid UTF-8 by itself; the characters of each
// (and, into `collector`, which ones). Returns the characters of the corpus.
uint64_t check_pass(std::vector<Source>& sources, detail::CharCollector* collector,
                    size_t chunk_bytes, Progress& progress) {
  uint64_t chars = 0, before = 0;
  detail::for_each_chunk(
      sources, chunk_bytes, progress,
      [&](Source&, std::string_view chunk, uint64_t offset) {
        if (collector) {
          collector->add(chunk, offset);
          chars = collector->chars();
        } else {
          chars += detail::count_utf8(chunk, offset);
        }
        return true;
      },
      [&](Source& s) { s.chars = chars - before, before = chars; });
  return chars;
}

// Pass 2 of bpe: merges learned from the first train_chars characters of the corpus, one
// text (as prepare_text sees the concatenation).
BpeTokenizer learn_pass(std::vector<Source>& sources, uint64_t train_chars, const PrepareOptions& o,
                        Progress& progress) {
  BpeTrainer trainer(o.split_pattern);
  uint64_t chars = 0;
  detail::for_each_chunk(
      sources, o.chunk_bytes, progress,
      [&](Source&, std::string_view chunk, uint64_t offset) {
        const uint64_t n = detail::count_utf8(chunk, offset);  // the file could have changed
        const uint64_t take = std::min(n, train_chars - chars);
        trainer.add_text(take == n ? chunk : chunk.substr(0, detail::skip_chars(chunk, take)));
        chars += take;
        return chars < train_chars;
      },
      [&](Source&) { trainer.end_text(); });  // a document: no piece crosses its end
  return trainer.train(o.vocab_size, EndOfText::reserved);
}

// The passes before encoding: the tokenizer, and the units the split counts.
std::shared_ptr<const Tokenizer> make_tokenizer(Kind kind, std::vector<Source>& sources,
                                                const PrepareOptions& o, Progress& progress,
                                                uint64_t& units) {
  if (kind == Kind::kByte) {
    units = 0;
    for (const Source& s : sources) units += s.stamp.size;
    if (o.existing) return o.existing;
    return std::make_unique<ByteTokenizer>(EndOfText::reserved);
  }
  progress.start(1, "checking");
  if (o.existing) {
    units = check_pass(sources, nullptr, o.chunk_bytes, progress);
    return o.existing;
  }
  if (kind == Kind::kChar) {
    auto collector = std::make_unique<detail::CharCollector>();
    units = check_pass(sources, collector.get(), o.chunk_bytes, progress);
    return std::make_unique<CharTokenizer>(collector->distinct_code_points());
  }
  units = check_pass(sources, nullptr, o.chunk_bytes, progress);
  progress.start(2, "learning merges");
  const uint64_t train_chars = units - split_val_units(units, o.val_fraction);
  return std::make_unique<BpeTokenizer>(learn_pass(sources, train_chars, o, progress));
}

PreparedMeta build_meta(const PrepareOptions& o, const std::vector<Source>& sources,
                        const Tokenizer& tok, const detail::EncodePass& enc, uint64_t units) {
  PreparedMeta m;
  m.tokenizer_kind = tok.kind();
  m.vocab_size = tok.vocab_size();
  m.end_of_text = tok.reserved_end_of_text();
  m.dtype = dtype_for_vocab(m.vocab_size);
  m.val_fraction = o.val_fraction;
  for (const Source& s : sources) {
    m.sources.push_back({s.path, s.stamp.size, s.chars, s.sha256});
    m.total_bytes += s.stamp.size, m.total_chars += s.chars;
  }
  m.split_unit = split_unit_of(m.tokenizer_kind);
  m.split_units = units, m.val_units = split_val_units(units, o.val_fraction);
  m.split_byte = enc.split_byte(), m.split_char = enc.split_char();
  m.train = enc.part(false, m.split_byte);
  m.val = enc.part(true, m.total_bytes - m.split_byte);
  return m;
}

// Everything is written to temporary files first; the old meta.json goes before any file is
// renamed and the new one comes last, so the folder never holds a meta.json with files
// that do not belong to it.
void finish_folder(OutputFolder& folder, detail::EncodePass& enc,
                   const std::string& tokenizer_bytes, const std::string& meta_bytes, bool sync) {
  TempFile tokenizer(folder, kTokenizerFile);
  tokenizer.write(tokenizer_bytes.data(), tokenizer_bytes.size());
  tokenizer.close(sync);
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

PrepareResult prepare(const PrepareOptions& o) {
  const Kind kind = check_options(o);
  std::vector<Source> sources = detail::open_sources(o.sources, o.recursive);
  check_meta_size(sources);
  OutputFolder folder(o.out_dir, {kMetaFile, kTokenizerFile, kTrainFile, kValFile});
  check_replaceable(folder, sources);
  folder.remove_leftovers();
  uint64_t total = 0;
  for (const Source& s : sources) total += s.stamp.size;
  const int passes = kind == Kind::kByte ? 1 : kind == Kind::kChar || o.existing ? 2 : 3;
  Progress progress(o.progress, passes, total);
  uint64_t units = 0;
  const std::shared_ptr<const Tokenizer> tok = make_tokenizer(kind, sources, o, progress, units);
  progress.start(passes, "encoding");
  const uint64_t train_units = units - split_val_units(units, o.val_fraction);
  detail::EncodePass enc(kind, *tok, train_units, folder);
  enc.run(sources, o.chunk_bytes, progress);
  enc.close(o.sync);  // complete, and hashed for meta.json
  PreparedMeta meta = build_meta(o, sources, *tok, enc, units);
  const std::string tokenizer_bytes = tokenizer_file_bytes(*tok);
  meta.tokenizer_sha256 = text_identity(tokenizer_bytes).substr(7);
  const std::string meta_bytes = prepared_meta_bytes(meta);
  parse_prepared_meta(meta_bytes, folder.display(kMetaFile));  // what open_prepared checks
  finish_folder(folder, enc, tokenizer_bytes, meta_bytes, o.sync);
  std::string identity = prepared_identity(meta);
  return {std::move(meta), std::move(identity)};
}

PrepareResult prepare(const std::vector<std::string>& sources, TokenizerKind tokenizer,
                      int64_t vocab_size, double val_fraction, const std::string& out_dir,
                      PrepareCallback progress) {
  PrepareOptions o;
  o.sources = sources, o.tokenizer = tokenizer, o.vocab_size = vocab_size;
  o.val_fraction = val_fraction, o.out_dir = out_dir, o.progress = std::move(progress);
  return prepare(o);
}

}  // namespace data
