#include "data/posix_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "data/data_error.h"

namespace data::detail {

namespace {

// Writeback of a long output starts every this many bytes, so the final fsync waits for the
// last stretch only and the disk works while the CPU encodes.
constexpr uint64_t kWriteBehindBytes = uint64_t{64} << 20;

[[noreturn]] void fail(const std::string& display, const std::string& what, int err) {
  throw DataError(fmt::format("{}: {}: {}", display, what, errno_text(err)));
}

std::string strip_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// Opens (creating it when missing) the folder `path` without following a symbolic link.
int open_folder(const std::string& path) {
  if (mkdir(path.c_str(), 0777) != 0 && errno != EEXIST) fail(path, "cannot create the folder", errno);
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return fd;
  const int err = errno;
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    throw DataError(fmt::format("{}: is {}, not a folder; refusing to write there", path,
                                file_kind(st.st_mode)));
  fail(path, "cannot open the folder", err);
}

}  // namespace

std::string errno_text(int err) { return std::strerror(err); }

std::string file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// ---- Sha256 ----------------------------------------------------------------------------

Sha256::Sha256() {
  // a digest needs no configuration: OpenSSL is kept from reading openssl.cnf
  static const bool initialised = OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr) == 1;
  ctx_ = initialised ? EVP_MD_CTX_new() : nullptr;
  if (!ctx_ || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_);
    throw std::runtime_error("SHA-256 could not be started (OpenSSL)");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::update(std::string_view bytes) {
  if (EVP_DigestUpdate(ctx_, bytes.data(), bytes.size()) != 1)
    throw std::runtime_error("SHA-256 failed (OpenSSL)");
}

std::string Sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx_, digest, &length) != 1)
    throw std::runtime_error("SHA-256 failed (OpenSSL)");
  std::string out;
  for (unsigned int i = 0; i < length; ++i) out += fmt::format("{:02x}", digest[i]);
  return out;
}

// ---- InputFile -------------------------------------------------------------------------

