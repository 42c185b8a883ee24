// Using prepared data: open_prepared() for a folder, prepare_text() for a text in memory.
#include "data/prepared.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <optional>

#include "base/utf8.h"
#include "data/bpe.h"
#include "data/data_error.h"
#include "data/dataset.h"
#include "data/gpt2_tokenizer.h"
#include "data/hf_bpe.h"
#include "data/identity.h"
#include "data/posix_io.h"
#include "data/text_scan.h"
#include "data/tokenizer_file.h"

namespace data {

namespace {

// The tokenizer of a folder must be the file its meta.json was written with.
std::unique_ptr<Tokenizer> open_tokenizer(const detail::InputFolder& folder,
                                          const PreparedMeta& meta, const std::string& meta_path) {
  const std::string path = folder.display(kTokenizerFile);
  const std::string bytes =
      detail::InputFile(kTokenizerFile, path, folder.fd()).read_all(kMaxTokenizerFileBytes);
  const std::string sha = text_identity(bytes).substr(7);
  if (sha != meta.tokenizer_sha256)
    throw DataError(
        fmt::format("{}: its SHA-256 is {}, but {} records {}: the file was changed "
                    "or comes from another prepared folder",
                    path, sha, meta_path, meta.tokenizer_sha256));
  std::unique_ptr<Tokenizer> tok = parse_tokenizer_file(bytes, path);
  if (tok->kind() != meta.tokenizer_kind || tok->vocab_size() != meta.vocab_size)
    throw DataError(fmt::format("{}: a {} tokenizer of {} ids, but {} says {} of {}", path,
                                tok->type(), tok->vocab_size(), meta_path, meta.tokenizer_kind,
                                meta.vocab_size));
  if (tok->reserved_end_of_text() != meta.end_of_text)
    throw DataError(
        fmt::format("{}: {} <|endoftext|>, but {} {}", path,
                    tok->reserved_end_of_text() ? "reserves" : "has no", meta_path,
                    meta.end_of_text ? "ends each document with one" : "records no end_of_text"));
  return tok;
}

TokenStore open_in(const detail::InputFolder& folder, const char* name, const PreparedMeta& m,
                   const SplitPart& part, TokenStore::FileAccess access, TokenCheck check) {
  const detail::InputFile file(name, folder.display(name), folder.fd());
  TokenStore store =
      TokenStore::open_fd(file.fd(), file.display(), m.dtype, m.vocab_size, part.tokens, access);
  check_token_file(file.fd(), file.size(), part, file.display(), folder.display(kMetaFile), check);
  return store;
}

// Ids in the narrowest dtype for the vocabulary, moved into a store.
template <class T>
TokenStore owned_store(std::vector<T> ids, int64_t vocab, const std::string& name) {
  if (dtype_for_vocab(vocab) == TokenDtype::kUint32 || sizeof(T) == 2)
    return TokenStore(std::move(ids), vocab, name);
  return TokenStore(std::vector<uint16_t>(ids.begin(), ids.end()), vocab, name);
}

// Ids [0, n_train) of `ids` to d.train, the rest to d.val.
template <class T>
void split_into(std::vector<T> ids, size_t n_train, int64_t vocab, const std::string& name,
                PreparedData& d) {
  std::vector<T> val(ids.begin() + n_train, ids.end());
  ids.resize(n_train);
  ids.shrink_to_fit();
  d.train = owned_store(std::move(ids), vocab, name + " (training part)");
  d.val = owned_store(std::move(val), vocab, name + " (validation part)");
}

// char (the vocabulary of the text itself) and byte: one id per unit, straight to 2 or 4
// bytes an id, as prepare() encodes a file. The units are counted first and each part is
// encoded into a vector of its own size, so that the text and its ids are all that is
// ever held: no copy when they are split (train's memory plan counts this peak).
template <class T>
void encode_units(std::string_view text, const Tokenizer& tok, double val_fraction,
                  const std::string& name, PreparedData& d) {
  const bool chars = tok.kind() == TokenizerKind::chars;
  const uint64_t units = chars ? detail::count_chars(text) : text.size();
  const uint64_t n_train = units - split_val_units(units, val_fraction);
  const size_t cut = chars ? detail::skip_chars(text, n_train) : static_cast<size_t>(n_train);
  d.train_text_bytes = cut;
  d.val_text_bytes = text.size() - cut;
  std::optional<detail::CharIds> table;
  if (chars) table.emplace(dynamic_cast<const CharTokenizer&>(tok).code_points());
  // the text is one document: a reserved <|endoftext|> after it, in the part holding its end
  const std::optional<int64_t> end = tok.reserved_end_of_text();
  const bool ends_in_val = units > n_train;
  auto encode = [&](std::string_view part, uint64_t count, uint64_t base, bool ends) {
    std::vector<T> ids(static_cast<size_t>(count) + (end && ends ? 1 : 0));
    if (table)
      table->encode(part, base, ids.data());
    else
      for (size_t i = 0; i < part.size(); ++i) ids[i] = static_cast<unsigned char>(part[i]);
    if (end && ends) ids.back() = static_cast<T>(*end);
    return ids;
  };
  d.train = owned_store(encode(text.substr(0, cut), n_train, 0, !ends_in_val), tok.vocab_size(),
                        name + " (training part)");
  d.val = owned_store(encode(text.substr(cut), units - n_train, cut, ends_in_val), tok.vocab_size(),
                      name + " (validation part)");
}

// bpe and gpt2: the text is cut at the split character and each part encoded on its own.
template <class Tok>
void encode_bpe(std::string_view text, const Tok& tok, double val_fraction, const std::string& name,
                PreparedData& d) {
  const uint64_t chars = detail::count_chars(text);
  const size_t cut = detail::skip_chars(text, chars - split_val_units(chars, val_fraction));
  std::vector<uint32_t> ids;
  tok.encode_append(text.substr(0, cut), ids);
  const std::optional<int64_t> end = tok.reserved_end_of_text();  // one document: after it
  if (end && cut == text.size()) ids.push_back(static_cast<uint32_t>(*end));
  const size_t n_train = ids.size();
  tok.encode_append(text.substr(cut), ids);
  if (end && cut < text.size()) ids.push_back(static_cast<uint32_t>(*end));
  d.train_text_bytes = cut, d.val_text_bytes = text.size() - cut;
  split_into(std::move(ids), n_train, tok.vocab_size(), name, d);
}

// Whether encode_units gives tok's ids in this dtype: bytes, or characters that are never
// replaced (2 or 4 bytes an id instead of encode()'s 8).
bool fits_units(const Tokenizer& tok, TokenDtype dtype) {
  if (dtype_for_vocab(tok.vocab_size()) != dtype) return false;
  if (tok.kind() == TokenizerKind::bytes) return true;
  const auto* chars = dynamic_cast<const CharTokenizer*>(&tok);
  return chars && !chars->has_replacement();
}

// Any other tokenizer (a char tokenizer that replaces unknown characters): its own
// encode, split as split_tokens splits.
void encode_any(std::string_view text, const Tokenizer& tok, double val_fraction,
                const std::string& name, PreparedData& d) {
  Split split = split_tokens(tok.encode(std::string(text)), val_fraction);
  d.train_text_bytes = tok.kind() == TokenizerKind::chars
                           ? detail::skip_chars(text, split.train.size())
                           : split.train.size();
  d.val_text_bytes = text.size() - d.train_text_bytes;
  d.train = TokenStore::from_ids(split.train, tok.vocab_size(), name + " (training part)");
  std::vector<int64_t>().swap(split.train);
  d.val = TokenStore::from_ids(split.val, tok.vocab_size(), name + " (validation part)");
}

std::unique_ptr<Tokenizer> tokenizer_for(std::string_view text, TokenizerKind kind,
                                         int64_t vocab_size, double val_fraction) {
  if (kind == TokenizerKind::bytes && vocab_size == 0)
    return std::make_unique<ByteTokenizer>(EndOfText::reserved);
  if (kind == TokenizerKind::chars && vocab_size == 0) {
    detail::CharCollector collector;
    collector.add(text, 0);
    return std::make_unique<CharTokenizer>(collector.distinct_code_points());
  }
  if (kind == TokenizerKind::bpe && vocab_size >= 257 && vocab_size <= kMaxBpeVocabSize) {
    const uint64_t chars = detail::count_utf8(text, 0);
    const uint64_t train = chars - split_val_units(chars, val_fraction);
    return std::make_unique<BpeTokenizer>(
        BpeTokenizer::train(text.substr(0, detail::skip_chars(text, train)), vocab_size,
                            std::string(kGpt4SplitPattern), EndOfText::reserved));
  }
  throw std::logic_error("tokenizer_for: options not checked");
}

}  // namespace

bool is_prepared_folder(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
         lstat((path + "/" + kMetaFile).c_str(), &st) == 0;
}

PreparedData open_prepared(const std::string& dir, TokenStore::FileAccess access,
                           TokenCheck check) {
  const detail::InputFolder folder(dir);
  const std::string meta_path = folder.display(kMetaFile);
  if (!folder.has(kMetaFile))
    throw DataError(
        fmt::format("{}: no {}: not a prepared folder, or its prepare did not finish "
                    "(prepare it again)",
                    folder.path(), kMetaFile));
  const std::string meta_bytes =
      detail::InputFile(kMetaFile, meta_path, folder.fd()).read_all(kMaxMetaBytes);
  PreparedData out;
  out.meta = parse_prepared_meta(meta_bytes, meta_path);
  const PreparedMeta& m = *out.meta;
  out.tokenizer = open_tokenizer(folder, m, meta_path);
  out.train = open_in(folder, kTrainFile, m, m.train, access, check);
  out.val = open_in(folder, kValFile, m, m.val, access, check);
  out.identity = prepared_identity(m);
  out.train_text_bytes = m.train.text_bytes, out.val_text_bytes = m.val.text_bytes;
  return out;
}

PreparedData prepare_text(std::string_view text, std::unique_ptr<Tokenizer> tokenizer,
                          double val_fraction, const std::string& name) {
  if (!(val_fraction >= 0 && val_fraction < 1))
    throw std::invalid_argument(
        fmt::format("val_fraction must be in [0, 1), got {}", val_fraction));
  if (text.empty()) throw DataError(fmt::format("{}: the text is empty", name));
  PreparedData d;
  try {
    base::check_utf8(text);
    const Tokenizer& tok = *tokenizer;
    if (const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tok))
      encode_bpe(text, *bpe, val_fraction, name, d);
    else if (const auto* gpt2 = dynamic_cast<const Gpt2Tokenizer*>(&tok))
      encode_bpe(text, *gpt2, val_fraction, name, d);
    else if (const auto* hf = dynamic_cast<const HfBpeTokenizer*>(&tok))
      encode_bpe(text, *hf, val_fraction, name, d);
    else if (fits_units(tok, TokenDtype::kUint16))
      encode_units<uint16_t>(text, tok, val_fraction, name, d);
    else if (fits_units(tok, TokenDtype::kUint32))
      encode_units<uint32_t>(text, tok, val_fraction, name, d);
    else
      encode_any(text, tok, val_fraction, name, d);
  } catch (const std::invalid_argument& e) {  // bad UTF-8, a character the vocabulary lacks
    throw DataError(fmt::format("{}: {}", name, e.what()));
  }
  d.tokenizer = std::move(tokenizer);
  d.identity = text_identity(text);
  return d;
}

