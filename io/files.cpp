#include "io/files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "base/posix_file.h"

namespace io {

namespace {

namespace fs = std::filesystem;
using base::os_error;
using base::UniqueFd;

constexpr char kLockTag[] = ".lock";
constexpr int kLockAttempts = 100;

// The locks this process holds, for a child that takes them over (OutputLock).
std::vector<OutputLock*>& held_locks() {
  static std::vector<OutputLock*> locks;
  return locks;
}

// The path with links and ".." resolved as far as it exists, for paths not there yet.
std::string resolved(const std::string& path) {
  std::error_code ec;
  const fs::path r = fs::weakly_canonical(path, ec);
  return ec ? fs::path(path).lexically_normal().string() : r.string();
}

bool still_names(const std::string& path, int fd) {
  struct stat by_fd, by_name;
  return ::fstat(fd, &by_fd) == 0 && ::lstat(path.c_str(), &by_name) == 0 &&
         by_fd.st_dev == by_name.st_dev && by_fd.st_ino == by_name.st_ino;
}

std::string lock_path_for(const std::string& output) {
  const std::string base = base::base_name(output);
  if (base.empty())
    throw std::runtime_error(fmt::format("cannot lock '{}': it names a folder", output));
  const size_t room = NAME_MAX - 1 - (sizeof(kLockTag) - 1);
  const std::string name = fmt::format(".{}{}", base::fit_name(base, room), kLockTag);
  return (fs::path(base::folder_of(output)) / name).string();
}

std::string lock_refusal(const std::string& output, const std::string& lock, mode_t mode) {
  return fmt::format(
      "cannot lock '{}': its lock file '{}' is {}, not a regular file; remove it if no attograd "
      "run is writing '{}'",
      output, lock, base::file_kind(mode), output);
}

std::string link_refusal(const std::string& output, const std::string& lock, nlink_t links) {
  return fmt::format(
      "cannot lock '{}': its lock file '{}' has {} names (hard links), so it is also another "
      "file, which a lock must never write; remove it if no attograd run is writing '{}'",
      output, lock, links, output);
}

// Why the lock file could not be opened: what is there when it is not a regular file.
[[noreturn]] void open_failed(const std::string& lock, const std::string& output, int err) {
  struct stat st;
  if (::lstat(lock.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw std::runtime_error(lock_refusal(output, lock, st.st_mode));
  throw os_error(fmt::format("cannot lock '{}' (opening '{}')", output, lock), err);
}

// A lock file made by this run: O_EXCL, so nothing planted at the path (a symbolic link, a
// hard link to someone's file) is ever opened for writing. Invalid, with errno EEXIST, when
// a file is there already.
UniqueFd create_lock_file(const std::string& lock, const std::string& output) {
  UniqueFd fd(::open(lock.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd.valid() && errno != EEXIST) open_failed(lock, output, errno);
  return fd;
}

// A lock file this run did not make (another run's, or one a run that died left behind):
// opened read-only, never created, never written, and refused unless it is a regular file
// with one name. Invalid when it vanished meanwhile.
UniqueFd open_existing_lock(const std::string& lock, const std::string& output) {
  UniqueFd fd(::open(lock.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return fd;
    open_failed(lock, output, errno);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    throw os_error(fmt::format("cannot lock '{}' ('{}')", output, lock), errno);
  if (!S_ISREG(st.st_mode)) throw std::runtime_error(lock_refusal(output, lock, st.st_mode));
  if (st.st_nlink != 1) throw std::runtime_error(link_refusal(output, lock, st.st_nlink));
  return fd;
}

// The PID the holder wrote, 0 when it has not written one yet.
pid_t holder_pid(int fd) {
  char text[24] = {};
  if (::pread(fd, text, sizeof text - 1, 0) <= 0) return 0;
  char* end = nullptr;
  const long pid = std::strtol(text, &end, 10);
  return end != text && pid > 0 && pid <= INT_MAX ? static_cast<pid_t>(pid) : 0;
}

void write_pid(int fd) {
  const std::string text = fmt::format("{}\n", ::getpid());
  // written before the truncation, so a reader never finds the file empty in between
  if (::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) return;
  [[maybe_unused]] const int ignored = ::ftruncate(fd, static_cast<off_t>(text.size()));
}

std::string busy(const std::string& output, const std::string& option_name, pid_t holder) {
  return fmt::format(
      "'{}' is being written by another attograd run{}; wait for it or choose another {}", output,
      holder > 0 ? fmt::format(" (PID {})", holder) : std::string(), option_name);
}

std::string output_refusal(const std::string& named, mode_t mode) {
  if (S_ISLNK(mode))
    return fmt::format(
        "{} is a symbolic link; attograd does not write through links (name the file it points "
        "to instead)",
        named);
  return fmt::format("{} is not a regular file ({})", named, base::file_kind(mode));
}

}  // namespace

bool is_hdf5_file(const std::string& path) {
  static constexpr char kSignature[] = "\x89HDF\r\n\x1a\n";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  char head[sizeof kSignature - 1] = {};
  return fd.valid() && ::pread(fd.get(), head, sizeof head, 0) == sizeof head &&
         std::equal(head, head + sizeof head, kSignature);
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  const bool has_a = ::stat(a.c_str(), &sa) == 0;
  const bool has_b = ::stat(b.c_str(), &sb) == 0;
  if (has_a && has_b) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  return !has_a && !has_b && resolved(a) == resolved(b);
}

void refuse_output_over_inputs(const std::string& output, const std::string& option_name,
                               const NamedPaths& inputs) {
  if (output.empty()) return;
  for (const auto& [role, path] : inputs) {
    if (!path.empty() && same_file(output, path))
      throw std::invalid_argument(
          fmt::format("{} '{}' is the same file as {} '{}'; refusing to overwrite an input",
                      option_name, output, role, path));
  }
}

void refuse_shared_outputs(const NamedPaths& outputs) {
  for (size_t j = 1; j < outputs.size(); ++j) {
    for (size_t i = 0; i < j; ++i) {
      const auto& [first_option, first] = outputs[i];
      const auto& [option, path] = outputs[j];
      if (!first.empty() && !path.empty() && same_file(first, path))
        throw std::invalid_argument(
            fmt::format("{} '{}' is the same file as {} '{}'; give each output its own file",
                        option, path, first_option, first));
    }
  }
}

int open_append_output(const std::string& path, const std::string& what) {
  const std::string named = fmt::format("{} '{}'", what, path);
  struct stat st;
  // a FIFO or a device is refused before it is opened; O_NONBLOCK covers a swap in between
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw std::runtime_error(output_refusal(named, st.st_mode));
  UniqueFd fd(::open(path.c_str(),
                     O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666));
  if (!fd.valid()) {
    const int err = errno;
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      throw std::runtime_error(output_refusal(named, st.st_mode));
    throw os_error(fmt::format("cannot open {}", named), err);
  }
  if (::fstat(fd.get(), &st) != 0) throw os_error(fmt::format("cannot open {}", named), errno);
  if (!S_ISREG(st.st_mode)) throw std::runtime_error(output_refusal(named, st.st_mode));
  ::fcntl(fd.get(), F_SETFL, O_APPEND);  // O_NONBLOCK was only for the open
  return fd.release();
}

std::string make_rescue_path(const std::string& out) {
  std::string name = base::base_name(out);
  if (name.empty() || name == "." || name == "..") name = "checkpoint.h5";
  name = base::fit_name(name, NAME_MAX);
  std::vector<std::string> folders;
  const char* env = std::getenv("TMPDIR");
  if (env && *env) folders.emplace_back(env);
  if (folders.empty() || folders[0] != "/tmp") folders.emplace_back("/tmp");
  std::string reasons;
  for (const auto& folder : folders) {
    std::string made =
        (fs::path(folder) / fmt::format("attograd-rescue-{}-XXXXXX", ::getpid())).string();
    if (::mkdtemp(made.data())) return (fs::path(made) / name).string();
    reasons += fmt::format("{}'{}': {}", reasons.empty() ? "" : "; ", folder, std::strerror(errno));
  }
  throw std::runtime_error(
      fmt::format("cannot make a private folder for the rescue copy (in {})", reasons));
}

OutputLock::OutputLock(const std::string& output, const std::string& option_name)
    : lock_path_(lock_path_for(output)), owner_(::getpid()) {
  for (int attempt = 0; attempt < kLockAttempts; ++attempt) {
    UniqueFd fd = create_lock_file(lock_path_, output);
    const bool made = fd.valid();
    if (!made && !(fd = open_existing_lock(lock_path_, output)).valid()) continue;  // vanished
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK)
        throw std::runtime_error(busy(output, option_name, holder_pid(fd.get())));
      throw os_error(fmt::format("cannot lock '{}' ('{}')", output, lock_path_), errno);
    }
    // the previous holder removes the file while still holding it: a lock on a file that is
    // no longer at lock_path_ guards nothing, so open the one there now
    if (!still_names(lock_path_, fd.get())) continue;
    if (!made) {  // nobody holds it: left behind, and replaced by a file of our own
      if (::unlink(lock_path_.c_str()) != 0 && errno != ENOENT)
        throw os_error(fmt::format("cannot lock '{}': cannot remove the lock file '{}' an earlier "
                                   "run left behind",
                                   output, lock_path_),
                       errno);
      continue;
    }
    write_pid(fd.get());
    fd_ = fd.release();
    on_signal_.emplace(lock_path_);
    held_locks().push_back(this);
    return;
  }
  throw std::runtime_error(
      fmt::format("cannot lock '{}': its lock file '{}' keeps being replaced", output, lock_path_));
}

OutputLock::~OutputLock() {
  release();
}

void OutputLock::release() {
  if (fd_ < 0) return;
  on_signal_.reset();
  auto& held = held_locks();
  held.erase(std::remove(held.begin(), held.end(), this), held.end());
  // removed while still locked: the next run makes a fresh file, and one that opened this
  // file meanwhile sees, once it has the lock, that the file is gone and opens the new one
  if (::getpid() == owner_ && still_names(lock_path_, fd_)) ::unlink(lock_path_.c_str());
  ::close(fd_);
  fd_ = -1;
}

void OutputLock::hand_over_held_to_this_process() {
  for (OutputLock* lock : held_locks()) {
    lock->owner_ = ::getpid();
    write_pid(lock->fd_);
  }
}

void OutputLock::release_held() {
  while (!held_locks().empty()) held_locks().back()->release();
}

}  // namespace io
