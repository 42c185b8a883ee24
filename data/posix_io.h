#pragma once
// File handling for data/ (internal to the library): inputs opened only when they are
// regular files, outputs created exclusively in a locked folder and renamed into place,
// and streamed SHA-256. Every error is a DataError naming the file and the errno reason.
// io/ has its own versions for checkpoints; data/ does not depend on io/.
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

struct evp_md_ctx_st;

namespace data::detail {

// "No such file or directory" for an errno value.
std::string errno_text(int err);
// "a folder", "a FIFO", "a symbolic link", ... for a st_mode that is not a regular file.
std::string file_kind(mode_t mode);

// SHA-256 of bytes given in pieces (OpenSSL's EVP, which uses the CPU's SHA instructions).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::string_view bytes);
  std::string hex();  // the 64 lowercase hex digits; ends the hash
 private:
  evp_md_ctx_st* ctx_;
};

// A file opened read-only after checking that it is a regular file: a FIFO is opened
// non-blocking and refused, never read, so it cannot block; a device is refused unopened.
class InputFile {
 public:
  // `display` names the file in messages; with dir_fd, `path` is relative to that folder.
  InputFile(const std::string& path, const std::string& display, int dir_fd = -1);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }  // when opened
  dev_t device() const { return dev_; }
  ino_t inode() const { return ino_; }
  const std::string& display() const { return display_; }
  // Reads up to n bytes (fewer only at the end of the file); 0 at the end.
  size_t read(char* buffer, size_t n);
  // The whole file, refused when larger than max_bytes (a hostile file must not exhaust
  // memory).
  std::string read_all(uint64_t max_bytes);

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  std::string display_;
};

// The folder a prepare writes: opened without following a symbolic link, created when
// missing, and held under an exclusive flock so two writers never share it. A folder with
// anything but `own_names` (regular files) and the temporary files of earlier writers is
// refused, so a user's folder is never written into; those temporary files are removed.
class OutputFolder {
 public:
  OutputFolder(const std::string& path, const std::vector<std::string>& own_names);
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  std::string display(const std::string& name) const { return path_ + "/" + name; }
  // The name of the entry that is this file (by device and inode), or "".
  std::string entry_of(dev_t dev, ino_t ino) const;
  void remove(const std::string& name);  // a missing name is fine
  void sync();                           // fsync the folder itself

 private:
  struct Entry {
    std::string name;
    dev_t dev;
    ino_t ino;
  };
  void check_entries(const std::vector<std::string>& own_names);
  int fd_ = -1;
  std::string path_;
  std::vector<Entry> entries_;
};

// A temporary file ".NAME.partial-PID-XXXXXX" created exclusively (O_EXCL|O_NOFOLLOW) in
// an OutputFolder; commit() renames it to NAME. Removed when destroyed uncommitted.
class TempFile {
 public:
  TempFile(OutputFolder& folder, std::string name);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const void* bytes, size_t n);
  uint64_t bytes_written() const { return written_; }
  // Closes the file, after an fsync when `sync` (the bytes are on disk before any rename).
  void close(bool sync);
  void commit();  // renames over NAME; close() first

  static bool is_temp_name(std::string_view entry, std::string_view name);

 private:
  OutputFolder& folder_;
  std::string name_, temp_;
  int fd_ = -1;
  uint64_t written_ = 0, flushed_ = 0;
  bool committed_ = false;
};

}  // namespace data::detail
