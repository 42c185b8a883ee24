#pragma once
// The stream from the forked checkpoint reader to its parent (internal to io/; read_child.h
// runs both ends). Each ReadSink event is one frame: a 4-byte payload length, a 1-byte kind,
// then the payload (numbers in this machine's byte order, since both ends are one program;
// strings as a 4-byte length and their bytes). An item is named by its section and row
// (read_protocol.h), and its row says what follows: text, an integer or a real, or a
// dataset's dims. The reading end trusts nothing: a length past the limit, a payload that
// ends early or runs on, an unknown kind, a row that does not exist or whose bounds the
// event breaks, or an event out of order is a StreamError.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/read_protocol.h"

namespace io::detail {

class PayloadReader;

// The child's end: every event becomes a frame on fd. Small frames are gathered and sent
// every 64 KiB or 20 ms; dataset values go from the reader's buffer to the pipe uncopied.
// When fd takes no more (the parent is gone or gave up on the child), the process exits
// with status gone_exit.
class FrameWriter final : public ReadSink {
 public:
  FrameWriter(int fd, int gone_exit) : fd_(fd), gone_exit_(gone_exit) {}
  void progress(uint64_t work) override;
  void fatal(const std::string& message) override;
  void load_error(const std::string& message) override;
  void attribute(Section section, size_t row, const std::string& name,
                 const Scalar& value) override;
  void begin_dataset(Section section, size_t row, const std::string& name,
                     const std::vector<uint64_t>& dims) override;
  void dataset_data(const void* values, size_t bytes) override;
  void end_dataset() override;
  void end_section(Section section) override;
  void verdict(Verdict verdict, const std::string& path, const std::string& why) override;
  void done() override;
  void flush();

 private:
  void send(uint8_t kind, const std::string& payload);
  void write_all(const char* a, size_t a_size, const char* b = nullptr, size_t b_size = 0);

  int fd_, gone_exit_;
  std::string buf_;
  double last_flush_ = 0;
};

// The parent's end: the pipe is read straight into its buffer (space, then commit), each
// whole frame is checked and told to out, and dataset values go from the buffer into the
// dataset.
class FrameReader {
 public:
  explicit FrameReader(ReadSink& out) : out_(out) {}
  // Room for at least n more bytes after those that came.
  char* space(size_t n);
  // n bytes arrived in space(): every frame now whole is checked and told. StreamError.
  void commit(size_t n);
  // What a read should ask for: the rest of a frame begun, or a good share of a pipe.
  size_t wanted() const;
  // The end frame came.
  bool done() const { return done_; }

 private:
  void dispatch(uint8_t kind, PayloadReader& in);
  void attribute(PayloadReader& in);
  void begin_dataset(PayloadReader& in);
  void verdict(PayloadReader& in);

  ReadSink& out_;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;  // the bytes not yet told
  bool done_ = false;
};

}  // namespace io::detail
