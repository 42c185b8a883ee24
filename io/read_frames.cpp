#include "io/read_frames.h"

#include <fmt/format.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <variant>

namespace io::detail {

namespace {

enum Frame : uint8_t {
  kProgress = 1,
  kFatal,
  kLoadError,
  kAttribute,
  kBeginDataset,
  kDatasetData,
  kEndDataset,
  kEndSection,
  kVerdict,
  kDone,
};
constexpr size_t kHeaderBytes = 5;
constexpr size_t kMaxPayload = kMaxConfigBytes + (1 << 20);  // the config is the largest
constexpr size_t kMaxDataPerFrame = 4 << 20;
constexpr size_t kFlushBytes = 64 << 10;
constexpr double kFlushSeconds = 0.02;

class Payload {
 public:
  template <typename T>
  Payload& put(const T& value) {
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof value);
    return *this;
  }
  Payload& str(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    bytes_ += s;
    return *this;
  }
  Payload& raw(const void* p, size_t n) {
    bytes_.append(static_cast<const char*>(p), n);
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void put_header(char* header, size_t size, uint8_t kind) {
  const auto n = static_cast<uint32_t>(size);
  std::memcpy(header, &n, sizeof n);
  header[4] = static_cast<char>(kind);
}

}  // namespace

// Reads a payload; running past its end is a StreamError.
class PayloadReader {
 public:
  PayloadReader(const char* p, size_t n) : p_(p), end_(p + n) {}
  template <typename T>
  T get() {
    T value;
    std::memcpy(&value, take(sizeof value), sizeof value);
    return value;
  }
  std::string str() {
    const auto n = get<uint32_t>();
    return std::string(take(n), n);
  }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  const char* take(size_t n) {
    if (n > left()) throw StreamError("a frame shorter than what it holds");
    const char* at = p_;
    p_ += n;
    return at;
  }
  void finish() const {
    if (p_ != end_) throw StreamError("a frame longer than what it holds");
  }

