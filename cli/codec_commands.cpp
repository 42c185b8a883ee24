// `encode` and `decode`: text to token ids and back with the tokenizer of a prepared folder,
// a tokenizer file, a checkpoint or a folder of GPT-2's tokenizer files, for inspection. Standard
// input is streamed in chunks of a megabyte, so memory stays a few chunks whatever the size of the
// input:
//
//   attograd encode --tokenizer corpus.prepared < text.txt > ids.txt   # "72 101 108 ...\n"
//   attograd decode --tokenizer run.h5 < ids.txt > same.txt            # the exact bytes
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <memory>

#include "base/utf8.h"
#include "cli/cli.h"
#include "cli/command_support.h"
#include "data/gpt2_tokenizer.h"
#include "data/hf_bpe.h"
#include "data/prepared.h"
#include "data/tokenizer_file.h"
#include "io/checkpoint.h"
#include "io/tokenizer_section.h"

namespace cli {

namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;
constexpr size_t kMaxIdBytes = 24;  // longer than any id (at most 10 digits): not an id

// A problem with what came on standard input: bad input, exit 2 as all bad input is
// (docs/exit-codes.md).
struct InputError : UsageError {
  using UsageError::UsageError;
};

po::options_description codec_options(std::string& tokenizer, const char* caption) {
  po::options_description desc(caption);
  auto add = desc.add_options();
  add("help,h", "show this help");
  add("tokenizer", po::value(&tokenizer)->required(),
      "a prepared folder (its tokenizer.json), a tokenizer .json file (attograd's or Hugging "
      "Face's), a checkpoint, or a folder of a model's tokenizer files (vocab.json + merges.txt, "
      "encoder.json + vocab.bpe, or Hugging Face's tokenizer.json)");
  return desc;
}

// Calls add(chunk) for each chunk of standard input, then finish().
template <typename Sink>
void pump_stdin(Sink& sink) {
  std::string buf(kChunkBytes, '\0');
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw std::runtime_error(fmt::format("cannot read standard input: {}", std::strerror(errno)));
    if (n == 0) break;
    sink.add(std::string_view(buf.data(), static_cast<size_t>(n)));
  }
  sink.finish();
}

void write_stdout(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(STDOUT_FILENO, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw std::runtime_error(
          fmt::format("cannot write to standard output: {}", std::strerror(errno)));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

// ------------------------------------------------------------------ encode
// Ids as decimal text, one space between them, a newline after the last.
class IdWriter {
 public:
  template <typename Id>
  void add(const std::vector<Id>& ids) {
    for (const Id id : ids) {
      if (count_++ > 0) buf_ += ' ';
      fmt::format_to(std::back_inserter(buf_), "{}", id);
    }
    if (buf_.size() >= kChunkBytes) flush();
  }
  void finish() {
    buf_ += '\n';
    flush();
  }

 private:
  void flush() {
    write_stdout(buf_);
    buf_.clear();
  }
  std::string buf_;
  uint64_t count_ = 0;
};

// Text in chunks to ids: the tokenizer's own encode on every complete character so far
// (data::TextStream checks UTF-8 and holds back a character cut by a chunk's end).
class TextEncoder {
 public:
  TextEncoder(const data::Tokenizer& tok, IdWriter& out) : tok_(tok), out_(out) {}
  void add(std::string_view chunk) {
    text_.add(chunk);
    encode_ready();
  }
  void finish() {
    text_.finish();
    encode_ready();
  }

 private:
  void encode_ready() {
    const std::string ready(text_.subject().substr(text_.begin()));
    try {
      out_.add(tok_.encode(ready));
    } catch (const std::invalid_argument&) {
      throw InputError(unknown_character(ready));
    }
    offset_ += ready.size(), lines_ += std::count(ready.begin(), ready.end(), '\n');
    text_.consume(text_.subject().size());
  }
  // Which character of valid UTF-8 a char tokenizer lacks, and where it is in the input.
  std::string unknown_character(const std::string& text) const;

  const data::Tokenizer& tok_;
  IdWriter& out_;
  data::TextStream text_{0};
  uint64_t offset_ = 0, lines_ = 0;  // bytes and lines encoded before
};

std::string TextEncoder::unknown_character(const std::string& text) const {
  const auto* ct = dynamic_cast<const data::CharTokenizer*>(&tok_);
  const std::vector<uint32_t> cps = base::utf8_decode(text);
  size_t at = 0;
  for (const uint32_t cp : cps) {
    if (ct && !std::binary_search(ct->code_points().begin(), ct->code_points().end(), cp)) {
      const auto line = lines_ + 1 + std::count(text.begin(), text.begin() + at, '\n');
      return fmt::format(
          "character {} at byte offset {} (line {}) is not in the vocabulary of the char "
          "tokenizer ({} characters)",
          base::describe_code_point(cp), offset_ + at, line, ct->vocab_size());
    }
    at += base::utf8_length(cp);
  }
  return "the tokenizer refused the text";  // not reached: only a char tokenizer refuses
}

// The same for bpe and gpt2, whose stream encoder gives the ids of the whole text exactly.
class BpeTextEncoder {
 public:
  BpeTextEncoder(std::unique_ptr<data::BpeStreamEncoder> stream, IdWriter& out)
      : stream_(std::move(stream)), out_(out) {}
  void add(std::string_view chunk) {
    stream_->add(chunk, ids_);
    take();
  }
  void finish() {
    stream_->finish(ids_);
    take();
  }

 private:
  void take() {
    out_.add(ids_);
    ids_.clear();
  }
  std::unique_ptr<data::BpeStreamEncoder> stream_;
  IdWriter& out_;
  std::vector<uint32_t> ids_;
};

// What the tokenizer's post-processor adds around a text (Llama 3's <|begin_of_text|>), as
// tokenizers' encode(text) adds it; nothing for a tokenizer without a template.
std::pair<std::vector<uint32_t>, std::vector<uint32_t>> template_ids(const data::Tokenizer& tok) {
  if (const auto* hf = dynamic_cast<const data::HfBpeTokenizer*>(&tok))
    return {hf->spec().prefix, hf->spec().suffix};
  return {};
}

void encode_stdin(const data::Tokenizer& tok, bool add_template) {
  IdWriter out;
  const auto [prefix, suffix] = add_template ? template_ids(tok) : decltype(template_ids(tok)){};
  out.add(prefix);
  try {
    if (auto stream = data::make_stream_encoder(tok)) {
      BpeTextEncoder encoder(std::move(stream), out);
      pump_stdin(encoder);
    } else {
      TextEncoder encoder(tok, out);
      pump_stdin(encoder);
    }
  } catch (const std::invalid_argument& e) {  // invalid UTF-8, named with its offset
    throw InputError(fmt::format("standard input: {}", e.what()));
  } catch (const InputError& e) {
    throw InputError(fmt::format("standard input: {}", e.what()));
  }
  out.add(suffix);
  out.finish();
}

// ------------------------------------------------------------------ decode
// Ids separated by whitespace in chunks to the bytes of their tokens. Every id is checked
// here (a number, inside the vocabulary) before the tokenizer sees it, so an error names
// its position among the ids and its byte offset in the input.
class IdDecoder {
 public:
  explicit IdDecoder(const data::Tokenizer& tok) : tok_(tok) {}
  void add(std::string_view chunk) {
    for (size_t i = 0; i < chunk.size(); ++i) next_byte(chunk[i]);
    write_stdout(tok_.decode(ids_));
    ids_.clear();
  }
  void finish() { add("\n"); }

 private:
  void next_byte(char c) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
      if (!token_.empty()) take_token();
    } else {
      if (token_.empty()) token_at_ = offset_;
      token_ += c;
      if (token_.size() > kMaxIdBytes) take_token();
    }
    ++offset_;
  }
  void take_token();

  const data::Tokenizer& tok_;
  std::vector<int64_t> ids_;
  std::string token_;  // the bytes of the id being read
  uint64_t offset_ = 0, token_at_ = 0, position_ = 0;
};