InputFile::InputFile(const std::string& path, const std::string& display, int dir_fd)
    : display_(display) {
  const int at = dir_fd >= 0 ? dir_fd : AT_FDCWD;
  struct stat st {};
  if (fstatat(at, path.c_str(), &st, 0) != 0) fail(display_, "cannot read", errno);
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))  // a device is never opened
    throw DataError(fmt::format("{}: is {}, not a regular file", display_, file_kind(st.st_mode)));
  fd_ = openat(at, path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd_ < 0) fail(display_, "cannot open", errno);
  if (fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    fail(display_, "cannot read", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw DataError(fmt::format("{}: is {}, not a regular file", display_, file_kind(st.st_mode)));
  }
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  size_ = static_cast<uint64_t>(st.st_size);
  dev_ = st.st_dev;
  ino_ = st.st_ino;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

size_t InputFile::read(char* buffer, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd_, buffer + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(display_, "read failed", errno);
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

std::string InputFile::read_all(uint64_t max_bytes) {
  if (size_ > max_bytes)
    throw DataError(fmt::format("{}: {} bytes is more than the {} such a file may have", display_,
                                size_, max_bytes));
  std::string bytes(size_, '\0');
  bytes.resize(read(bytes.data(), bytes.size()));
  char extra;
  if (bytes.size() != size_ || read(&extra, 1) != 0)
    throw DataError(fmt::format("{}: the file changed size while it was read", display_));
  return bytes;
}

// ---- OutputFolder ----------------------------------------------------------------------

OutputFolder::OutputFolder(const std::string& path, const std::vector<std::string>& own_names)
    : path_(strip_trailing_slashes(path)) {
  if (path_.empty()) throw DataError("the output folder has an empty name");
  fd_ = open_folder(path_);
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    if (err == EWOULDBLOCK)
      throw DataError(fmt::format("{}: another process is writing this folder; wait for it or "
                                  "choose another output folder",
                                  path_));
    fail(path_, "cannot lock the folder", err);
  }
  try {
    check_entries(own_names);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

OutputFolder::~OutputFolder() { ::close(fd_); }

// Lists the folder: only own names and leftover temporary files may be there (the latter
// are removed: under the lock, no live writer owns them).
void OutputFolder::check_entries(const std::vector<std::string>& own_names) {
  DIR* dir = fdopendir(dup(fd_));
  if (!dir) fail(path_, "cannot list the folder", errno);
  std::vector<std::string> leftovers;
  std::string foreign;
  while (const dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    const bool regular = fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                         S_ISREG(st.st_mode);
    bool ours = false, temp = false;
    for (const std::string& own : own_names) {
      ours = ours || name == own;
      temp = temp || TempFile::is_temp_name(name, own);
    }
    if (regular && ours) entries_.push_back({name, st.st_dev, st.st_ino});
    else if (regular && temp) leftovers.push_back(name);
    else if (foreign.empty() || name < foreign) foreign = name;
  }
  closedir(dir);
  if (!foreign.empty())
    throw DataError(fmt::format(
        "{}: the folder holds '{}', which is not part of a prepared folder; refusing to write "
        "into a folder that is not empty (choose a new or empty folder)",
        path_, foreign));
  for (const std::string& name : leftovers) unlinkat(fd_, name.c_str(), 0);
}

std::string OutputFolder::entry_of(dev_t dev, ino_t ino) const {
  for (const Entry& e : entries_)
    if (e.dev == dev && e.ino == ino) return e.name;
  return "";
}

void OutputFolder::remove(const std::string& name) {
  if (unlinkat(fd_, name.c_str(), 0) != 0 && errno != ENOENT)
    fail(display(name), "cannot remove", errno);
}

void OutputFolder::sync() {
  if (fsync(fd_) != 0) fail(path_, "cannot sync the folder", errno);
}

// ---- TempFile --------------------------------------------------------------------------

bool TempFile::is_temp_name(std::string_view entry, std::string_view name) {
  const std::string prefix = fmt::format(".{}.partial-", name);
  return entry.size() > prefix.size() && entry.substr(0, prefix.size()) == prefix;
}

TempFile::TempFile(OutputFolder& folder, std::string name)
    : folder_(folder), name_(std::move(name)) {
  std::random_device random;
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    temp_ = fmt::format(".{}.partial-{}-{:08x}", name_, getpid(), random());
    fd_ = openat(folder_.fd(), temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                 0666);
    if (fd_ < 0 && errno != EEXIST) fail(folder_.display(temp_), "cannot create", errno);
  }
  if (fd_ < 0) fail(folder_.display(temp_), "cannot create", EEXIST);
}

TempFile::~TempFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) unlinkat(folder_.fd(), temp_.c_str(), 0);
}

void TempFile::write(const void* bytes, size_t n) {
  const char* p = static_cast<const char*>(bytes);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail(folder_.display(name_), "write failed", errno);
    p += w, n -= static_cast<size_t>(w), written_ += static_cast<uint64_t>(w);
  }
  if (written_ - flushed_ >= kWriteBehindBytes) {  // a hint: failures show up at fsync
    sync_file_range(fd_, static_cast<off_t>(flushed_), static_cast<off_t>(written_ - flushed_),
                    SYNC_FILE_RANGE_WRITE);
    flushed_ = written_;
  }
}

void TempFile::close(bool sync) {
  if (sync && fsync(fd_) != 0) fail(folder_.display(name_), "cannot sync", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(folder_.display(name_), "write failed", errno);
}

void TempFile::commit() {
  if (renameat(folder_.fd(), temp_.c_str(), folder_.fd(), name_.c_str()) != 0)
    fail(folder_.display(name_), "cannot rename the finished file into place", errno);
  committed_ = true;
}

}  // namespace data::detail
