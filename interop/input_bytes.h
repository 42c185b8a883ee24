#pragma once
// A model file from elsewhere, read a piece at a time at the offsets its own header states
// (see interop.h for the map). Every read is checked against the file's size first, so a
// header that points past the end is an InteropError naming the file and what was being
// read, never a read out of bounds; nothing is mapped (a file truncated meanwhile cannot
// fault) and nothing is held but the pieces asked for. The same reader runs over bytes in
// memory, for the fuzz targets.
//
//   interop::InputBytes in = interop::InputBytes::open("gpt2_124M.bin");
//   in.read(0, header, sizeof header, "the header");
//   interop::Cursor at(in, 24);      // sequential little-endian fields, buffered
//   uint64_t n = at.u64("tensor count");
#include <cstdint>
#include <memory>
#include <string>

#include "base/posix_file.h"

namespace interop {

class InputBytes {
 public:
  // A regular file (anything else is refused before it is opened, base::open_regular); a
  // symbolic link only as hub_cache.h's rule allows (a snapshot's link to its blob).
  static InputBytes open(const std::string& path);
  // Bytes in memory, named `source` in messages.
  static InputBytes of(std::string bytes, const std::string& source);

  const std::string& source() const { return source_; }
  uint64_t size() const { return size_; }
  // n bytes at offset into dst; past the end: InteropError "{source}: {what} ...".
  void read(uint64_t offset, void* dst, uint64_t n, const std::string& what) const;
  // Whether [offset, offset + n) lies within the file (no overflow).
  bool holds(uint64_t offset, uint64_t n) const { return offset <= size_ && n <= size_ - offset; }

 private:
  std::string source_;
  uint64_t size_ = 0;
  std::shared_ptr<base::UniqueFd> fd_;        // a file
  std::shared_ptr<const std::string> bytes_;  // or bytes in memory
};

// The whole of a small file (InputBytes::open's checks), refused when over max_bytes.
std::string read_whole_file(const std::string& path, uint64_t max_bytes);

// Little-endian fields read one after another from an InputBytes, through a buffer (a GGUF
// header holds tens of thousands of short strings). Each read names its field in errors.
class Cursor {
 public:
  Cursor(const InputBytes& in, uint64_t offset) : in_(in), offset_(offset) {}
  uint64_t offset() const { return offset_; }
  uint64_t remaining() const { return in_.size() - offset_; }

  void bytes(void* dst, uint64_t n, const std::string& what);
  uint8_t u8(const std::string& what);
  uint32_t u32(const std::string& what);
  uint64_t u64(const std::string& what);
  // A length (uint64) then that many bytes; the length is bounded by what the file has left
  // and by max_bytes (an InteropError naming `what` and saying kept_note, the bound's reason,
  // before anything is allocated).
  std::string string(const std::string& what, uint64_t max_bytes = UINT64_MAX,
                     const char* kept_note = "");
  // Past n bytes (within the file), or past a length-prefixed string, reading nothing.
  void skip(uint64_t n, const std::string& what);
  void skip_string(const std::string& what);

 private:
  const InputBytes& in_;
  uint64_t offset_;
  std::string buffer_;  // the file from buffer_start_ on
  uint64_t buffer_start_ = 0;
};

}  // namespace interop
