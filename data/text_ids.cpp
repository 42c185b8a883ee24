#include "data/text_ids.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "data/gpt2_tokenizer.h"
#include "data/posix_io.h"
#include "data/prepare_passes.h"
#include "data/text_scan.h"

namespace data {

namespace {

// The file as a prepare's one source, or a DataError naming it (missing, not a regular
// file, empty).
std::vector<detail::Source> open_text(const std::string& path) {
  if (detail::InputFile(path, path).size() == 0)
    throw DataError(fmt::format("{}: the text is empty", base::printable(path)));
  return detail::open_sources({path}, /*recursive=*/false);
}

// " (line L, column C)" of the character at byte `offset` of the file: its lines and
// characters read again up to there (an error's path only; the text before the offset was
// valid UTF-8 when it was read). Empty if the file cannot be read again as it was.
std::string line_and_column(const std::string& path, uint64_t offset) try {
  detail::InputFile file(path, path);
  std::vector<char> block(size_t{1} << 16);
  uint64_t line = 1, column = 1, done = 0;
  while (done < offset) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(block.size(), offset - done));
    const size_t got = file.read(block.data(), want);
    if (got == 0) return "";  // the file changed under us: say nothing rather than wrong
    for (size_t i = 0; i < got; ++i) {
      const auto byte = static_cast<unsigned char>(block[i]);
      if (byte == '\n')
        ++line, column = 1;
      else if ((byte & 0xC0) != 0x80)  // not a continuation byte: a character starts
        ++column;
    }
    done += got;
  }
  return fmt::format(" (line {}, column {})", line, column);
} catch (const std::exception&) {  // gone or replaced since: the offset alone must do
  return "";
}

}  // namespace

struct TextIds::State {
  std::vector<detail::Source> sources;
  std::optional<detail::ChunkReader> reader;
  const Tokenizer& tokenizer;
  std::optional<detail::CharIds> char_ids;  // a char vocabulary (no replacement)
  std::unique_ptr<BpeStreamEncoder> bpe;    // a bpe or gpt2 tokenizer
  std::vector<uint32_t> ids;                // a chunk's, before they are widened
  uint64_t bytes = 0;
  bool ended = false;

  State(const std::string& path, const Tokenizer& tok, size_t chunk_bytes)
      : sources(open_text(path)), tokenizer(tok) {
    reader.emplace(sources.front(), chunk_bytes);
    if (const auto* chars = dynamic_cast<const CharTokenizer*>(&tok);
        chars && !chars->has_replacement())
      char_ids.emplace(chars->code_points());
    bpe = make_stream_encoder(tok);
  }

  // The ids of one chunk (cut between characters) that starts at `offset` in the file.
  void encode(std::string_view chunk, uint64_t offset, std::vector<int64_t>& out) {
    ids.clear();
    if (char_ids) {
      ids.resize(chunk.size());
      ids.resize(char_ids->encode(chunk, offset, ids.data()));
    } else if (bpe) {
      detail::count_utf8(chunk, offset);  // validates, naming the file's offset
      bpe->add(chunk, ids);
    } else {
      detail::count_utf8(chunk, offset);
      const std::vector<int64_t> some = tokenizer.encode(std::string(chunk));
      out.insert(out.end(), some.begin(), some.end());
    }
    out.insert(out.end(), ids.begin(), ids.end());
  }
};

TextIds::TextIds(const std::string& path, const Tokenizer& tokenizer, size_t chunk_bytes)
    : s_(std::make_unique<State>(path, tokenizer, chunk_bytes)) {}

TextIds::~TextIds() = default;

bool TextIds::next(std::vector<int64_t>& out) {
  State& s = *s_;
  if (s.ended) return false;
  std::string_view chunk;
  uint64_t offset = 0;
  if (!s.reader->next(chunk, offset)) {
    s.ended = true;
    s.ids.clear();
    if (s.bpe) s.bpe->finish(s.ids);
    // the text is one document: a reserved <|endoftext|> after it, as prepare puts it
    if (const auto end = s.tokenizer.reserved_end_of_text())
      s.ids.push_back(static_cast<uint32_t>(*end));
    out.insert(out.end(), s.ids.begin(), s.ids.end());
    return !s.ids.empty();
  }
  try {
    s.encode(chunk, offset, out);
  } catch (const detail::TextError& e) {
    const std::string& path = s.sources.front().path;
    throw DataError(
        fmt::format("{}: {}{}", base::printable(path), e.what(), line_and_column(path, e.offset)));
  } catch (const std::invalid_argument& e) {
    throw DataError(fmt::format("{}: {}", base::printable(s.sources.front().path), e.what()));
  }
  s.bytes += chunk.size();
  return true;
}

uint64_t TextIds::bytes_read() const {
  return s_->bytes;
}

}  // namespace data