void IdDecoder::take_token() {
  const std::string where =
      fmt::format("at position {} (byte offset {} of standard input)", position_, token_at_);
  uint64_t id = 0;
  const auto [end, ec] = std::from_chars(token_.data(), token_.data() + token_.size(), id);
  const bool digits =
      std::all_of(token_.begin(), token_.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || token_.size() > kMaxIdBytes)
    throw InputError(
        fmt::format("'{}{}' {} is not a token id (ids are decimal numbers separated by whitespace)",
                    base::printable(token_.substr(0, kMaxIdBytes)),
                    token_.size() > kMaxIdBytes ? "..." : "", where));
  if (ec != std::errc() || id >= static_cast<uint64_t>(tok_.vocab_size()))
    throw InputError(
        fmt::format("id {} {} is outside the vocabulary of the {} tokenizer (ids 0 "
                    "to {})",
                    base::printable(token_), where, tok_.type(), tok_.vocab_size() - 1));
  ids_.push_back(static_cast<int64_t>(id));
  token_.clear();
  ++position_;
}

// What encode and decode share: the options, --help, the tokenizer, then
// body(tokenizer, options).
template <typename Body>
int codec_command(const Args& args, const std::string& name, const char* caption, Body body,
                  bool encodes = false) {
  return guarded(name, [&] {
    std::string path;
    auto desc = codec_options(path, caption);
    if (encodes)
      desc.add_options()("no-special-tokens",
                         "add nothing around the text: without it, the ids a tokenizer.json's "
                         "post-processor adds (Llama 3's <|begin_of_text|>) come first and last, "
                         "as Hugging Face tokenizers' encode(text) adds them");
    auto vm = parse_options(args, desc);
    if (wants_help(vm, name, desc)) return 0;
    body(*load_tokenizer(path, "--tokenizer"), vm);
    return 0;
  });
}

void decode_stdin(const data::Tokenizer& tok, const po::variables_map&) {
  IdDecoder decoder(tok);
  pump_stdin(decoder);
}

}  // namespace

int encode_command(const Args& args) {
  return codec_command(
      args, "encode", "encode: UTF-8 text on standard input to token ids",
      [](const data::Tokenizer& tok, const po::variables_map& vm) {
        encode_stdin(tok, !vm.count("no-special-tokens"));
      },
      /*encodes=*/true);
}

int decode_command(const Args& args) {
  return codec_command(args, "decode", "decode: token ids on standard input to the text's bytes",
                       decode_stdin);
}

}  // namespace cli
