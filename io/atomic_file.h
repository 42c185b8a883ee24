#pragma once
// Whole-file I/O with POSIX calls, so every failure is an errno message naming the file.
#include <string>

namespace io {

// Writes bytes to a temporary file in path's folder, fsyncs it, renames it over path and
// fsyncs the folder. On any failure the temporary file is removed, path keeps its old
// contents and std::runtime_error says what failed ("No space left on device", ...).
void write_file_atomically(const std::string& path, const std::string& bytes);

// The whole file; std::runtime_error naming it when it cannot be read.
std::string read_whole_file(const std::string& path);

}  // namespace io
