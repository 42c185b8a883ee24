#pragma once
// Whole-file I/O with POSIX calls, so every failure is an errno message naming the file.
#include <string>

namespace io {

// Writes bytes to a temporary file in path's folder, fsyncs it, renames it over path and
// fsyncs the folder. On any failure the temporary file is removed, path keeps its old
// contents and std::runtime_error says what failed ("No space left on device", ...).
// Temporary files left by writers that were killed (SIGKILL, power loss) are removed.
void write_file_atomically(const std::string& path, const std::string& bytes);

// Throws std::runtime_error naming path and the reason when a file cannot be created in
// path's folder (missing, not a folder, read-only): checked before a run starts, so a
// bad --out is found before any work is done.
void check_can_write(const std::string& path);

// The whole file; std::runtime_error naming it when it cannot be read.
std::string read_whole_file(const std::string& path);

}  // namespace io
