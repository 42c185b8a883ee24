// The last pass of prepare(): the corpus encoded into train.bin and val.bin
// (prepare_passes.h).
#include <fmt/format.h>

#include <bit>
#include <future>

#include "base/utf8.h"
#include "data/gpt2_tokenizer.h"
#include "data/prepare_passes.h"
#include "data/prepared.h"

namespace data::detail {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian: a big-endian host needs byte swaps when writing");

namespace {

// Char and byte text is encoded this much at a time, so the text, its ids and the
// buffer they are copied to stay in the CPU's cache.
constexpr size_t kSliceBytes = size_t{64} << 10;
// A chunk at least this long is hashed on another thread while it is encoded.
constexpr size_t kParallelHashBytes = size_t{1} << 20;

}  // namespace

EncodePass::EncodePass(Kind kind, const Tokenizer& tokenizer, uint64_t train_units,
                       OutputFolder& folder)
    : kind_(kind),
      dtype_(dtype_for_vocab(tokenizer.vocab_size())),
      train_units_(train_units),
      end_of_text_(tokenizer.reserved_end_of_text()),
      train_(folder, kTrainFile),
      val_(folder, kValFile) {
  if (kind == Kind::kChar)
    char_ids_.emplace(dynamic_cast<const CharTokenizer&>(tokenizer).code_points());
  if (kind == Kind::kBpe) bpe_ = make_stream_encoder(tokenizer);  // bpe or gpt2
  ids16_.resize(kSliceBytes + 4);
  if (kind == Kind::kChar && dtype_ == TokenDtype::kUint32) ids32_.resize(kSliceBytes + 4);
}

uint64_t EncodePass::tokens(bool val) const {
  return (val ? val_ : train_).bytes_written() / dtype_bytes(dtype_);
}

SplitPart EncodePass::part(bool val, uint64_t text_bytes) const {
  const TempFile& file = val ? val_ : train_;
  const base::UniqueFd fd(file.open_for_reading());
  return {tokens(val), text_bytes, file.sha256(),
          token_file_sample_sha256(fd.get(), file.bytes_written(), val ? kValFile : kTrainFile),
          documents_[val ? 1 : 0]};
}

void EncodePass::run(std::vector<Source>& sources, size_t chunk_bytes, Progress& progress) {
  for_each_chunk(
      sources, chunk_bytes, progress,
      [&](Source&, std::string_view chunk, uint64_t offset) {
        if (!sha_) sha_.emplace();
        if (chunk.size() < kParallelHashBytes) {
          sha_->update(chunk);
          encode(chunk, offset);
          return true;
        }
        // the hash on a second core while this one encodes (the future's destructor waits
        // for it, also when encode throws)
        std::future<void> hashing = std::async(std::launch::async, [&] { sha_->update(chunk); });
        encode(chunk, offset);
        hashing.get();
        return true;
      },
      [&](Source& s) { end_source(s); });
  if (kind_ == Kind::kBpe) {
    ids32_.clear();
    bpe_->finish(ids32_);
    write(split_found_ ? val_ : train_, ids32_.data(), ids32_.size());
  }
  if (!split_found_) split_byte_ = bytes_, split_char_ = chars_;  // validation is empty
}

void EncodePass::end_source(Source& s) {
  if (!sha_) sha_.emplace();  // an empty file
  s.sha256 = sha_->hex();
  sha_.reset();
  const uint64_t chars = chars_ - source_chars_;
  source_chars_ = chars_;
  if (kind_ == Kind::kByte)
    s.chars = chars;  // the one pass: no count before
  else if (chars != s.chars)
    source_changed(s, fmt::format("{} characters, {} before", chars, s.chars));
  if (end_of_text_) end_document();
}

// A document ends: bpe's held-back pieces, then <|endoftext|>, in the part holding its end.
void EncodePass::end_document() {
  TempFile& part = split_found_ ? val_ : train_;
  if (kind_ == Kind::kBpe) {
    ids32_.clear();
    bpe_->finish(ids32_);
    write(part, ids32_.data(), ids32_.size());
  }
  const auto id = static_cast<uint32_t>(*end_of_text_);
  write(part, &id, 1);
  ++documents_[split_found_ ? 1 : 0];
}

void EncodePass::encode(std::string_view chunk, uint64_t offset) {
  if (kind_ == Kind::kBpe) return encode_bpe(chunk, offset);
  for (size_t pos = 0; pos < chunk.size();) {  // slices that end between characters
    size_t end = std::min(chunk.size(), pos + kSliceBytes);
    if (end < chunk.size()) end = pos + base::utf8_complete_prefix(chunk.substr(pos, end - pos));
    encode_slice(chunk.substr(pos, end - pos), offset + pos);
    pos = end;
  }
}

// Char and byte: one id per unit.
void EncodePass::encode_slice(std::string_view slice, uint64_t offset) {
  if (kind_ == Kind::kChar && dtype_ == TokenDtype::kUint32) {
    const size_t n = char_ids_->encode(slice, offset, ids32_.data());
    route(ids32_.data(), n, slice);
    chars_ += n;
  } else if (kind_ == Kind::kChar) {
    const size_t n = char_ids_->encode(slice, offset, ids16_.data());
    route(ids16_.data(), n, slice);
    chars_ += n;
  } else {
    const uint64_t chars = count_utf8(slice, offset);  // validates
    const auto* p = reinterpret_cast<const unsigned char*>(slice.data());
    for (size_t i = 0; i < slice.size(); ++i) ids16_[i] = p[i];
    route(ids16_.data(), slice.size(), slice);
    chars_ += chars;
  }
  bytes_ += slice.size();
}

// The ids of `text` (one per unit) before the split go to train.bin, the rest to val.bin.
template <class T>
void EncodePass::route(const T* ids, size_t n, std::string_view text) {
  size_t k = n;  // ids that are training
  if (split_found_) {
    k = 0;
  } else if (units_ + n > train_units_) {
    k = train_units_ - units_;
    split_found_ = true;
    const bool chars = kind_ == Kind::kChar;
    split_byte_ = bytes_ + (chars ? skip_chars(text, k) : k);
    split_char_ = chars_ + (chars ? k : count_chars(text.substr(0, k)));
  }
  write(train_, ids, k);
  write(val_, ids + k, n - k);
  units_ += n;
}

// Pieces of bpe never cross the split: the training text ends there (finish) and the
// validation text starts as a new text.
void EncodePass::encode_bpe(std::string_view chunk, uint64_t offset) {
  const uint64_t chars = count_utf8(chunk, offset);  // validates, with the file's offsets
  ids32_.clear();
  if (split_found_ || chars_ + chars <= train_units_) {
    bpe_->add(chunk, ids32_);
    write(split_found_ ? val_ : train_, ids32_.data(), ids32_.size());
  } else {
    const size_t cut = skip_chars(chunk, train_units_ - chars_);
    bpe_->add(chunk.substr(0, cut), ids32_);
    bpe_->finish(ids32_);
    write(train_, ids32_.data(), ids32_.size());
    split_found_ = true, split_byte_ = bytes_ + cut, split_char_ = train_units_;
    ids32_.clear();
    bpe_->add(chunk.substr(cut), ids32_);
    write(val_, ids32_.data(), ids32_.size());
  }
  chars_ += chars, bytes_ += chunk.size();
}

template <class T>
void EncodePass::write(TempFile& file, const T* ids, size_t n) {
  if (n == 0) return;
  if (sizeof(T) == 2 || dtype_ == TokenDtype::kUint32) return file.write(ids, n * sizeof(T));
  for (size_t done = 0; done < n; done += kSliceBytes) {  // uint32 ids of a uint16 vocabulary
    const size_t m = std::min(kSliceBytes, n - done);
    for (size_t i = 0; i < m; ++i) ids16_[i] = static_cast<uint16_t>(ids[done + i]);
    file.write(ids16_.data(), m * 2);
  }
}

}  // namespace data::detail
