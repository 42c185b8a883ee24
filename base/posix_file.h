#pragma once
// The POSIX file layer every folder uses for files from elsewhere: a descriptor that closes
// itself, errno messages, what a file is, inputs opened only when they are regular files
// and read to their end under a size cap, and files created exclusively under a fresh name.
// (atomic_file.h replaces a file whole on top of these.)
//
//   std::string text = base::read_input_file(path, "data file", 1 << 20);
//   // "data file 'x' is not a regular file (a FIFO)", "... is 5 bytes, more than the 4 ..."
//   struct stat st;
//   base::UniqueFd fd = base::open_regular(name, "'" + name + "'", &st, folder_fd);
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace base {

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

// Why an input was refused. what() is worded for `named` ("cannot read data file 'x': No
// such file or directory", "data file 'x' is not a regular file (a FIFO)", "data file 'x'
// is 5 bytes, more than the 4 bytes allowed"); a reader with its own wording words it from
// the fields.
struct FileError : std::runtime_error {
  enum class Kind { os, not_regular, too_big };
  FileError(Kind k, const std::string& what, int error, mode_t file_mode, uint64_t size)
      : std::runtime_error(what), kind(k), err(error), mode(file_mode), bytes(size) {}
  Kind kind;
  int err;         // os: the errno
  mode_t mode;     // not_regular: the file's type
  uint64_t bytes;  // too_big: the size found
};

// Opens path for reading only once it is a regular file: its type is checked before it is
// opened (a FIFO or a device is never opened, so it can neither block nor act), then again
// on the descriptor in case the file was swapped in between. With dir_fd >= 0, path is a
// name in that folder and a symbolic link there is refused rather than followed. *st gets
// the file's status. Throws FileError.
UniqueFd open_regular(const std::string& path, const std::string& named, struct stat* st,
                      int dir_fd = -1);

// Reads up to n bytes (fewer only at the end of the file); -1 with errno on an error.
ssize_t read_full(int fd, char* buffer, size_t n);
// The same at `offset` (pread, the file position untouched).
ssize_t pread_full(int fd, char* buffer, size_t n, uint64_t offset);

// The rest of fd, read to its end, not to a stated size (/proc files state 0, a growing
// file more later); more than max_bytes is refused (FileError too_big). size_hint sizes
// the first buffer.
std::string read_to_end(int fd, const std::string& named, uint64_t max_bytes,
                        uint64_t size_hint = 0);

// The contents of an input file; what says what it is ("data file", "config file") for the
// messages. Anything that is not a regular file is refused before it is opened ("data file
// '/dev/zero' is not a regular file (a character device)"; "(a folder)", "(a FIFO)"), so a
// FIFO or a device never blocks or floods the reader; so is a file over max_bytes. Memory:
// one buffer of the file's size. Throws FileError.
std::string read_input_file(const std::string& path, const std::string& what,
                            int64_t max_bytes = std::numeric_limits<int64_t>::max());

// The size in bytes of the file read_input_file(path, what) would read, with the same checks
// and messages: the memory plan counts a file before it is read.
int64_t regular_file_size(const std::string& path, const std::string& what);

// What create_exclusive adds to its prefix, "PID-XXXXXX": at most this many bytes.
inline constexpr size_t kPidDigits = 10;  // the longest pid_t
inline constexpr size_t kExclusiveSuffixBytes = kPidDigits + 1 + 6;

// Creates prefix + "PID-XXXXXX" (6 random letters and digits) exclusively, relative to
// dir_fd (AT_FDCWD: prefix may hold a folder): open flags | O_CREAT | O_EXCL | O_NOFOLLOW |
// O_CLOEXEC, so an existing file is never opened and a link never followed; a taken name
// (a planted file, folder or link included) is skipped for another. Returns the descriptor
// and sets *made to the name, or returns -1 with errno set.
int create_exclusive(int dir_fd, const std::string& prefix, int flags, mode_t mode,
                     std::string* made);

}  // namespace base
