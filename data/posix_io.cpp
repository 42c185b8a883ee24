// Inputs of data/: SHA-256, regular files, prepared folders read under a shared lock.
#include "data/posix_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "data/data_error.h"

namespace data::detail {

namespace {

[[noreturn]] void fail(const std::string& display, const std::string& what, int err) {
  throw DataSystemError(fmt::format("{}: {}: {}", display, what, std::strerror(err)));
}

FileStamp stamp_of(const struct stat& st) {
  return {st.st_dev, st.st_ino, static_cast<uint64_t>(st.st_size),
          int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
}

[[noreturn]] void not_regular(const std::string& display, mode_t mode) {
  if (S_ISLNK(mode))
    throw DataError(
        fmt::format("{}: is a symbolic link; attograd reads a folder's files only when "
                    "they are regular files, and follows no link there",
                    display));
  throw DataError(fmt::format("{}: is {}, not a regular file", display, base::file_kind(mode)));
}

}  // namespace

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

Sha256::~Sha256() {
  EVP_MD_CTX_free(ctx_);
}

void Sha256::update(std::string_view bytes) {
  if (EVP_DigestUpdate(ctx_, bytes.data(), bytes.size()) != 1)
    throw std::runtime_error("SHA-256 failed (OpenSSL)");
}

std::string Sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx_, digest, &length) != 1)
    throw std::runtime_error("SHA-256 failed (OpenSSL)");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) out += {kHex[digest[i] >> 4], kHex[digest[i] & 15]};
  return out;
}

// ---- InputFile -------------------------------------------------------------------------

InputFile::InputFile(const std::string& path, const std::string& display, int dir_fd)
    : display_(display) {
  struct stat st {};
  try {
    fd_ = base::open_regular(path, display_, &st, dir_fd);
  } catch (const base::FileError& e) {
    if (e.kind == base::FileError::Kind::not_regular) not_regular(display_, e.mode);
    fail(display_, "cannot read", e.err);
  }
  stamp_ = stamp_of(st);
}

FileStamp InputFile::stamp_now() const {
  struct stat st {};
  if (fstat(fd_.get(), &st) != 0) fail(display_, "cannot read", errno);
  return stamp_of(st);
}

size_t InputFile::read(char* buffer, size_t n) {
  const ssize_t got = base::read_full(fd_.get(), buffer, n);
  if (got < 0) fail(display_, "read failed", errno);
  return static_cast<size_t>(got);
}

std::string InputFile::read_all(uint64_t max_bytes) {
  if (size() > max_bytes)
    throw DataError(fmt::format("{}: {} bytes is more than the {} such a file may have", display_,
                                size(), max_bytes));
  const std::string changed = fmt::format("{}: the file changed size while it was read", display_);
  std::string bytes;
  try {  // to the end, refusing a byte more than the file had when it was opened
    bytes = base::read_to_end(fd_.get(), display_, size(), size());
  } catch (const base::FileError& e) {
    if (e.kind == base::FileError::Kind::os) fail(display_, "read failed", e.err);
    throw DataError(changed);
  }
  if (bytes.size() != size()) throw DataError(changed);
  return bytes;
}

// ---- InputFolder -----------------------------------------------------------------------

InputFolder::InputFolder(const std::string& path) : path_(path) {
  while (path_.size() > 1 && path_.back() == '/') path_.pop_back();
  fd_ = base::UniqueFd(open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd_.valid()) {
    const int err = errno;
    struct stat st {};
    if (err == ENOTDIR && stat(path_.c_str(), &st) == 0)
      throw DataError(
          fmt::format("{}: is {}, not a prepared folder", path_, base::file_kind(st.st_mode)));
    fail(path_, "cannot open the folder", err);
  }
  if (flock(fd_.get(), LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK)
    throw DataError(
        fmt::format("{}: a prepare is writing this folder now; wait for it to finish", path_));
  // other flock errors (a file system without locks) leave the folder unlocked
}

bool InputFolder::has(const std::string& name) const {
  struct stat st {};
  return fstatat(fd_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
}

void read_exactly(int fd, const std::string& name, char* p, size_t bytes, uint64_t offset) {
  const ssize_t r = base::pread_full(fd, p, bytes, offset);
  if (r == static_cast<ssize_t>(bytes)) return;
  const int err = errno;
  throw DataError(fmt::format("{}: {} at byte {}", name,
                              r >= 0 ? "the file is shorter than when it was opened "
                                       "(it was changed in place)"
                                     : std::string("read failed: ") + std::strerror(err),
                              offset + static_cast<uint64_t>(std::max<ssize_t>(r, 0))));
}

}  // namespace data::detail
