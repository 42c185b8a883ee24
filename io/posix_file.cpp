#include "io/posix_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace io::posix {

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
  uint32_t hash = 2166136261u;  // FNV-1a
  for (unsigned char c : name) hash = (hash ^ c) * 16777619u;
  const std::string tail = fmt::format("~{:08x}", hash);
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

namespace {

std::string not_regular(const std::string& named, mode_t mode) {
  return fmt::format("{} is not a regular file ({})", named, file_kind(mode));
}

}  // namespace

UniqueFd open_regular(const std::string& path, const std::string& named, int64_t* size) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw os_error(fmt::format("cannot read {}", named), errno);
  if (!S_ISREG(st.st_mode)) throw std::runtime_error(not_regular(named, st.st_mode));
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0)
    throw os_error(fmt::format("cannot read {}", named), errno);
  if (!S_ISREG(st.st_mode)) throw std::runtime_error(not_regular(named, st.st_mode));
  *size = static_cast<int64_t>(st.st_size);
  return fd;
}

// Read to the end; a file that shrank meanwhile is returned as it was read.
std::string read_regular(const std::string& path, const std::string& named, int64_t max_bytes) {
  int64_t size = 0;
  UniqueFd fd = open_regular(path, named, &size);
  auto too_big = [&](int64_t bytes) {
    return std::runtime_error(
        fmt::format("{} is {} bytes, more than the {} bytes allowed", named, bytes, max_bytes));
  };
  if (size > max_bytes) throw too_big(size);
  // to the end, not to the stated size: /proc files state 0 and a growing file more later
  std::string bytes(static_cast<size_t>(size) + 1, '\0');
  size_t done = 0;
  for (;;) {
    if (done == bytes.size()) bytes.resize(bytes.size() * 2);
    const ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw os_error(fmt::format("cannot read {}", named), errno);
    if (n == 0) break;
    done += static_cast<size_t>(n);
    if (static_cast<int64_t>(done) > max_bytes) throw too_big(static_cast<int64_t>(done));
  }
  bytes.resize(done);
  return bytes;
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

}  // namespace io::posix
