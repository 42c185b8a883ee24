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
#include <functional>
#include <string>
#include <utility>

namespace base {

// Writes bytes to a temporary file ".NAME.partial-PID-XXXXXX" in path's folder, fsyncs it,
// renames it over path and fsyncs the folder. On any failure the temporary file is removed,
// path keeps its old contents and std::runtime_error says what failed ("No space left on
// device", ...). A new file gets 0666 & ~umask, like any created file; a replaced file keeps
// its permission bits. A path that exists and is not a regular file (a folder, a FIFO, a
// device, a symbolic link) is refused. Temporary files of writers that were killed (SIGKILL,
// power loss) are removed: only regular files of this user whose writer is gone.
void write_file_atomically(const std::string& path, const std::string& bytes);
// The same with the contents written by `write` to the temporary file's descriptor (open for
// reading and writing, at offset 0), in as many pieces as it likes: a large file is never
// whole in memory. What `write` throws is passed on, after the temporary file is removed.
void write_file_atomically(const std::string& path, const std::function<void(int fd)>& write);

// A folder written whole: `write` fills a fresh folder ".NAME.partial-PID-XXXXXX" beside
// path (mode 0777 & ~umask, locked while written), which is then renamed onto path. A path
// that exists must be an empty folder, unless `replace`: then the folder there and the new
// one are swapped in one step (renameat2 RENAME_EXCHANGE: path is always one whole folder)
// and the old one is removed after; whether it may be is the caller's decision
// (io/output_rule.h). Folders of writers that are gone are removed first; on a failure or a
// fatal signal the new folder is (partial_outputs.h).
void write_folder_atomically(const std::string& path,
                             const std::function<void(const std::string& folder)>& write,
                             bool replace = false);

// What a write_file_atomically callback streams its pieces through: gathered into writes
// of 1 MiB (a GGUF header of 50,000 short strings is then not 100,000 system calls), each
// failure an errno message naming path. flush() at the end (a destructor cannot report).
//
//   base::write_file_atomically(path, [&](int fd) {
//     base::BufferedWriter out(fd, path);
//     out.write(header.data(), header.size());   // ... tensor by tensor
//     out.flush();
//   });
class BufferedWriter {
 public:
  BufferedWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void write(const char* data, size_t n);
  void flush();

 private:
  static constexpr size_t kBufferBytes = size_t{1} << 20;
  int fd_;
  std::string path_;
  std::string buffer_;
};

// Throws std::runtime_error naming path and the reason when path exists and is not a regular
// file, or when a file cannot be created in path's folder (missing, not a folder, read-only):
// checked before a run starts, so a bad output is found before any work is done.
void check_can_write(const std::string& path);

}  // namespace base
