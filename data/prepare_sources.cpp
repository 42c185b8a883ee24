// The sources of prepare(): listing them, opening them, reading them in chunks, and the
// progress reported meanwhile (prepare_passes.h).
#include <fcntl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "base/utf8.h"
#include "data/prepare_passes.h"

namespace data {

namespace {

std::vector<std::string> txt_files_under(const std::string& dir, bool recursive) {
  namespace fs = std::filesystem;
  std::vector<std::string> found;
  std::error_code ec;
  const auto visit = [&](const fs::directory_entry& e) {
    std::error_code ignored;  // a dangling link: kept, and refused by name when opened
    if (e.path().extension() == ".txt" && !e.is_directory(ignored)) found.push_back(e.path());
  };
  if (recursive) {  // links to folders are not followed (directory_options::none)
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

namespace detail {

std::vector<Source> open_sources(const std::vector<std::string>& paths, bool recursive) {
  std::vector<Source> sources;
  std::set<std::pair<dev_t, ino_t>> seen;
  uint64_t total = 0;
  for (const std::string& path : list_sources(paths, recursive)) {
    const InputFile file(path, path);
    if (!seen.insert({file.stamp().dev, file.stamp().ino}).second) {
      const auto same = std::find_if(sources.begin(), sources.end(), [&](const Source& s) {
        return s.stamp.dev == file.stamp().dev && s.stamp.ino == file.stamp().ino;
      });
      throw DataError(fmt::format("{}: the same file as {}, given twice", path, same->path));
    }
    sources.push_back({path, file.stamp(), 0, ""});
    total += file.size();
  }
  if (total == 0)
    throw DataError(fmt::format("the corpus is empty ({} file{} of 0 bytes)", sources.size(),
                                sources.size() == 1 ? "" : "s"));
  return sources;
}

void source_changed(const Source& s, const std::string& what) {
  throw DataError(fmt::format(
      "{}: the file changed while it was being prepared ({}); prepare it again when nothing "
      "writes it",
      s.path, what));
}

// ---- Progress

Progress::Progress(const PrepareCallback& callback, int passes, uint64_t corpus_bytes)
    : callback_(callback), passes_(passes), bytes_(corpus_bytes) {}

void Progress::start(int pass, std::string_view stage) {
  pass_ = pass, stage_ = stage, done_ = 0;
  report();
}

void Progress::advance(uint64_t bytes) {
  done_ = std::min(done_ + bytes, bytes_);
  report();
}

void Progress::report() const {
  if (!callback_) return;
  PrepareProgress p;
  p.pass = pass_, p.passes = passes_, p.stage = stage_;
  p.bytes_done = done_, p.bytes_total = bytes_;
  p.all_done = (pass_ - 1) * bytes_ + done_, p.all_total = passes_ * bytes_;
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  callback_(p);
}

// ---- ChunkReader

ChunkReader::ChunkReader(const Source& source, size_t chunk_bytes)
    : source_(source),
      file_(source.path, source.path),
      chunk_(chunk_bytes),
      buffer_(chunk_bytes + 4) {
  if (file_.stamp() != source.stamp)
    source_changed(source,
                   "it is not the same file, or not the same version, as when the "
                   "prepare began");
  posix_fadvise(file_.fd(), 0, 0, POSIX_FADV_SEQUENTIAL);
}

bool ChunkReader::next(std::string_view& chunk, uint64_t& offset) {
  const size_t carry = held_ - cut_;  // the start of a character cut by the last read
  std::memmove(buffer_.data(), buffer_.data() + cut_, carry);
  offset_ += cut_;
  held_ = carry, cut_ = 0;
  const size_t got = eof_ ? 0 : file_.read(buffer_.data() + carry, chunk_);
  eof_ = eof_ || got < chunk_;
  held_ = carry + got;
  if (offset_ + held_ > source_.stamp.size)
    source_changed(source_, fmt::format("it grew past its {} bytes", source_.stamp.size));
  if (held_ == 0) {
    if (offset_ != source_.stamp.size || file_.stamp_now() != source_.stamp)
      source_changed(source_, fmt::format("{} bytes read of {}", offset_, source_.stamp.size));
    return false;
  }
  const std::string_view bytes(buffer_.data(), held_);
  cut_ = eof_ ? held_ : base::utf8_complete_prefix(bytes);
  chunk = bytes.substr(0, cut_), offset = offset_;
  return true;
}

}  // namespace detail

}  // namespace data
