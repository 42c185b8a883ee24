// The hashes meta.json records of a prepared folder's token files, and their check when the
// folder is opened (prepared.h).
#include <fmt/format.h>

#include <vector>

#include "data/data_error.h"
#include "data/posix_io.h"
#include "data/prepared.h"

namespace data {

namespace {

constexpr size_t kHashReadBytes = size_t{1} << 20;

// Hashes [offset, offset + n) of the file into sha, a megabyte at a time.
void hash_range(int fd, const std::string& name, uint64_t offset, uint64_t n, detail::Sha256& sha,
                std::vector<char>& buffer) {
  while (n > 0) {
    const size_t m = static_cast<size_t>(std::min<uint64_t>(n, buffer.size()));
    detail::read_exactly(fd, name, buffer.data(), m, offset);
    sha.update({buffer.data(), m});
    offset += m, n -= m;
  }
}

}  // namespace

std::string token_file_sha256(int fd, uint64_t size, const std::string& name) {
  detail::Sha256 sha;
  std::vector<char> buffer(kHashReadBytes);
  hash_range(fd, name, 0, size, sha, buffer);
  return sha.hex();
}

std::string token_file_sample_sha256(int fd, uint64_t size, const std::string& name) {
  detail::Sha256 sha;
  std::vector<char> buffer(kSampleBlockBytes);
  const uint64_t whole = uint64_t{kSampleBlocks} * kSampleBlockBytes;
  if (size <= whole) {
    hash_range(fd, name, 0, size, sha, buffer);
    return sha.hex();
  }
  // block i starts at i * (size - block) / (blocks - 1): the first at 0, the last at the end
  const uint64_t span = size - kSampleBlockBytes, steps = kSampleBlocks - 1;
  for (uint64_t i = 0; i <= steps; ++i)
    hash_range(fd, name, span / steps * i + span % steps * i / steps, kSampleBlockBytes, sha,
               buffer);
  return sha.hex();
}

void check_token_file(int fd, uint64_t size, const SplitPart& part, const std::string& name,
                      const std::string& meta_path, TokenCheck check) {
  if (part.sha256.empty()) return;  // a folder prepared before the hashes were recorded
  const bool whole = check == TokenCheck::kFull || size <= kFullCheckBytes;
  const std::string& recorded = whole ? part.sha256 : part.sample_sha256;
  const std::string found =
      whole ? token_file_sha256(fd, size, name) : token_file_sample_sha256(fd, size, name);
  if (found != recorded)
    throw DataError(
        fmt::format("{}: its {} is {}, but {} records {}: the token file was changed after it was "
                    "prepared (prepare the folder again)",
                    name, whole ? "SHA-256" : "sampled SHA-256 (64 blocks of 64 KiB)", found,
                    meta_path, recorded));
}

}  // namespace data
