#pragma once
// Replacing a file whole, atomically, with POSIX calls (posix_file.h), so every failure is
// an errno message naming the file. io/files.h has the rest of what a run needs to write
// its outputs safely.
//
// Every file made here other than the named output itself is created exclusively
// (O_CREAT|O_EXCL|O_NOFOLLOW with a random name, another one tried when it is taken), so a
// file, folder or symbolic link planted in the output's folder can neither redirect nor
// block a save.
#include <cstddef>
#include <memory>
#include <string>

#include "base/posix_file.h"

namespace base {

// Writes bytes to a temporary file ".NAME.partial-PID-XXXXXX" in path's folder, fsyncs it,
// renames it over path and fsyncs the folder. On any failure the temporary file is removed,
// path keeps its old contents and std::runtime_error says what failed ("No space left on
// device", ...). A new file gets 0666 & ~umask, like any created file; a replaced file keeps
// its permission bits. A path that exists and is not a regular file (a folder, a FIFO, a
// device, a symbolic link) is refused. Temporary files of writers that were killed (SIGKILL,
// power loss) are removed: only regular files of this user whose writer is gone.
void write_file_atomically(const std::string& path, const std::string& bytes);

// The same, for a file too large to hold in memory: written a piece at a time into the
// temporary file, put in place by commit(); destroyed uncommitted (an exception on the
// way), it removes the temporary file and path keeps its old contents.
//
//   base::AtomicFileWriter out("model.safetensors");
//   out.write(header.data(), header.size());   // ... tensor by tensor
//   out.commit();
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);  // refuses what write_file_atomically does
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  void write(const char* data, size_t n);
  void commit();

 private:
  struct TempFile;
  std::string path_;
  mode_t mode_;
  std::unique_ptr<TempFile> tmp_;
  UniqueFd lock_holder_;
};

// Throws std::runtime_error naming path and the reason when path exists and is not a regular
// file, or when a file cannot be created in path's folder (missing, not a folder, read-only):
// checked before a run starts, so a bad output is found before any work is done.
void check_can_write(const std::string& path);

}  // namespace base
