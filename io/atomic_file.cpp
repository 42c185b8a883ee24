#include "io/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace io {

namespace {

std::runtime_error os_error(const std::string& what, int err) {
  return std::runtime_error(fmt::format("{}: {}", what, std::strerror(err)));
}

// Closes the descriptor and removes the temporary file unless the write was committed.
struct TempFile {
  std::string path;
  int fd = -1;
  bool committed = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!committed) ::unlink(path.c_str());
  }
};

namespace fs = std::filesystem;

fs::path folder_of(const fs::path& target) {
  return target.has_parent_path() ? target.parent_path() : fs::path(".");
}

std::string partial_prefix(const fs::path& target) {
  return fmt::format(".{}.partial-", target.filename().string());
}

// ".NAME.partial-PID" files whose writer no longer exists
void remove_stale_partials(const fs::path& target) {
  std::error_code ec;
  const std::string prefix = partial_prefix(target);
  for (const auto& entry : fs::directory_iterator(folder_of(target), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid_text = name.substr(prefix.size());
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stoll(pid_text));
    if (pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) fs::remove(entry.path(), ec);
  }
}

}  // namespace

void check_can_write(const std::string& path) {
  const fs::path target(path);
  if (fs::is_directory(target))
    throw std::runtime_error(fmt::format("cannot write '{}': it is a folder", path));
  const fs::path probe = folder_of(target) / (partial_prefix(target) + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw os_error(fmt::format("cannot write '{}' (creating a file in '{}')", path, folder_of(target).string()), err);
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  const fs::path target(path);
  const fs::path folder = folder_of(target);
  remove_stale_partials(target);
  TempFile tmp;
  tmp.path = (folder / (partial_prefix(target) + std::to_string(::getpid()))).string();
  tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (tmp.fd < 0) {
    const int err = errno;
    throw os_error(fmt::format("cannot write '{}' (creating a temporary file in '{}')", path,
                               folder.string()),
                   err);
  }
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(tmp.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw os_error(fmt::format("cannot write '{}'", path), errno);
    done += static_cast<size_t>(n);
  }
  if (::fsync(tmp.fd) != 0) throw os_error(fmt::format("cannot write '{}' (fsync)", path), errno);
  const int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0) throw os_error(fmt::format("cannot write '{}' (close)", path), errno);
  if (::rename(tmp.path.c_str(), path.c_str()) != 0)
    throw os_error(fmt::format("cannot rename the new checkpoint onto '{}'", path), errno);
  tmp.committed = true;
  // make the rename itself durable
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

std::string read_whole_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw os_error(fmt::format("cannot read '{}'", path), errno);
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error(fmt::format("cannot read '{}': not a regular file", path));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw os_error(fmt::format("cannot read '{}'", path), err);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  bytes.resize(done);
  return bytes;
}

}  // namespace io
