#pragma once
// File handling for data/ (internal to the library), on base/posix_file.h: inputs opened
// only when they are regular files, prepared folders read under a shared lock and written
// under an exclusive one, outputs created exclusively and renamed into place, and streamed
// SHA-256. Every error is a DataError naming the file and the errno reason.
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/posix_file.h"

struct evp_md_ctx_st;

namespace data::detail {

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

// What identifies a file's version: a source whose stamp changes between the passes of a
// prepare was replaced or edited meanwhile.
struct FileStamp {
  dev_t dev = 0;
  ino_t ino = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

// Reads exactly `bytes` at `offset` of fd, or throws a DataError naming the file and the
// byte offset: a file shorter than when it was opened (changed in place), or a read error.
void read_exactly(int fd, const std::string& name, char* p, size_t bytes, uint64_t offset);

// A file opened read-only after checking that it is a regular file (base::open_regular: a
// FIFO or a device is refused unopened).
class InputFile {
 public:
  // `display` names the file in messages. With dir_fd, `path` is a name in that folder and
  // a symbolic link there is refused rather than followed.
  InputFile(const std::string& path, const std::string& display, int dir_fd = -1);
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int fd() const { return fd_.get(); }
  uint64_t size() const { return stamp_.size; }      // when opened
  const FileStamp& stamp() const { return stamp_; }  // when opened
  FileStamp stamp_now() const;                       // fstat now
  const std::string& display() const { return display_; }
  // Reads up to n bytes (fewer only at the end of the file); 0 at the end.
  size_t read(char* buffer, size_t n);
  // The whole file, refused when larger than max_bytes (a hostile file must not exhaust
  // memory) or when it changes size while read.
  std::string read_all(uint64_t max_bytes);

 private:
  base::UniqueFd fd_;
  FileStamp stamp_;
  std::string display_;
};

// A prepared folder opened for reading under a shared lock (flock), so a prepare writing
// it at the same time is noticed instead of read half-written. The lock is released when
// this is destroyed; what was mapped meanwhile stays valid (renames never touch it).
class InputFolder {
 public:
  explicit InputFolder(const std::string& path);
  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  std::string display(const std::string& name) const { return path_ + "/" + name; }
  bool has(const std::string& name) const;  // an entry of that name, of any kind

 private:
  base::UniqueFd fd_;
  std::string path_;
};

// The folder a prepare writes: opened without following a symbolic link, created when
// missing, and held under an exclusive flock so two writers never share it. A folder with
// anything but `own_names` (regular files) and the temporary files of earlier writers is
// refused, so a user's folder is never written into. A folder it made is removed again when
// it is destroyed holding nothing (a prepare that failed or was stopped leaves no folder).
class OutputFolder {
 public:
  OutputFolder(const std::string& path, const std::vector<std::string>& own_names);
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  std::string display(const std::string& name) const { return path_ + "/" + name; }
  bool has(const std::string& name) const;         // an own name present when opened
  bool empty() const { return entries_.empty(); }  // nothing but leftovers (or nothing)
  // The name of the entry (own file or leftover) that is this file, or "".
  std::string entry_of(dev_t dev, ino_t ino) const;
  // Removes the temporary files earlier writers left (under the lock, no live writer owns
  // them); call it after checking that none of them is an input.
  void remove_leftovers();
  void remove(const std::string& name);  // a missing name is fine
  void sync();                           // fsync the folder itself

 private:
  struct Entry {
    std::string name;
    dev_t dev;
    ino_t ino;
  };
  void check_entries(const std::vector<std::string>& own_names);
  base::UniqueFd fd_;
  std::string path_;
  bool made_ = false;  // created by this writer: removed when it is left empty
  std::vector<Entry> entries_, leftovers_;
};

// A temporary file ".NAME.partial-PID-XXXXXX" created exclusively (base::create_exclusive)
// in an OutputFolder; commit() renames it to NAME. Removed when destroyed uncommitted.
//
// Writes are buffered: a full buffer goes to a background thread while the caller fills
// the other, so encoding and writing overlap. Where the file system allows, the buffers
// are written with O_DIRECT, which costs the CPU no copy into the page cache (on a 2-core
// machine, that copy is a large part of preparing a corpus) and leaves the cache alone.
class TempFile {
 public:
  TempFile(OutputFolder& folder, std::string name);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const void* bytes, size_t n);
  uint64_t bytes_written() const { return written_; }
  // Writes what is buffered and closes the file, after an fsync when `sync` (the bytes are
  // on disk before any rename).
  void close(bool sync);
  void commit();  // renames over NAME; close() first
  // The SHA-256 of every byte written (hashed in the background, in order, as the buffers
  // leave), once closed.
  const std::string& sha256() const { return sha256_; }
  // The finished file, opened for reading (its temporary name until commit()); close() first.
  int open_for_reading() const;

  static bool is_temp_name(std::string_view entry, std::string_view name);
  // kBuffers buffers of kBufferBytes: all but the one being filled may be in flight, which
  // keeps a virtual disk's queue busy.
  static constexpr size_t kBufferBytes = size_t{4} << 20;
  static constexpr int kBuffers = 3;

 private:
  struct Buffer;
  void launch();         // hands the full buffer to the background and moves to the next
  void wait(Buffer& b);  // for b's write, if in flight; rethrows its error
  void write_out(const char* bytes, size_t n, uint64_t offset);

  OutputFolder& folder_;
  std::string name_, temp_;
  int fd_ = -1;
  std::atomic<bool> direct_ = false;
  uint64_t written_ = 0, file_bytes_ = 0;
  std::unique_ptr<Buffer> buffers_[kBuffers];
  int current_ = 0;
  bool committed_ = false;
  Sha256 sha_;
  std::shared_future<void> last_hash_;  // the last buffer's hash, which waits for the others'
  std::string sha256_;
};

}  // namespace data::detail
