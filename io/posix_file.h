#pragma once
// Small POSIX helpers shared by io/'s file code (not part of io's public map): a descriptor
// that closes itself, errno messages, names that fit in NAME_MAX and what a file is.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace io::posix {

// Owns a file descriptor; closes it when destroyed.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  // Closes now; returns close()'s errno, 0 when it succeeded (a late write error shows here).
  int reset();

 private:
  int fd_ = -1;
};

// "what: strerror(err)"
std::runtime_error os_error(const std::string& what, int err);

// "a folder", "a symbolic link", "a FIFO", "a character device", ... for st_mode's file type.
std::string file_kind(mode_t mode);

// name itself when it has at most max_bytes bytes; otherwise its start, cut on a UTF-8
// character boundary, then "~" and 8 hex digits of a hash of the whole name, so that two
// long names with a common start still get different short names.
std::string fit_name(const std::string& name, size_t max_bytes);

// The folder holding path ("." for a bare file name).
std::string folder_of(const std::string& path);

// The last component of path ("" when path ends in '/').
std::string base_name(const std::string& path);

// The process's umask, read without changing it when /proc allows (umask() cannot be read
// without being set, which would race with other threads creating files).
mode_t current_umask();

// Opens path for reading only once stat() says it is a regular file (a FIFO or a device is
// never opened), then checks the descriptor too in case the file was swapped in between.
// named ("data file 'x'") starts the messages; *size gets the file's size.
UniqueFd open_regular(const std::string& path, const std::string& named, int64_t* size);

// The whole of the file open_regular opens, read to its end; refused when larger
// than max_bytes.
std::string read_regular(const std::string& path, const std::string& named, int64_t max_bytes);

}  // namespace io::posix
