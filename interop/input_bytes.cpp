#include "interop/input_bytes.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "interop/hub_cache.h"
#include "interop/model_files.h"

namespace interop {

static_assert(std::endian::native == std::endian::little,
              "the formats read here are little-endian, as is every CPU attograd runs on");

namespace {

constexpr uint64_t kCursorBuffer = 1 << 20;  // what a Cursor reads ahead at once

// path opened without following a link in its last part (one planted after the check is
// refused, not followed), its folder as the caller named it.
base::UniqueFd open_no_link(const std::string& path, const std::string& named, struct stat* st) {
  const std::string name = base::base_name(path);
  const base::UniqueFd folder(
      ::open(base::folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (name.empty() || !folder.valid()) return base::open_regular(path, named, st);
  return base::open_regular(name, named, st, folder.get());
}

}  // namespace

InputBytes InputBytes::open(const std::string& path) {
  InputBytes in;
  in.source_ = path;
  const std::optional<FileIdentity> blob = allowed_link(path);  // any other link: refused
  const std::string named = fmt::format("model file '{}'", path);
  struct stat st;
  try {
    in.fd_ = std::make_shared<base::UniqueFd>(blob ? base::open_regular(path, named, &st)
                                                   : open_no_link(path, named, &st));
  } catch (const base::FileError& e) {
    throw InteropError(e.what());
  }
  // the blob opened is the one checked: a link swapped meanwhile is not followed elsewhere
  if (blob && (st.st_dev != blob->dev || st.st_ino != blob->ino))
    throw InteropError(fmt::format("{}: its link changed while it was opened", path));
  in.size_ = static_cast<uint64_t>(st.st_size);
  return in;
}

std::string read_whole_file(const std::string& path, uint64_t max_bytes) {
  const InputBytes in = InputBytes::open(path);
  if (in.size() > max_bytes)
    throw InteropError(fmt::format("{}: {} bytes, more than the {} such a file may have", path,
                                   in.size(), max_bytes));
  std::string bytes(in.size(), '\0');
  in.read(0, bytes.data(), bytes.size(), "the file");
  return bytes;
}

InputBytes InputBytes::of(std::string bytes, const std::string& source) {
  InputBytes in;
  in.source_ = source;
  in.size_ = bytes.size();
  in.bytes_ = std::make_shared<const std::string>(std::move(bytes));
  return in;
}

void InputBytes::read(uint64_t offset, void* dst, uint64_t n, const std::string& what) const {
  if (!holds(offset, n))
    throw InteropError(
        fmt::format("{}: {} ({} bytes at offset {}) lies past the end of the "
                    "file ({} bytes)",
                    source_, what, n, offset, size_));
  if (bytes_) {
    std::memcpy(dst, bytes_->data() + offset, n);
    return;
  }
  const ssize_t got = base::pread_full(fd_->get(), static_cast<char*>(dst), n, offset);
  if (got < 0)
    throw InteropError(base::os_error(fmt::format("cannot read '{}'", source_), errno).what());
  if (static_cast<uint64_t>(got) < n)
    throw InteropError(
        fmt::format("{}: the file ended while {} was read (was it cut short "
                    "meanwhile?)",
                    source_, what));
}

void Cursor::bytes(void* dst, uint64_t n, const std::string& what) {
  if (!in_.holds(offset_, n))
    throw InteropError(
        fmt::format("{}: {} ({} bytes at offset {}) lies past the end of the "
                    "file ({} bytes)",
                    in_.source(), what, n, offset_, in_.size()));
  char* out = static_cast<char*>(dst);
  while (n > 0) {
    const uint64_t end = buffer_start_ + buffer_.size();
    if (offset_ < buffer_start_ || offset_ >= end) {
      buffer_start_ = offset_;
      buffer_.resize(std::min(kCursorBuffer, in_.size() - offset_));
      in_.read(offset_, buffer_.data(), buffer_.size(), what);
      continue;
    }
    const uint64_t take = std::min(n, end - offset_);
    std::memcpy(out, buffer_.data() + (offset_ - buffer_start_), take);
    out += take, offset_ += take, n -= take;
  }
}

uint8_t Cursor::u8(const std::string& what) {
  uint8_t v;
  bytes(&v, 1, what);
  return v;
}

uint32_t Cursor::u32(const std::string& what) {
  uint32_t v;
  bytes(&v, 4, what);
  return v;
}

uint64_t Cursor::u64(const std::string& what) {
  uint64_t v;
  bytes(&v, 8, what);
  return v;
}

void Cursor::skip(uint64_t n, const std::string& what) {
  if (!in_.holds(offset_, n))
    throw InteropError(
        fmt::format("{}: {} ({} bytes at offset {}) lies past the end of the "
                    "file ({} bytes)",
                    in_.source(), what, n, offset_, in_.size()));
  offset_ += n;
}

void Cursor::skip_string(const std::string& what) {
  skip(u64(what + " (its length)"), what);
}

std::string Cursor::string(const std::string& what, uint64_t max_bytes, const char* kept_note) {
  const uint64_t n = u64(what + " (its length)");
  if (n > remaining())
    throw InteropError(fmt::format("{}: {} is {} bytes long, more than the {} left in the file",
                                   in_.source(), what, n, remaining()));
  if (n > max_bytes)
    throw InteropError(
        fmt::format("{}: {} holds a string of {} bytes, more than the {} left of what its "
                    "reader keeps ({})",
                    in_.source(), what, n, max_bytes, kept_note));
  std::string s(n, '\0');
  bytes(s.data(), n, what);
  return s;
}

}  // namespace interop
