#include "base/posix_file.h"

#include <fmt/format.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/hash.h"
#include "base/utf8.h"

namespace base {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int UniqueFd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

int UniqueFd::reset() {
  if (fd_ < 0) return 0;
  // Linux releases the descriptor even when close() fails, so it is never retried
  const int err = ::close(fd_) == 0 ? 0 : errno;
  fd_ = -1;
  return err;
}

std::runtime_error os_error(const std::string& what, int err) {
  return std::runtime_error(fmt::format("{}: {}", what, std::strerror(err)));
}

std::string file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string fit_name(const std::string& name, size_t max_bytes) {
  if (name.size() <= max_bytes) return name;
  const std::string tail = fmt::format("~{:08x}", fnv1a_32(name));
  size_t cut = max_bytes > tail.size() ? max_bytes - tail.size() : 0;
  // never keep half of a multi-byte character: back off over continuation bytes
  while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
  return name.substr(0, cut) + tail;
}

std::string folder_of(const std::string& path) {
  const std::filesystem::path p(path);
  return p.has_parent_path() ? p.parent_path().string() : std::string(".");
}

std::string base_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Umask:", 0) != 0) continue;
    char* end = nullptr;
    const unsigned long mask = std::strtoul(line.c_str() + 6, &end, 8);
    if (end != line.c_str() + 6 && mask <= 0777) return static_cast<mode_t>(mask);
  }
  const mode_t mask = ::umask(022);  // no /proc: the only other way to learn it
  ::umask(mask);
  return mask;
}

// ---- inputs ----------------------------------------------------------------------------

namespace {

FileError cannot_read(const std::string& named, int err) {
  return FileError(FileError::Kind::os,
                   fmt::format("cannot read {}: {}", named, std::strerror(err)), err, 0, 0);
}

FileError not_regular(const std::string& named, mode_t mode) {
  return FileError(FileError::Kind::not_regular,
                   fmt::format("{} is not a regular file ({})", named, file_kind(mode)), 0, mode,
                   0);
}

FileError too_big(const std::string& named, uint64_t bytes, uint64_t max_bytes) {
  return FileError(
      FileError::Kind::too_big,
      fmt::format("{} is {} bytes, more than the {} bytes allowed", named, bytes, max_bytes), 0, 0,
      bytes);
}

}  // namespace

UniqueFd open_regular(const std::string& path, const std::string& named, struct stat* st,
                      int dir_fd) {
  const bool in_folder = dir_fd >= 0;
  const int at = in_folder ? dir_fd : AT_FDCWD;
  if (::fstatat(at, path.c_str(), st, in_folder ? AT_SYMLINK_NOFOLLOW : 0) != 0)
    throw cannot_read(named, errno);
  if (!S_ISREG(st->st_mode)) throw not_regular(named, st->st_mode);
  // O_NONBLOCK: a FIFO swapped in meanwhile must not block the open before it is refused
  const int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | (in_folder ? O_NOFOLLOW : 0);
  UniqueFd fd(::openat(at, path.c_str(), flags));
  if (!fd.valid() || ::fstat(fd.get(), st) != 0) throw cannot_read(named, errno);
  if (!S_ISREG(st->st_mode)) throw not_regular(named, st->st_mode);
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  return fd;
}

ssize_t read_full(int fd, char* buffer, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, buffer + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(got);
}

ssize_t pread_full(int fd, char* buffer, size_t n, uint64_t offset) {
  size_t got = 0;
  while (got < n) {
    const size_t piece = std::min<size_t>(n - got, size_t{1} << 30);
    const ssize_t r = ::pread(fd, buffer + got, piece, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(got);
}

std::string read_to_end(int fd, const std::string& named, uint64_t max_bytes, uint64_t size_hint) {
  // one byte more than expected, so that the end is seen without a second buffer
  std::string bytes(static_cast<size_t>(std::min(size_hint, max_bytes)) + 1, '\0');
  size_t done = 0;
  for (;;) {
    if (done == bytes.size()) bytes.resize(bytes.size() * 2);
    const ssize_t n = read_full(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) throw cannot_read(named, errno);
    done += static_cast<size_t>(n);
    if (done > max_bytes) throw too_big(named, done, max_bytes);
    if (done < bytes.size()) break;  // the end: read_full stops short only there
  }
  bytes.resize(done);
  return bytes;
}

std::string read_input_file(const std::string& path, const std::string& what, int64_t max_bytes) {
  const std::string named = fmt::format("{} '{}'", what, printable(path));
  struct stat st;
  const UniqueFd fd = open_regular(path, named, &st);
  const auto max = static_cast<uint64_t>(std::max<int64_t>(max_bytes, 0));
  if (static_cast<uint64_t>(st.st_size) > max)
    throw too_big(named, static_cast<uint64_t>(st.st_size), max);
  // a file that shrank meanwhile is returned as it was read
  return read_to_end(fd.get(), named, max, static_cast<uint64_t>(st.st_size));
}

int64_t regular_file_size(const std::string& path, const std::string& what) {
  struct stat st;
  open_regular(path, fmt::format("{} '{}'", what, printable(path)), &st);
  return static_cast<int64_t>(st.st_size);
}

// ---- exclusive creation ----------------------------------------------------------------

namespace {

constexpr size_t kRandomChars = kExclusiveSuffixBytes - kPidDigits - 1;
constexpr int kNameAttempts = 100;

// Names need only be unlikely to be taken, not secret: a taken one is skipped (O_EXCL), so
// when the kernel has no entropy yet (early boot) a clock-seeded generator does.
std::string random_suffix() {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char raw[kRandomChars];
  if (::getrandom(raw, sizeof raw, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof raw)) {
    static std::atomic<uint64_t> calls{0};
    uint64_t x =
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (++calls * 0x9E3779B97F4A7C15ULL);
    for (auto& b : raw) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      b = static_cast<unsigned char>(x >> 56);
    }
  }
  std::string s;
  for (unsigned char b : raw) s += alphabet[b % (sizeof(alphabet) - 1)];
  return s;
}

}  // namespace

int create_exclusive(int dir_fd, const std::string& prefix, int flags, mode_t mode,
                     std::string* made) {
  flags |= O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  for (int attempt = 0; attempt < kNameAttempts; ++attempt) {
    const std::string name = fmt::format("{}{}-{}", prefix, ::getpid(), random_suffix());
    const int fd = ::openat(dir_fd, name.c_str(), flags, mode);
    if (fd >= 0) *made = name;
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

}  // namespace base
