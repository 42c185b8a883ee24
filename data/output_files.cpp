// Outputs of data/: the folder a prepare writes, and its temporary files (posix_io.h).
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "data/data_error.h"
#include "data/posix_io.h"

namespace data::detail {

namespace {

// O_DIRECT wants buffers, offsets and lengths aligned to the logical block size.
constexpr size_t kDirectAlign = 4096;
static_assert(TempFile::kBufferBytes % kDirectAlign == 0);
// Without O_DIRECT, writeback of a long output starts every this many bytes, so the final
// fsync waits for the last stretch only.
constexpr uint64_t kWriteBehindBytes = uint64_t{64} << 20;

[[noreturn]] void fail_output(const std::string& display, const std::string& what, int err) {
  throw DataSystemError(fmt::format("{}: {}: {}", display, what, std::strerror(err)));
}

// Opens (creating it when missing: `made` says so) the folder `path` without following a
// symbolic link.
base::UniqueFd open_folder(const std::string& path, bool& made) {
  made = mkdir(path.c_str(), 0777) == 0;
  if (!made && errno != EEXIST) fail_output(path, "cannot create the folder", errno);
  base::UniqueFd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.valid()) return fd;
  const int err = errno;
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    throw DataError(fmt::format("{}: is {}, not a folder; refusing to write there", path,
                                base::file_kind(st.st_mode)));
  fail_output(path, "cannot open the folder", err);
}

}  // namespace

// ---- OutputFolder ----------------------------------------------------------------------

OutputFolder::OutputFolder(const std::string& path, const std::vector<std::string>& own_names)
    : path_(path) {
  while (path_.size() > 1 && path_.back() == '/') path_.pop_back();
  if (path_.empty()) throw DataError("the output folder has an empty name");
  fd_ = open_folder(path_, made_);
  if (flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK)
      throw DataError(
          fmt::format("{}: another process is writing or reading this folder; wait "
                      "for it or choose another output folder",
                      path_));
    fail_output(path_, "cannot lock the folder", err);
  }
  check_entries(own_names);
}

OutputFolder::~OutputFolder() {
  if (made_) rmdir(path_.c_str());  // only when empty: a finished prepare's folder stays
}

