#include "io/read_frames.h"

#include <fmt/format.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "data/gpt2_tokenizer.h"
#include "data/tokenizer_file.h"
#include "io/checkpoint_builder.h"

namespace io::detail {

namespace {

enum Frame : uint8_t {
  kProgress = 1,
  kFatal,
  kLoadError,
  kRootText,
  kRootInteger,
  kBeginTensor,
  kTensorData,
  kEndTensor,
  kOptimizer,
  kOptimizerScalar,
  kTokenizer,
  kRng,
  kVerdict,
  kDone,
};
constexpr size_t kHeaderBytes = 5;
constexpr size_t kMaxMerges = data::kMaxBpeVocabSize - 256;
constexpr size_t kMaxPayload = kMaxConfigBytes + (1 << 20);  // the config is the largest
constexpr size_t kMaxValuesPerFrame = (4 << 20) / sizeof(float);
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
  std::vector<uint32_t> u32s(size_t n, const char* what);
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
void FrameWriter::root_text(size_t row, const std::string& value) {
  send(kRootText, Payload().put(static_cast<uint8_t>(row)).str(value).bytes());
}
void FrameWriter::root_integer(size_t row, int64_t value) {
  send(kRootInteger, Payload().put(static_cast<uint8_t>(row)).put(value).bytes());
}
void FrameWriter::end_tensor() {
  send(kEndTensor, "");
}
void FrameWriter::optimizer(const std::string& type) {
  send(kOptimizer, Payload().str(type).bytes());
}
void FrameWriter::optimizer_scalar(const std::string& key, double value) {
  send(kOptimizerScalar, Payload().str(key).put(value).bytes());
}
void FrameWriter::rng(const std::string& name, const std::array<uint64_t, 4>& words) {
  send(kRng, Payload().str(name).raw(words.data(), sizeof words).bytes());
}
void FrameWriter::verdict(Verdict v, const std::string& path, const std::string& why) {
  send(kVerdict, Payload().put(static_cast<uint8_t>(v)).str(path).str(why).bytes());
}

void FrameWriter::begin_tensor(Section section, const std::string& name,
                               const std::vector<uint64_t>& dims) {
  Payload p;
  p.put(static_cast<uint8_t>(section)).str(name).put(static_cast<uint32_t>(dims.size()));
  for (uint64_t d : dims) p.put(d);
  send(kBeginTensor, p.bytes());
}

void FrameWriter::tensor_data(const void* values, size_t count) {
  const char* p = static_cast<const char*>(values);
  for (size_t n; count > 0; p += n * sizeof(float), count -= n) {
    n = std::min(count, kMaxValuesPerFrame);
    flush();
    char header[kHeaderBytes];
    put_header(header, n * sizeof(float), kTensorData);
    write_all(header, sizeof header, p, n * sizeof(float));
  }
}

void FrameWriter::tokenizer(const TokenizerSection& t) {
  Payload p;
  p.str(t.type).put(static_cast<uint32_t>(t.vocab.size()));
  p.raw(t.vocab.data(), t.vocab.size() * sizeof(uint32_t));
  p.put(static_cast<uint32_t>(t.merges.size()));
  for (const auto& [left, right] : t.merges) p.put(left).put(right);
  p.str(t.split_pattern);
  p.put(static_cast<uint32_t>(t.byte_order.size()));
  p.raw(t.byte_order.data(), t.byte_order.size() * sizeof(uint32_t));
  p.put(static_cast<uint32_t>(t.special_tokens.size()));
  for (const std::string& s : t.special_tokens) p.str(s);
  send(kTokenizer, p.bytes());
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
    case kRootText: {
      const auto row = in.get<uint8_t>();
      return out_.root_text(row, in.str());
    }
    case kRootInteger: {
      const auto row = in.get<uint8_t>();
      return out_.root_integer(row, in.get<int64_t>());
    }
    case kBeginTensor: return begin_tensor(in);
    case kTensorData: return tensor_data(in);
    case kEndTensor: return out_.end_tensor();
    case kOptimizer: return out_.optimizer(in.str());
    case kOptimizerScalar: {
      const std::string key = in.str();
      return out_.optimizer_scalar(key, in.get<double>());
    }
    case kTokenizer: return tokenizer(in);
    case kRng: {
      const std::string name = in.str();
      std::array<uint64_t, 4> words;
      for (uint64_t& w : words) w = in.get<uint64_t>();
      return out_.rng(name, words);
    }
    case kVerdict: return verdict(in);
    case kDone: done_ = true; return out_.done();
  }
  throw StreamError(fmt::format("a frame of unknown kind {}", static_cast<int>(kind)));
}

void FrameReader::begin_tensor(PayloadReader& in) {
  const auto section = in.get<uint8_t>();
  if (section > static_cast<uint8_t>(Section::optimizer))
    throw StreamError("a tensor of unknown section");
  const std::string name = in.str();
  const auto rank = in.get<uint32_t>();
  if (rank > 32) throw StreamError("a tensor of more than 32 dimensions");
  std::vector<uint64_t> dims(rank);
  for (uint64_t& d : dims) d = in.get<uint64_t>();
  out_.begin_tensor(static_cast<Section>(section), name, dims);
}

void FrameReader::tensor_data(PayloadReader& in) {
  const size_t n = in.left();
  if (n % sizeof(float) != 0) throw StreamError("tensor values of a partial float");
  out_.tensor_data(in.take(n), n / sizeof(float));
}

// n uint32 values of the payload, n first checked against what it holds.
std::vector<uint32_t> PayloadReader::u32s(size_t n, const char* what) {
  if (n > left() / sizeof(uint32_t))
    throw StreamError(fmt::format("{} longer than its frame", what));
  std::vector<uint32_t> values(n);
  const char* p = take(n * sizeof(uint32_t));
  if (n > 0) std::memcpy(values.data(), p, n * sizeof(uint32_t));
  return values;
}

void FrameReader::tokenizer(PayloadReader& in) {
  TokenizerSection t;
  t.type = in.str();
  t.vocab = in.u32s(in.get<uint32_t>(), "a vocabulary");
  const auto merges = in.get<uint32_t>();
  if (merges > kMaxMerges) throw StreamError(fmt::format("{} bpe merges", merges));
  const std::vector<uint32_t> pairs = in.u32s(2 * size_t{merges}, "bpe merges");
  t.merges.resize(merges);
  for (size_t i = 0; i < t.merges.size(); ++i) t.merges[i] = {pairs[2 * i], pairs[2 * i + 1]};
  t.split_pattern = in.str();
  if (t.split_pattern.size() > data::kMaxSplitPatternBytes)
    throw StreamError(fmt::format("a split pattern of {} bytes", t.split_pattern.size()));
  t.byte_order = in.u32s(in.get<uint32_t>(), "a byte order");
  if (t.byte_order.size() > 256)
    throw StreamError(fmt::format("a byte order of {} entries", t.byte_order.size()));
  const auto specials = in.get<uint32_t>();
  if (specials > data::Gpt2Tokenizer::kMaxSpecialTokens)
    throw StreamError(fmt::format("{} special tokens", specials));
  for (uint32_t k = 0; k < specials; ++k) {
    t.special_tokens.push_back(in.str());
    if (t.special_tokens.back().size() > data::Gpt2Tokenizer::kMaxSpecialTokenBytes)
      throw StreamError(fmt::format("a special token of {} bytes", t.special_tokens.back().size()));
  }
  out_.tokenizer(t);
}

void FrameReader::verdict(PayloadReader& in) {
  const auto v = in.get<uint8_t>();
  if (v > static_cast<uint8_t>(Verdict::refused)) throw StreamError("a verdict of unknown kind");
  const std::string path = in.str(), why = in.str();
  out_.verdict(static_cast<Verdict>(v), path, why);
}

}  // namespace io::detail
