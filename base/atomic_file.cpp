#include "base/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>

#include "base/abandoned_partials.h"
#include "base/partial_outputs.h"
#include "base/posix_file.h"

namespace base {

namespace {

namespace fs = std::filesystem;

constexpr char kPartialTag[] = ".partial-";

// ".NAME.partial-", NAME cut so that a whole temporary name (PID and random suffix included)
// fits in NAME_MAX however long the output's name is
std::string partial_prefix(const std::string& path) {
  constexpr size_t room = NAME_MAX - 1 - (sizeof(kPartialTag) - 1) - kExclusiveSuffixBytes;
  return fmt::format(".{}{}", fit_name(base_name(path), room), kPartialTag);
}

// Creates a temporary file beside path (create_exclusive); -1 with errno when it cannot.
int create_partial(const std::string& path, std::string* made) {
  const std::string prefix = (fs::path(folder_of(path)) / partial_prefix(path)).string();
  return create_exclusive(AT_FDCWD, prefix, O_RDWR, 0600, made);
}

std::string refusal(const std::string& path, mode_t mode) {
  if (S_ISLNK(mode))
    return fmt::format(
        "cannot write '{}': it is a symbolic link; attograd neither writes through a link nor "
        "replaces one (name the file it points to instead)",
        path);
  if (S_ISDIR(mode)) return fmt::format("cannot write '{}': it is a folder", path);
  return fmt::format("cannot write '{}': it is {}, not a regular file", path, file_kind(mode));
}

// The permission bits the written file gets: those of the file it replaces, or 0666 less the
// umask for a new one, as open() would give. Refuses a path that exists and is not a regular
// file: renaming over a link would silently replace it, and a planted link is the attack.
mode_t output_mode(const std::string& path) {
  if (base_name(path).empty())
    throw std::runtime_error(fmt::format("cannot write '{}': it names a folder", path));
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    // a missing folder is reported by the file creation, with the folder's name
    if (errno == ENOENT || errno == ENOTDIR) return 0666 & ~current_umask();
    throw os_error(fmt::format("cannot write '{}'", path), errno);
  }
  if (!S_ISREG(st.st_mode)) throw std::runtime_error(refusal(path, st.st_mode));
  return st.st_mode & 0777;
}

// Whether the writer of a ".NAME.partial-PID[-XXXXXX]" file is gone; rest follows the prefix.
bool writer_is_gone(const std::string& rest) {
  const size_t digits = std::min(rest.find_first_not_of("0123456789"), rest.size());
  if (digits == 0 || digits > kPidDigits || (digits < rest.size() && rest[digits] != '-'))
    return false;
  const long long pid = std::stoll(rest.substr(0, digits));
  if (pid <= 0 || pid > INT_MAX || pid == ::getpid()) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// A leftover of a killed writer: a regular file of this user (a link is never followed nor
// removed) that no process holds locked. Writers lock their temporary file, which protects
// one whose PID means nothing here (a writer in another PID namespace sharing the folder).
bool is_abandoned(int dir, const char* name) {
  struct stat st;
  if (::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) return false;
  UniqueFd fd(::openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return true;  // unreadable (mode 000): the dead PID alone decides
  struct stat opened;
  if (::fstat(fd.get(), &opened) != 0 || opened.st_dev != st.st_dev || opened.st_ino != st.st_ino)
    return false;
  return ::flock(fd.get(), LOCK_EX | LOCK_NB) == 0;
}

// Calls remove(folder descriptor, name) for each ".NAME.partial-PID-..." beside path whose
// writer is gone. Best effort and never an error: a save must not fail over someone else's
// leftovers.
template <typename Remove>
void for_each_stale_partial(const std::string& path, Remove remove) noexcept {
  try {
    const std::string prefix = partial_prefix(path);
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(folder_of(path).c_str()), ::closedir);
    if (!dir) return;
    while (const dirent* e = ::readdir(dir.get())) {
      const std::string name = e->d_name;
      if (name.rfind(prefix, 0) == 0 && writer_is_gone(name.substr(prefix.size())))
        remove(::dirfd(dir.get()), e->d_name);
    }
  } catch (...) {
  }
}

// Whether an entry of the folder dir is ".NAME.partial-PID-..." of a writer that is gone
// and no process holds it locked: what a killed writer left (is_abandoned_partial).
bool is_abandoned_entry(int dir, const std::string& name) {
  const size_t tag = name.rfind(kPartialTag);
  return tag != std::string::npos && tag > 0 && name.front() == '.' &&
         writer_is_gone(name.substr(tag + sizeof(kPartialTag) - 1)) &&
         is_abandoned(dir, name.c_str());
}

void remove_stale_partials(const std::string& path) noexcept {
  for_each_stale_partial(path, [](int dir, const char* name) {
    if (is_abandoned(dir, name)) ::unlinkat(dir, name, 0);
  });
}

// Closes the descriptor and removes the temporary file unless the write was committed.
struct TempFile {
  std::string path;
  UniqueFd fd;
  bool committed = false;
  std::optional<PartialPath> on_signal;  // removed by a fatal signal's handler too
  ~TempFile() {
    fd.reset();
    if (!committed && !path.empty()) ::unlink(path.c_str());
  }
};

void write_all(int fd, const char* bytes, size_t size, const std::string& path) {
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw os_error(fmt::format("cannot write '{}'", path), errno);
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void BufferedWriter::write(const char* data, size_t n) {
  if (buffer_.size() + n > kBufferBytes) flush();
  if (n >= kBufferBytes)
    write_all(fd_, data, n, path_);
  else
    buffer_.append(data, n);
}

void BufferedWriter::flush() {
  write_all(fd_, buffer_.data(), buffer_.size(), path_);
  buffer_.clear();
}

void check_can_write(const std::string& path) {
  output_mode(path);
  const std::string folder = folder_of(path);
  std::string probe;
  UniqueFd fd(create_partial(path, &probe));
  if (!fd.valid())
    throw os_error(fmt::format("cannot write '{}' (creating a file in '{}')", path, folder), errno);
  ::unlink(probe.c_str());
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  write_file_atomically(path, [&](int fd) { write_all(fd, bytes.data(), bytes.size(), path); });
}

void write_file_atomically(const std::string& path, const std::function<void(int fd)>& write) {
  const mode_t mode = output_mode(path);
  const std::string folder = folder_of(path);
  remove_stale_partials(path);
  TempFile tmp;
  tmp.fd = UniqueFd(create_partial(path, &tmp.path));
  if (!tmp.fd.valid())
    throw os_error(
        fmt::format("cannot write '{}' (creating a temporary file in '{}')", path, folder), errno);
  tmp.on_signal.emplace(tmp.path);
  // held until the rename (a dup shares the lock), so no cleaner removes the file meanwhile
  ::flock(tmp.fd.get(), LOCK_EX | LOCK_NB);
  UniqueFd lock_holder(::dup(tmp.fd.get()));
  write(tmp.fd.get());
  ::fchmod(tmp.fd.get(), mode);  // if this fails the file stays 0600: stricter, never looser
  if (::fsync(tmp.fd.get()) != 0)
    throw os_error(fmt::format("cannot write '{}' (fsync)", path), errno);
  if (const int err = tmp.fd.reset())
    throw os_error(fmt::format("cannot write '{}' (close)", path), err);
  if (::rename(tmp.path.c_str(), path.c_str()) != 0)
    throw os_error(fmt::format("cannot rename the new checkpoint onto '{}'", path), errno);
  tmp.committed = true;
  tmp.on_signal.reset();
  // make the rename itself durable
  UniqueFd dir(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.valid()) ::fsync(dir.get());
}

}  // namespace base

namespace base {

namespace {

// A stale partial folder: this user's, of a writer that is gone, locked by nobody. Its
// files are that writer's; anything else in it (a folder) keeps it where it is.
void remove_abandoned_folder(int parent, const char* name) {
  struct stat st;
  if (::fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) return;
  UniqueFd dir(::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.valid() || ::flock(dir.get(), LOCK_EX | LOCK_NB) != 0) return;
  std::unique_ptr<DIR, int (*)(DIR*)> list(::fdopendir(::dup(dir.get())), ::closedir);
  if (!list) return;
  while (const dirent* e = ::readdir(list.get()))
    if (e->d_type != DT_DIR) ::unlinkat(dir.get(), e->d_name, 0);
  ::unlinkat(parent, name, AT_REMOVEDIR);
}

void remove_stale_partial_folders(const std::string& path) noexcept {
  for_each_stale_partial(path, remove_abandoned_folder);
}

// A fresh "prefix + PID-XXXXXX" folder (mkdtemp), or std::runtime_error naming path.
std::string make_partial_folder(const std::string& path) {
  std::string made = (fs::path(folder_of(path)) / partial_prefix(path)).string();
  made += fmt::format("{}-XXXXXX", ::getpid());
  if (!::mkdtemp(made.data()))
    throw os_error(
        fmt::format("cannot write '{}' (making a folder in '{}')", path, folder_of(path)), errno);
  ::chmod(made.c_str(), 0777 & ~current_umask());
  return made;
}

void remove_folder(const std::string& path) noexcept {
  std::error_code ec;
  fs::remove_all(path, ec);  // links inside are removed, never followed
}

// Where a folder output goes: path, which must be missing or (unless replace) an empty folder.
std::string folder_target(const std::string& path, bool replace) {
  std::string target = fs::path(path).lexically_normal().string();
  while (target.size() > 1 && target.back() == '/') target.pop_back();  // "run-hf/" is run-hf
  struct stat st;
  if (::lstat(target.c_str(), &st) != 0) {
    if (errno == ENOENT) return target;
    throw os_error(fmt::format("cannot write '{}'", path), errno);
  }
  if (!S_ISDIR(st.st_mode)) throw std::runtime_error(refusal(path, st.st_mode));
  if (!replace) remove_abandoned_partials_in(target);
  std::error_code ec;
  if (!replace && !fs::is_empty(target, ec))
    throw std::runtime_error(
        fmt::format("cannot write '{}': it is a folder that is not empty", path));
  return target;
}

}  // namespace

bool is_abandoned_partial(const std::string& path) {
  UniqueFd dir(::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  return dir.valid() && is_abandoned_entry(dir.get(), base_name(path));
}

void remove_abandoned_partials_in(const std::string& folder) noexcept {
  try {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(folder.c_str()), ::closedir);
    if (!dir) return;
    while (const dirent* e = ::readdir(dir.get()))
      if (is_abandoned_entry(::dirfd(dir.get()), e->d_name))
        ::unlinkat(::dirfd(dir.get()), e->d_name, 0);
  } catch (...) {
  }
}

void write_folder_atomically(const std::string& path,
                             const std::function<void(const std::string& folder)>& write,
                             bool replace) {
  const std::string target = folder_target(path, replace);
  remove_stale_partial_folders(target);
  const std::string made = make_partial_folder(target);
  PartialPath on_signal(made, PartialPath::Kind::folder);
  struct Cleanup {
    const std::string& path;
    bool kept = false;
    ~Cleanup() {
      if (!kept) remove_folder(path);
    }
  } cleanup{made};
  UniqueFd lock(::open(made.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (lock.valid()) ::flock(lock.get(), LOCK_EX | LOCK_NB);
  write(made);
  if (::rename(made.c_str(), target.c_str()) == 0) {
    cleanup.kept = true;
    on_signal.release();
  } else if (!(errno == ENOTEMPTY || errno == EEXIST) || !replace ||
             ::renameat2(AT_FDCWD, made.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
    throw os_error(fmt::format("cannot rename the new folder onto '{}'", path), errno);
  }  // else swapped: the old folder is now at `made`, and the cleanup removes it
  UniqueFd parent(::open(folder_of(target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (parent.valid()) ::fsync(parent.get());
}

}  // namespace base
