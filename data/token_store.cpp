#include "data/token_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "data/data_error.h"
#include "data/posix_io.h"

namespace data {

// The files are little-endian; copying them as they are is only right on such a host.
static_assert(std::endian::native == std::endian::little,
              "token files are little-endian: a big-endian host needs byte swaps in copy()");

namespace {

// A fault maps up to 16 pages around the one touched (the kernel's fault-around, which
// MADV_RANDOM does not turn off on every kernel), so each copy counts that many more.
constexpr uint64_t kFaultAroundPages = 16;
// A read store reads at most this much at a time (on the stack).
constexpr size_t kReadBytes = size_t{16} << 10;

// Copies n ids, returns the largest.
template <class T>
int64_t widen(const T* src, size_t n, int64_t* out) {
  T max = 0;
  for (size_t i = 0; i < n; ++i) {
    out[i] = src[i];
    max = std::max(max, src[i]);
  }
  return max;
}

int64_t widen(const void* src, TokenDtype dtype, size_t n, int64_t* out) {
  if (dtype == TokenDtype::kUint16) return widen(static_cast<const uint16_t*>(src), n, out);
  return widen(static_cast<const uint32_t*>(src), n, out);
}

}  // namespace

struct TokenStore::Backing {
  virtual ~Backing() = default;
  // Copies ids [start, start + n) into out; returns the largest.
  virtual int64_t copy(size_t start, size_t n, TokenDtype dtype, int64_t* out) const = 0;
};

namespace {

template <class T>
struct OwnedIds : TokenStore::Backing {
  explicit OwnedIds(std::vector<T> v) : ids(std::move(v)) {}
  int64_t copy(size_t start, size_t n, TokenDtype, int64_t* out) const override {
    return widen(ids.data() + start, n, out);
  }
  std::vector<T> ids;
};

// A file read whole when opened (FileAccess::kLoad).
template <class T>
struct LoadedFile : OwnedIds<T> {
  using OwnedIds<T>::OwnedIds;
};

template <class T>
std::shared_ptr<const TokenStore::Backing> load_file(int fd, const std::string& name,
                                                     uint64_t tokens) {
  std::vector<T> ids(tokens);
  detail::read_exactly(fd, name, reinterpret_cast<char*>(ids.data()), tokens * sizeof(T), 0);
  return std::make_shared<LoadedFile<T>>(std::move(ids));
}

struct Mapping : TokenStore::Backing {
  Mapping(void* a, size_t n, int fd, std::string name)
      : address(a), length(n), fd(fd), name(std::move(name)) {}
  ~Mapping() override {
    munmap(address, length);
    close(fd);
  }
  int64_t copy(size_t start, size_t n, TokenDtype dtype, int64_t* out) const override {
    const size_t width = dtype_bytes(dtype);
    // a page past the file's end raises SIGBUS: a file truncated since it was mapped is
    // an error here instead (one truncated during this very copy still raises it)
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < (start + n) * width)
      throw DataError(
          fmt::format("{}: the file is shorter than when it was opened (it was "
                      "changed in place) at byte {}",
                      name, std::min<uint64_t>(st.st_size, (start + n) * width)));
    const int64_t max = widen(static_cast<const char*>(address) + start * width, dtype, n, out);
    const uint64_t span =
        ((start + n) * width - 1) / page - start * width / page + 1 + kFaultAroundPages;
    if (pages.fetch_add(span, std::memory_order_relaxed) + span >= budget) {
      // Dropping a read-only file mapping's pages only unmaps them: a reader on another
      // thread faults them back in from the page cache.
      pages.store(0, std::memory_order_relaxed);
      madvise(address, length, MADV_DONTNEED);
    }
    return max;
  }
  void* address;
  size_t length;
  int fd;
  std::string name;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t budget = TokenStore::kResidentBudgetBytes / page;
  mutable std::atomic<uint64_t> pages{0};
};

struct FileReader : TokenStore::Backing {
  FileReader(int fd, std::string name) : fd(fd), name(std::move(name)) {}
  ~FileReader() override { close(fd); }
  int64_t copy(size_t start, size_t n, TokenDtype dtype, int64_t* out) const override {
    const size_t width = dtype_bytes(dtype), per_read = kReadBytes / width;
    alignas(8) char buffer[kReadBytes];
    int64_t max = 0;
    for (size_t done = 0; done < n; done += per_read) {
      const size_t m = std::min(per_read, n - done);
      detail::read_exactly(fd, name, buffer, m * width, (start + done) * width);
      max = std::max(max, widen(buffer, dtype, m, out + done));
    }
    return max;
  }
  int fd;
  std::string name;
};

}  // namespace

TokenDtype dtype_for_vocab(int64_t vocab_size) {
  return vocab_size <= 65536 ? TokenDtype::kUint16 : TokenDtype::kUint32;
}

size_t dtype_bytes(TokenDtype dtype) {
  return dtype == TokenDtype::kUint16 ? 2 : 4;
}

std::string_view dtype_name(TokenDtype dtype) {
  return dtype == TokenDtype::kUint16 ? "uint16" : "uint32";
}

std::optional<TokenDtype> parse_dtype(std::string_view name) {
  if (name == "uint16") return TokenDtype::kUint16;
  if (name == "uint32") return TokenDtype::kUint32;
  return std::nullopt;
}

TokenStore::TokenStore() = default;

