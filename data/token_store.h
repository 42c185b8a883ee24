#pragma once
// Token ids as training reads them: uint16 or uint32, either read from a prepared folder's
// train.bin / val.bin (little-endian, no header) or owned in memory (the plain-text path
// and tests). Both copy windows of ids into int64 buffers for batches.
//
//   data::TokenStore train = data::TokenStore::open_file("run/train.bin",
//       data::TokenDtype::kUint16, vocab_size, meta.train.tokens);
//   std::vector<int64_t> window(65);
//   train.copy(start, 65, window.data());  // each id checked < vocab_size here
//
// Opening a file reads no id (a gigabyte opens in microseconds): the range of every id is
// checked as it is copied, and an id outside the vocabulary is a DataError naming the file,
// the token's position and its byte offset. A file-backed store reads its ids in one of
// three ways:
//   kLoad  the file is read whole into memory when opened (at most kResidentBudgetBytes
//          under kAuto): what happens to the file afterwards, truncated or rewritten by
//          another process, never reaches the run;
//   kRead  each window is copied with pread from the page cache: no page of the file is
//          ever mapped into the process, so its resident memory does not grow with the
//          corpus, and a file truncated by another process, or a read error, is a DataError
//          naming the file and the byte offset;
//   kMap   the file is mapped read-only (mmap) and windows are copied from the mapping; the
//          pages touched are released every 16 MB (madvise), which bounds resident memory.
//          Each copy first checks the file's size (fstat), so a file truncated before the
//          copy is a DataError; one truncated during the copy itself still raises SIGBUS,
//          which is why no command maps (bench/prepare_bench.cpp does, to compare).
//   kAuto  (the default) kLoad for a file of at most 16 MB, kRead for a larger one.
// All give the same ids. Large files are read rather than mapped because a page fault is
// far dearer than a small read on a virtual machine (on the 2-core machine this was
// written on: 37 us against 3 us for a random 65-token window of a 1.7 GB file), and with
// pages released a mapping faults again and again; bench/prepare_bench.cpp measures both.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace data {

enum class TokenDtype { kUint16, kUint32 };

// uint16 when every id fits (vocab_size <= 65536), else uint32.
TokenDtype dtype_for_vocab(int64_t vocab_size);
size_t dtype_bytes(TokenDtype dtype);
std::string_view dtype_name(TokenDtype dtype);  // "uint16", "uint32"
std::optional<TokenDtype> parse_dtype(std::string_view name);

class TokenStore {
 public:
  enum class FileAccess { kAuto, kLoad, kRead, kMap };

  TokenStore();  // empty
  // Owned ids; each must be < vocab_size (checked when copied, as for a file).
  TokenStore(std::vector<uint16_t> ids, int64_t vocab_size, std::string name = "tokens");
  TokenStore(std::vector<uint32_t> ids, int64_t vocab_size, std::string name = "tokens");
  // The ids in the narrowest dtype for vocab_size; an id outside [0, vocab_size) is a
  // DataError naming its position.
  static TokenStore from_ids(const std::vector<int64_t>& ids, int64_t vocab_size,
                             std::string name = "tokens");
  // The ids of the file at `path`. Its size must be exactly tokens * dtype_bytes(dtype); a
  // file that is missing, not regular, or of another size is a DataError naming it.
  static TokenStore open_file(const std::string& path, TokenDtype dtype, int64_t vocab_size,
                              uint64_t tokens, FileAccess access = FileAccess::kAuto);
  // The same for a file already open (a regular file; the store keeps its own descriptor
  // or mapping, so fd may be closed afterwards). `name` names it in messages.
  static TokenStore open_fd(int fd, const std::string& name, TokenDtype dtype, int64_t vocab_size,
                            uint64_t tokens, FileAccess access = FileAccess::kAuto);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  TokenDtype dtype() const { return dtype_; }
  int64_t vocab_size() const { return vocab_size_; }
  const std::string& name() const { return name_; }  // the file, for messages
  bool is_file() const;                              // from a file (any access)
  bool is_loaded() const;                            // FileAccess::kLoad
  bool is_mapped() const;                            // FileAccess::kMap
  // A mapped store releases its pages past this (and kAuto loads files up to this size).
  static constexpr uint64_t kResidentBudgetBytes = uint64_t{16} << 20;
  // What the store may keep resident, for a memory plan: an owned (or loaded) store's ids; a mapped
  // store's page budget, or the file when smaller; nothing for kRead (the page cache is
  // the kernel's, reclaimable).
  size_t memory_bytes() const;

  // Copies ids [start, start + count) into out, checking each against the vocabulary.
  // A range past the end is std::out_of_range; threads may copy from one store at once.
  void copy(size_t start, size_t count, int64_t* out) const;
  std::vector<int64_t> slice(size_t start, size_t count) const;
  std::vector<int64_t> to_vector() const { return slice(0, size_); }

  struct Backing;  // what holds the ids (token_store.cpp)

 private:
  [[noreturn]] void bad_id(size_t position, int64_t id) const;

  std::shared_ptr<const Backing> backing_;  // shared by copies of the store
  size_t size_ = 0;
  TokenDtype dtype_ = TokenDtype::kUint16;
  int64_t vocab_size_ = 0;
  std::string name_;
};

}  // namespace data
