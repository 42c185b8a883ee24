#include "data/token_store.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <stdexcept>

#include "data/data_error.h"
#include "data/posix_io.h"

namespace data {

// The files are little-endian; copying them as they are is only right on such a host.
static_assert(std::endian::native == std::endian::little,
              "token files are little-endian: a big-endian host needs byte swaps in copy()");

namespace {

// A mapped store releases its pages once about this much may be resident. A fault maps up
// to 16 pages around the one touched (the kernel's fault-around), so each copy is counted
// as that many more pages than it spans.
constexpr uint64_t kResidentBudgetBytes = uint64_t{16} << 20;
constexpr uint64_t kFaultAroundPages = 16;

template <class T>
T copy_ids(const T* src, size_t n, int64_t* out) {
  T max = 0;
  for (size_t i = 0; i < n; ++i) {
    out[i] = src[i];
    max = std::max(max, src[i]);
  }
  return max;
}

}  // namespace

struct TokenStore::Backing {
  virtual ~Backing() = default;
  // Bytes [begin, end) of the data were just read.
  virtual void touched(size_t /*begin*/, size_t /*end*/) const {}
};

namespace {

template <class T>
struct OwnedIds : TokenStore::Backing {
  explicit OwnedIds(std::vector<T> v) : ids(std::move(v)) {}
  std::vector<T> ids;
};

struct Mapping : TokenStore::Backing {
  Mapping(void* a, size_t n) : address(a), length(n) {}
  ~Mapping() override { munmap(address, length); }
  void touched(size_t begin, size_t end) const override {
    const uint64_t span = (end - 1) / page - begin / page + 1 + kFaultAroundPages;
    if (pages.fetch_add(span, std::memory_order_relaxed) + span < budget) return;
    // Dropping a read-only file mapping's pages only unmaps them: a reader on another
    // thread faults them back in from the page cache.
    pages.store(0, std::memory_order_relaxed);
    madvise(address, length, MADV_DONTNEED);
  }
  void* address;
  size_t length;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t budget = kResidentBudgetBytes / page;
  mutable std::atomic<uint64_t> pages{0};
};

}  // namespace

TokenDtype dtype_for_vocab(int64_t vocab_size) {
  return vocab_size <= 65536 ? TokenDtype::kUint16 : TokenDtype::kUint32;
}

size_t dtype_bytes(TokenDtype dtype) { return dtype == TokenDtype::kUint16 ? 2 : 4; }

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
    : vocab_size_(vocab_size), name_(std::move(name)) {
  auto owned = std::make_shared<OwnedIds<uint16_t>>(std::move(ids));
  data_ = owned->ids.data(), size_ = owned->ids.size(), dtype_ = TokenDtype::kUint16;
  backing_ = std::move(owned);
}

TokenStore::TokenStore(std::vector<uint32_t> ids, int64_t vocab_size, std::string name)
    : vocab_size_(vocab_size), name_(std::move(name)) {
  auto owned = std::make_shared<OwnedIds<uint32_t>>(std::move(ids));
  data_ = owned->ids.data(), size_ = owned->ids.size(), dtype_ = TokenDtype::kUint32;
  backing_ = std::move(owned);
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

TokenStore TokenStore::map_file(const std::string& path, TokenDtype dtype, int64_t vocab_size,
                                uint64_t tokens, Access access) {
  detail::InputFile file(path, path);
  const size_t width = dtype_bytes(dtype);
  if (tokens > file.size() / width || file.size() != tokens * width)
    throw DataError(fmt::format("{}: {} bytes, but the metadata says {} {} tokens ({} bytes)", path,
                                file.size(), tokens, dtype_name(dtype),
                                tokens <= UINT64_MAX / width ? fmt::format("{}", tokens * width)
                                                             : std::string("too many")));
  TokenStore store;
  store.dtype_ = dtype, store.vocab_size_ = vocab_size, store.name_ = path;
  if (tokens == 0) return store;  // mmap refuses a length of 0
  void* address = mmap(nullptr, file.size(), PROT_READ, MAP_SHARED, file.fd(), 0);
  if (address == MAP_FAILED)
    throw DataError(fmt::format("{}: cannot map: {}", path, detail::errno_text(errno)));
  madvise(address, file.size(), access == Access::kRandom ? MADV_RANDOM : MADV_SEQUENTIAL);
  store.backing_ = std::make_shared<Mapping>(address, file.size());
  store.data_ = address, store.size_ = tokens;
  return store;
}

bool TokenStore::is_mapped() const {
  return dynamic_cast<const Mapping*>(backing_.get()) != nullptr;
}

void TokenStore::copy(size_t start, size_t count, int64_t* out) const {
  if (start > size_ || count > size_ - start)
    throw std::out_of_range(fmt::format("{}: tokens [{}, {}) are past the end of its {} tokens",
                                        name_, start, start + count, size_));
  if (count == 0) return;
  int64_t max;
  if (dtype_ == TokenDtype::kUint16)
    max = copy_ids(static_cast<const uint16_t*>(data_) + start, count, out);
  else
    max = copy_ids(static_cast<const uint32_t*>(data_) + start, count, out);
  const size_t width = dtype_bytes(dtype_);
  backing_->touched(start * width, (start + count) * width);
  if (max < vocab_size_) return;
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
      "{}: token {} is id {}, outside the vocabulary of {} (the file is damaged or belongs to "
      "another tokenizer)",
      name_, position, id, vocab_size_));
}

}  // namespace data