PreparedData prepare_text(std::string_view text, TokenizerKind tokenizer, int64_t vocab_size,
                          double val_fraction, const std::string& name) {
  const bool units = tokenizer == TokenizerKind::chars || tokenizer == TokenizerKind::bytes;
  const bool ok =
      (units && vocab_size == 0) ||
      (tokenizer == TokenizerKind::bpe && vocab_size >= 257 && vocab_size <= kMaxBpeVocabSize);
  if (!ok)
    throw std::invalid_argument(fmt::format(
        "tokenizer '{}' with vocab_size {}: expected char or byte with 0, or bpe with 257 to {}",
        tokenizer, vocab_size, kMaxBpeVocabSize));
  if (!(val_fraction >= 0 && val_fraction < 1))
    throw std::invalid_argument(
        fmt::format("val_fraction must be in [0, 1), got {}", val_fraction));
  if (text.empty()) throw DataError(fmt::format("{}: the text is empty", name));
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = tokenizer_for(text, tokenizer, vocab_size, val_fraction);
  } catch (const std::invalid_argument& e) {  // bad UTF-8
    throw DataError(fmt::format("{}: {}", name, e.what()));
  }
  if (tokenizer != TokenizerKind::chars)
    return prepare_text(text, std::move(tok), val_fraction, name);
  PreparedData d;  // the vocabulary is the text's own: no character can be unknown
  if (dtype_for_vocab(tok->vocab_size()) == TokenDtype::kUint16)
    encode_units<uint16_t>(text, *tok, val_fraction, name, d);
  else
    encode_units<uint32_t>(text, *tok, val_fraction, name, d);
  d.tokenizer = std::move(tok);
  d.identity = text_identity(text);
  return d;
}