TokenStore::TokenStore(std::vector<uint16_t> ids, int64_t vocab_size, std::string name)
    : size_(ids.size()),
      dtype_(TokenDtype::kUint16),
      vocab_size_(vocab_size),
      name_(std::move(name)) {
  backing_ = std::make_shared<OwnedIds<uint16_t>>(std::move(ids));
}

TokenStore::TokenStore(std::vector<uint32_t> ids, int64_t vocab_size, std::string name)
    : size_(ids.size()),
      dtype_(TokenDtype::kUint32),
      vocab_size_(vocab_size),
      name_(std::move(name)) {
  backing_ = std::make_shared<OwnedIds<uint32_t>>(std::move(ids));
}

TokenStore TokenStore::from_ids(const std::vector<int64_t>& ids, int64_t vocab_size,
                                std::string name) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw DataError(fmt::format("{}: token {} is id {}, outside the vocabulary of {}", name, i,
                                  ids[i], vocab_size));
  if (dtype_for_vocab(vocab_size) == TokenDtype::kUint16)
    return TokenStore(std::vector<uint16_t>(ids.begin(), ids.end()), vocab_size, std::move(name));
  return TokenStore(std::vector<uint32_t>(ids.begin(), ids.end()), vocab_size, std::move(name));
}

TokenStore TokenStore::open_file(const std::string& path, TokenDtype dtype, int64_t vocab_size,
                                 uint64_t tokens, FileAccess access) {
  const detail::InputFile file(path, path);
  return open_fd(file.fd(), path, dtype, vocab_size, tokens, access);
}

TokenStore TokenStore::open_fd(int fd, const std::string& name, TokenDtype dtype,
                               int64_t vocab_size, uint64_t tokens, FileAccess access) {
  struct stat st {};
  if (fstat(fd, &st) != 0)
    throw DataError(fmt::format("{}: cannot read: {}", name, std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    throw DataError(
        fmt::format("{}: is {}, not a regular file", name, base::file_kind(st.st_mode)));
  const auto size = static_cast<uint64_t>(st.st_size);
  const size_t width = dtype_bytes(dtype);
  if (tokens > size / width || size != tokens * width)
    throw DataError(fmt::format("{}: {} bytes, but the metadata says {} {} tokens ({} bytes)", name,
                                size, tokens, dtype_name(dtype),
                                tokens <= UINT64_MAX / width ? fmt::format("{}", tokens * width)
                                                             : std::string("too many")));
  TokenStore store;
  store.dtype_ = dtype, store.vocab_size_ = vocab_size, store.name_ = name;
  if (tokens == 0) return store;  // nothing to read (and mmap refuses a length of 0)
  if (access == FileAccess::kAuto)
    access = size <= kResidentBudgetBytes ? FileAccess::kLoad : FileAccess::kRead;
  if (access == FileAccess::kLoad) {
    store.backing_ = dtype == TokenDtype::kUint16 ? load_file<uint16_t>(fd, name, tokens)
                                                  : load_file<uint32_t>(fd, name, tokens);
    store.size_ = tokens;
    return store;
  }
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) throw DataError(fmt::format("{}: {}", name, std::strerror(errno)));
  if (access == FileAccess::kRead) {
    store.backing_ = std::make_shared<FileReader>(own, name);
  } else {
    void* address = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (address == MAP_FAILED) {
      close(own);
      throw DataError(fmt::format("{}: cannot map: {}", name, std::strerror(errno)));
    }
    if (size > kResidentBudgetBytes) madvise(address, size, MADV_RANDOM);  // no read-ahead
    store.backing_ = std::make_shared<Mapping>(address, size, own, name);
  }
  store.size_ = tokens;
  return store;
}

bool TokenStore::is_file() const {
  return is_mapped() || is_loaded() || dynamic_cast<const FileReader*>(backing_.get()) != nullptr;
}

bool TokenStore::is_loaded() const {
  return dynamic_cast<const LoadedFile<uint16_t>*>(backing_.get()) != nullptr ||
         dynamic_cast<const LoadedFile<uint32_t>*>(backing_.get()) != nullptr;
}

bool TokenStore::is_mapped() const {
  return dynamic_cast<const Mapping*>(backing_.get()) != nullptr;
}

size_t TokenStore::memory_bytes() const {
  const size_t bytes = size_ * dtype_bytes(dtype_);
  if (is_mapped()) return std::min<size_t>(bytes, kResidentBudgetBytes);
  return is_file() && !is_loaded() ? 0 : bytes;
}

void TokenStore::copy(size_t start, size_t count, int64_t* out) const {
  if (start > size_ || count > size_ - start)
    throw std::out_of_range(fmt::format("{}: tokens [{}, {}) are past the end of its {} tokens",
                                        name_, start, start + count, size_));
  if (count == 0) return;
  if (backing_->copy(start, count, dtype_, out) < vocab_size_) return;
  for (size_t i = 0; i < count; ++i)
    if (out[i] >= vocab_size_) bad_id(start + i, out[i]);
}

std::vector<int64_t> TokenStore::slice(size_t start, size_t count) const {
  std::vector<int64_t> out(count);
  copy(start, count, out.data());
  return out;
}

void TokenStore::bad_id(size_t position, int64_t id) const {
  throw DataError(fmt::format(
      "{}: token {} (byte {}) is id {}, outside the vocabulary of {} (the file is damaged or "
      "belongs to another tokenizer)",
      name_, position, position * dtype_bytes(dtype_), id, vocab_size_));
}

}  // namespace data