 private:
  const char* p_;
  const char* end_;
};

// ------------------------------------------------------------------ writing
void FrameWriter::progress(uint64_t work) {
  if (seconds_now() - last_flush_ < kFlushSeconds) return;
  send(kProgress, Payload().put(work).bytes());
  flush();
}

void FrameWriter::fatal(const std::string& m) {
  send(kFatal, Payload().str(m).bytes());
}
void FrameWriter::load_error(const std::string& m) {
  send(kLoadError, Payload().str(m).bytes());
}
void FrameWriter::attribute(Section section, size_t row, const std::string& name,
                            const Scalar& value) {
  Payload p;
  p.put(static_cast<uint8_t>(section)).put(static_cast<uint32_t>(row)).str(name);
  if (const auto* text = std::get_if<std::string>(&value)) p.str(*text);
  if (const auto* integer = std::get_if<int64_t>(&value)) p.put(*integer);
  if (const auto* real = std::get_if<double>(&value)) p.put(*real);
  send(kAttribute, p.bytes());
}
void FrameWriter::end_dataset() {
  send(kEndDataset, "");
}
void FrameWriter::end_section(Section section) {
  send(kEndSection, Payload().put(static_cast<uint8_t>(section)).bytes());
}
void FrameWriter::verdict(Verdict v, const std::string& path, const std::string& why) {
  send(kVerdict, Payload().put(static_cast<uint8_t>(v)).str(path).str(why).bytes());
}

void FrameWriter::begin_dataset(Section section, size_t row, const std::string& name,
                                const std::vector<uint64_t>& dims) {
  Payload p;
  p.put(static_cast<uint8_t>(section)).put(static_cast<uint32_t>(row)).str(name);
  p.put(static_cast<uint32_t>(dims.size()));
  for (uint64_t d : dims) p.put(d);
  send(kBeginDataset, p.bytes());
}

// Whole elements per frame: 4 MiB holds a whole number of each dtype's.
void FrameWriter::dataset_data(const void* values, size_t bytes) {
  const char* p = static_cast<const char*>(values);
  for (size_t n; bytes > 0; p += n, bytes -= n) {
    n = std::min(bytes, kMaxDataPerFrame);
    flush();
    char header[kHeaderBytes];
    put_header(header, n, kDatasetData);
    write_all(header, sizeof header, p, n);
  }
}

void FrameWriter::done() {
  send(kDone, "");
  flush();
}

void FrameWriter::flush() {
  if (!buf_.empty()) write_all(buf_.data(), buf_.size());
  buf_.clear();
  last_flush_ = seconds_now();
}

void FrameWriter::send(uint8_t kind, const std::string& payload) {
  // one the parent would refuse as malformed: say why instead
  if (payload.size() > kMaxPayload) return fatal("the reader made a frame too large to send");
  char header[kHeaderBytes];
  put_header(header, payload.size(), kind);
  buf_.append(header, sizeof header);
  buf_ += payload;
  if (buf_.size() >= kFlushBytes) flush();
}

void FrameWriter::write_all(const char* a, size_t a_size, const char* b, size_t b_size) {
  iovec parts[2] = {{const_cast<char*>(a), a_size}, {const_cast<char*>(b), b_size}};
  for (int i = 0; i < 2;) {
    if (parts[i].iov_len == 0) {
      ++i;
      continue;
    }
    const ssize_t n = ::writev(fd_, parts + i, 2 - i);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(gone_exit_);  // the parent is gone, or gave up on this child
    for (auto left = static_cast<size_t>(n); left > 0;) {
      const size_t k = std::min(left, parts[i].iov_len);
      parts[i].iov_base = static_cast<char*>(parts[i].iov_base) + k;
      parts[i].iov_len -= k, left -= k;
      if (parts[i].iov_len == 0) ++i;
    }
  }
}

// ------------------------------------------------------------------ reading
char* FrameReader::space(size_t n) {
  if (begin_ > 0 && buf_.size() - end_ < n) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_, begin_ = 0;
  }
  if (buf_.size() - end_ < n) buf_.resize(end_ + n);
  return buf_.data() + end_;
}

void FrameReader::commit(size_t n) {
  end_ += n;
  while (end_ - begin_ >= kHeaderBytes) {
    uint32_t size = 0;
    std::memcpy(&size, buf_.data() + begin_, sizeof size);
    if (size > kMaxPayload) throw StreamError(fmt::format("a frame of {} bytes", size));
    if (end_ - begin_ - kHeaderBytes < size) return;
    PayloadReader in(buf_.data() + begin_ + kHeaderBytes, size);
    dispatch(static_cast<uint8_t>(buf_[begin_ + 4]), in);
    in.finish();
    begin_ += kHeaderBytes + size;
  }
  if (begin_ == end_) begin_ = end_ = 0;
}

size_t FrameReader::wanted() const {
  uint32_t size = 0;
  if (end_ - begin_ >= kHeaderBytes) std::memcpy(&size, buf_.data() + begin_, sizeof size);
  return std::max<size_t>(1 << 20, std::min<size_t>(size, kMaxPayload) + kHeaderBytes);
}

void FrameReader::dispatch(uint8_t kind, PayloadReader& in) {
  switch (kind) {
    case kProgress: in.get<uint64_t>(); return;
    case kFatal: return out_.fatal(in.str());
    case kLoadError: return out_.load_error(in.str());
    case kAttribute: return attribute(in);
    case kBeginDataset: return begin_dataset(in);
    case kDatasetData: {
      const size_t n = in.left();
      return out_.dataset_data(in.take(n), n);
    }
    case kEndDataset: return out_.end_dataset();
    case kEndSection: {
      const auto section = in.get<uint8_t>();
      if (section >= kSectionCount) throw StreamError("the end of an unknown section");
      return out_.end_section(static_cast<Section>(section));
    }
    case kVerdict: return verdict(in);
    case kDone: done_ = true; return out_.done();
  }
  throw StreamError(fmt::format("a frame of unknown kind {}", static_cast<int>(kind)));
}

// The row named says what the value is; a row that does not exist, or a text past its
// row's bound, is refused before the value is taken.
void FrameReader::attribute(PayloadReader& in) {
  const auto section = static_cast<Section>(in.get<uint8_t>());
  const auto row = in.get<uint32_t>();
  const std::string name = in.str();
  if (std::string why = attribute_problem(section, row, name, 0); !why.empty())
    throw StreamError(why);
  switch (item(section, row).kind) {
    case ItemKind::text: {
      const std::string text = in.str();
      if (std::string why = attribute_problem(section, row, name, text.size()); !why.empty())
        throw StreamError(why);
      return out_.attribute(section, row, name, text);
    }
    case ItemKind::integer: return out_.attribute(section, row, name, in.get<int64_t>());
    default: return out_.attribute(section, row, name, in.get<double>());
  }
}

void FrameReader::begin_dataset(PayloadReader& in) {
  const auto section = static_cast<Section>(in.get<uint8_t>());
  const auto row = in.get<uint32_t>();
  const std::string name = in.str();
  const auto rank = in.get<uint32_t>();
  if (rank > kMaxRank) throw StreamError(fmt::format("a dataset of {} dimensions", rank));
  std::vector<uint64_t> dims(rank);
  for (uint64_t& d : dims) d = in.get<uint64_t>();
  if (std::string why = dataset_problem(section, row, name, dims); !why.empty())
    throw StreamError(why);
  out_.begin_dataset(section, row, name, dims);
}

void FrameReader::verdict(PayloadReader& in) {
  const auto v = in.get<uint8_t>();
  if (v > static_cast<uint8_t>(Verdict::refused)) throw StreamError("a verdict of unknown kind");
  const std::string path = in.str(), why = in.str();
  out_.verdict(static_cast<Verdict>(v), path, why);
}

}  // namespace io::detail