SplitUnit split_unit_of(TokenizerKind kind) {
  return kind == TokenizerKind::bytes ? SplitUnit::bytes : SplitUnit::chars;
}

std::vector<uint32_t> token_byte_lengths(const Tokenizer& tokenizer) {
  std::vector<uint32_t> lengths(static_cast<size_t>(tokenizer.vocab_size()), 1);
  if (const auto* c = dynamic_cast<const CharTokenizer*>(&tokenizer)) {
    for (size_t i = 0; i < lengths.size(); ++i) {
      const uint32_t cp = c->code_points()[i];
      lengths[i] = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    }
  } else if (const auto* b = dynamic_cast<const BpeTokenizer*>(&tokenizer)) {
    for (size_t i = 0; i < lengths.size(); ++i)
      lengths[i] = static_cast<uint32_t>(b->token_bytes(static_cast<uint32_t>(i)).size());
  } else if (const auto* g = dynamic_cast<const Gpt2Tokenizer*>(&tokenizer)) {
    for (size_t i = 0; i < lengths.size(); ++i)
      lengths[i] = static_cast<uint32_t>(g->token_bytes(static_cast<uint32_t>(i)).size());
  } else if (const auto* h = dynamic_cast<const HfBpeTokenizer*>(&tokenizer)) {
    for (size_t i = 0; i < lengths.size(); ++i)
      lengths[i] = static_cast<uint32_t>(h->token_bytes(static_cast<uint32_t>(i)).size());
  } else if (tokenizer.kind() != TokenizerKind::bytes) {
    throw std::invalid_argument(
        fmt::format("token_byte_lengths: a '{}' tokenizer is not known", tokenizer.type()));
  }
  // the end of a document stands for no text (meta.json's text_bytes count none for it)
  if (const auto end = tokenizer.reserved_end_of_text()) lengths[static_cast<size_t>(*end)] = 0;
  return lengths;
}

}  // namespace data
