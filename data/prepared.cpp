// Using prepared data: open_prepared() for a folder, prepare_text() for a text in memory.
#include <fmt/format.h>
#include <sys/stat.h>

#include <cmath>

#include "data/bpe.h"
#include "data/data_error.h"
#include "data/dataset.h"
#include "data/identity.h"
#include "data/posix_io.h"
#include "data/prepared.h"
#include "data/text_scan.h"
#include "data/tokenizer_file.h"

namespace data {

namespace {

std::string read_small(const std::string& path, uint64_t max_bytes) {
  detail::InputFile file(path, path);
  return file.read_all(max_bytes);
}

// The tokenizer of a folder must be the file its meta.json was written with.
std::unique_ptr<Tokenizer> open_tokenizer(const std::string& path, const PreparedMeta& meta,
                                          const std::string& meta_path) {
  const std::string bytes = read_small(path, kMaxTokenizerFileBytes);
  const std::string sha = text_identity(bytes).substr(7);
  if (sha != meta.tokenizer_sha256)
    throw DataError(fmt::format("{}: its SHA-256 is {}, but {} records {}: the file was changed "
                                "or comes from another prepared folder",
                                path, sha, meta_path, meta.tokenizer_sha256));
  std::unique_ptr<Tokenizer> tok = parse_tokenizer_file(bytes, path);
  if (tok->type() != meta.tokenizer_type || tok->vocab_size() != meta.vocab_size)
    throw DataError(fmt::format("{}: a {} tokenizer of {} ids, but {} says {} of {}", path,
                                tok->type(), tok->vocab_size(), meta_path, meta.tokenizer_type,
                                meta.vocab_size));
  return tok;
}

TokenStore store_of(const std::vector<uint32_t>& ids, int64_t vocab, const std::string& name) {
  if (dtype_for_vocab(vocab) == TokenDtype::kUint32) return TokenStore(ids, vocab, name);
  return TokenStore(std::vector<uint16_t>(ids.begin(), ids.end()), vocab, name);
}

// bpe: the text is cut at the split character and each part encoded on its own.
void split_text_bpe(std::string_view text, const BpeTokenizer& tok, double val_fraction,
                    const std::string& name, PreparedData& d) {
  const uint64_t chars = detail::count_chars(text);
  const auto val = static_cast<uint64_t>(std::floor(static_cast<size_t>(chars) * val_fraction));
  const size_t cut = detail::skip_chars(text, chars - val);
  std::vector<uint32_t> ids;
  tok.encode_append(text.substr(0, cut), ids);
  d.train = store_of(ids, tok.vocab_size(), name + " (training part)");
  ids.clear();
  tok.encode_append(text.substr(cut), ids);
  d.val = store_of(ids, tok.vocab_size(), name + " (validation part)");
  d.train_text_bytes = cut, d.val_text_bytes = text.size() - cut;
}

// char and byte: the ids of the whole text, split as split_tokens splits them.
void split_ids(std::string_view text, const Tokenizer& tok, double val_fraction,
               const std::string& name, PreparedData& d) {
  Split split = split_tokens(tok.encode(std::string(text)), val_fraction);
  d.train_text_bytes = tok.type() == "char" ? detail::skip_chars(text, split.train.size())
                                            : split.train.size();
  d.val_text_bytes = text.size() - d.train_text_bytes;
  d.train = TokenStore::from_ids(split.train, tok.vocab_size(), name + " (training part)");
  std::vector<int64_t>().swap(split.train);
  d.val = TokenStore::from_ids(split.val, tok.vocab_size(), name + " (validation part)");
}

}  // namespace

PreparedData open_prepared(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  struct stat st {};
  if (stat(d.c_str(), &st) != 0)
    throw DataError(fmt::format("{}: cannot read: {}", d, detail::errno_text(errno)));
  if (!S_ISDIR(st.st_mode))
    throw DataError(fmt::format("{}: is {}, not a prepared folder", d, detail::file_kind(st.st_mode)));
  const std::string meta_path = d + "/" + kMetaFile;
  if (lstat(meta_path.c_str(), &st) != 0 && errno == ENOENT)
    throw DataError(fmt::format("{}: no {}: not a prepared folder, or its prepare did not finish "
                                "(prepare it again)",
                                d, kMetaFile));
  const std::string meta_bytes = read_small(meta_path, kMaxMetaBytes);
  PreparedData out;
  out.meta = parse_prepared_meta(meta_bytes, meta_path);
  const PreparedMeta& m = *out.meta;
  out.tokenizer = open_tokenizer(d + "/" + kTokenizerFile, m, meta_path);
  out.train = TokenStore::map_file(d + "/" + kTrainFile, m.dtype, m.vocab_size, m.train.tokens,
                                   TokenStore::Access::kRandom);
  out.val = TokenStore::map_file(d + "/" + kValFile, m.dtype, m.vocab_size, m.val.tokens,
                                 TokenStore::Access::kSequential);
  out.identity = text_identity(meta_bytes);
  out.train_text_bytes = m.train.text_bytes, out.val_text_bytes = m.val.text_bytes;
  return out;
}

PreparedData prepare_text(std::string_view text, std::unique_ptr<Tokenizer> tokenizer,
                          double val_fraction, const std::string& name) {
  if (!(val_fraction >= 0 && val_fraction < 1))
    throw std::invalid_argument(
        fmt::format("val_fraction must be in [0, 1), got {}", val_fraction));
  PreparedData d;
  try {
    check_utf8(text);
    if (const auto* bpe = dynamic_cast<const BpeTokenizer*>(tokenizer.get()))
      split_text_bpe(text, *bpe, val_fraction, name, d);
    else
      split_ids(text, *tokenizer, val_fraction, name, d);
  } catch (const std::invalid_argument& e) {  // bad UTF-8, a character the vocabulary lacks
    throw DataError(fmt::format("{}: {}", name, e.what()));
  }
  d.tokenizer = std::move(tokenizer);
  d.identity = text_identity(text);
  return d;
}

PreparedData prepare_text(std::string_view text, const std::string& tokenizer,
                          int64_t vocab_size, double val_fraction, const std::string& name) {
  std::unique_ptr<Tokenizer> tok;
  if (tokenizer == "byte" && vocab_size == 0) {
    tok = std::make_unique<ByteTokenizer>();
  } else if (tokenizer == "char" && vocab_size == 0) {
    detail::Utf8Scan scan(true);
    try {
      detail::scan_utf8(text, 0, scan);
    } catch (const std::invalid_argument& e) {
      throw DataError(fmt::format("{}: {}", name, e.what()));
    }
    tok = std::make_unique<CharTokenizer>(scan.distinct_code_points());
  } else if (tokenizer == "bpe" && vocab_size >= 256 && vocab_size <= INT32_MAX) {
    if (!(val_fraction >= 0 && val_fraction < 1))
      throw std::invalid_argument(
          fmt::format("val_fraction must be in [0, 1), got {}", val_fraction));
    const uint64_t chars = detail::count_chars(text);
    const auto val = static_cast<uint64_t>(std::floor(static_cast<size_t>(chars) * val_fraction));
    try {
      tok = std::make_unique<BpeTokenizer>(
          BpeTokenizer::train(text.substr(0, detail::skip_chars(text, chars - val)), vocab_size));
    } catch (const std::invalid_argument& e) {
      throw DataError(fmt::format("{}: {}", name, e.what()));
    }
  } else {
    throw std::invalid_argument(fmt::format(
        "tokenizer '{}' with vocab_size {}: expected char or byte with 0, or bpe with 256 to "
        "2^31 - 1",
        replace_invalid_utf8(tokenizer), vocab_size));
  }
  return prepare_text(text, std::move(tok), val_fraction, name);
}

}  // namespace data