// Lists the folder: only own names and leftover temporary files may be there.
void OutputFolder::check_entries(const std::vector<std::string>& own_names) {
  DIR* dir = fdopendir(dup(fd_.get()));
  if (!dir) fail_output(path_, "cannot list the folder", errno);
  std::string foreign;
  while (const dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    const bool regular =
        fstatat(fd_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
    bool ours = false, temp = false;
    for (const std::string& own : own_names) {
      ours = ours || name == own;
      temp = temp || TempFile::is_temp_name(name, own);
    }
    if (regular && (ours || temp))
      (ours ? entries_ : leftovers_).push_back({name, st.st_dev, st.st_ino});
    else if (foreign.empty() || name < foreign)
      foreign = name;
  }
  closedir(dir);
  if (!foreign.empty())
    throw DataError(fmt::format(
        "{}: the folder holds '{}', which is not part of a prepared folder; refusing to write "
        "into a folder that is not empty (choose a new or empty folder)",
        path_, foreign));
}

bool OutputFolder::has(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return true;
  return false;
}

std::string OutputFolder::entry_of(dev_t dev, ino_t ino) const {
  for (const auto* list : {&entries_, &leftovers_})
    for (const Entry& e : *list)
      if (e.dev == dev && e.ino == ino) return e.name;
  return "";
}

void OutputFolder::remove_leftovers() {
  for (const Entry& e : leftovers_) unlinkat(fd_.get(), e.name.c_str(), 0);
  leftovers_.clear();
}

void OutputFolder::remove(const std::string& name) {
  if (unlinkat(fd_.get(), name.c_str(), 0) != 0 && errno != ENOENT)
    fail_output(display(name), "cannot remove", errno);
}

void OutputFolder::sync() {
  if (fsync(fd_.get()) != 0) fail_output(path_, "cannot sync the folder", errno);
}

// ---- TempFile --------------------------------------------------------------------------

struct TempFile::Buffer {
  Buffer() : data(static_cast<char*>(std::aligned_alloc(kDirectAlign, kBufferBytes))) {
    if (!data) throw std::bad_alloc();
  }
  ~Buffer() {
    if (writing.valid()) writing.wait();  // its error, if any, is of no use now
    if (hashing.valid()) hashing.wait();
    std::free(data);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  char* data;
  size_t used = 0;
  std::future<void> writing;
  std::shared_future<void> hashing;  // waits for the previous buffer's: bytes hash in order
};

namespace {

std::string temp_prefix(std::string_view name) {
  return fmt::format(".{}.partial-", name);
}

}  // namespace

bool TempFile::is_temp_name(std::string_view entry, std::string_view name) {
  const std::string prefix = temp_prefix(name);
  return entry.size() > prefix.size() && entry.substr(0, prefix.size()) == prefix;
}

TempFile::TempFile(OutputFolder& folder, std::string name)
    : folder_(folder), name_(std::move(name)) {
  const std::string prefix = temp_prefix(name_);
  fd_ = base::create_exclusive(folder_.fd(), prefix, O_WRONLY | O_DIRECT, 0666, &temp_);
  direct_ = fd_ >= 0;
  if (fd_ < 0 && errno == EINVAL)  // a file system without O_DIRECT
    fd_ = base::create_exclusive(folder_.fd(), prefix, O_WRONLY, 0666, &temp_);
  if (fd_ < 0) fail_output(folder_.display(name_), "cannot create its temporary file", errno);
  try {
    for (auto& b : buffers_) b = std::make_unique<Buffer>();
  } catch (...) {
    ::close(fd_);
    unlinkat(folder_.fd(), temp_.c_str(), 0);
    throw;
  }
}

TempFile::~TempFile() {
  for (auto& b : buffers_) b.reset();  // waits for the writes and hashes in flight
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) unlinkat(folder_.fd(), temp_.c_str(), 0);
}

void TempFile::write(const void* bytes, size_t n) {
  const char* p = static_cast<const char*>(bytes);
  written_ += n;
  while (n > 0) {
    Buffer& b = *buffers_[current_];
    const size_t take = std::min(n, kBufferBytes - b.used);
    std::memcpy(b.data + b.used, p, take);
    b.used += take, p += take, n -= take;
    if (b.used == kBufferBytes) launch();
  }
}

void TempFile::launch() {
  Buffer& b = *buffers_[current_];
  const uint64_t offset = file_bytes_;
  file_bytes_ += b.used;
  b.writing =
      std::async(std::launch::async, [this, &b, offset] { write_out(b.data, b.used, offset); });
  b.hashing = std::async(std::launch::async, [this, &b, before = last_hash_] {
                if (before.valid()) before.get();
                sha_.update({b.data, b.used});
              }).share();
  last_hash_ = b.hashing;
  current_ = (current_ + 1) % kBuffers;
  wait(*buffers_[current_]);
  buffers_[current_]->used = 0;
}

void TempFile::wait(Buffer& b) {
  if (b.writing.valid()) b.writing.get();
  if (b.hashing.valid()) std::exchange(b.hashing, {}).get();
}

// Runs on a background thread; writes of other buffers may run at the same time.
void TempFile::write_out(const char* p, size_t n, uint64_t offset) {
  bool retried = false;
  while (n > 0) {
    const ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL && !retried) {  // O_DIRECT refused after all: write normally
      if (direct_.exchange(false)) fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) & ~O_DIRECT);
      retried = true;
      continue;
    }
    if (w < 0) fail_output(folder_.display(name_), "write failed", errno);
    p += w, n -= static_cast<size_t>(w), offset += static_cast<uint64_t>(w);
  }
  if (!direct_ && offset % kWriteBehindBytes < kBufferBytes)  // a hint: failures show at fsync
    sync_file_range(fd_, static_cast<off_t>(offset - std::min(offset, kWriteBehindBytes)),
                    static_cast<off_t>(kWriteBehindBytes), SYNC_FILE_RANGE_WRITE);
}

void TempFile::close(bool sync) {
  for (int k = 1; k <= kBuffers; ++k) wait(*buffers_[(current_ + k) % kBuffers]);  // in order
  if (direct_.exchange(false))  // the last, partial buffer is not aligned: through the cache
    fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) & ~O_DIRECT);
  Buffer& b = *buffers_[current_];
  last_hash_ = {};
  sha_.update({b.data, b.used});
  sha256_ = sha_.hex();
  write_out(b.data, b.used, file_bytes_);
  file_bytes_ += b.used;
  b.used = 0;
  if (sync && fsync(fd_) != 0) fail_output(folder_.display(name_), "cannot sync", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail_output(folder_.display(name_), "write failed", errno);
}

int TempFile::open_for_reading() const {
  const int fd = openat(folder_.fd(), (committed_ ? name_ : temp_).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_output(folder_.display(name_), "cannot read the file back", errno);
  return fd;
}

void TempFile::commit() {
  if (renameat(folder_.fd(), temp_.c_str(), folder_.fd(), name_.c_str()) != 0)
    fail_output(folder_.display(name_), "cannot rename the finished file into place", errno);
  committed_ = true;
}

}  // namespace data::detail
