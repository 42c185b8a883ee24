#include "interop/hub_cache.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <functional>

#include "base/posix_file.h"
#include "interop/input_bytes.h"
#include "interop/model_files.h"

namespace interop {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kBlobLink = "../../blobs/";
constexpr uint64_t kMaxRefBytes = 128;  // a hash and a newline

// A blob's name or a commit: sha1 (git's, 40 hex digits) or sha256 (64), lowercase as the
// hub writes them; nothing else can then be a path.
bool is_hash(std::string_view s) {
  if (s.size() != 40 && s.size() != 64) return false;
  for (const char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// What a link says, at most PATH_MAX bytes.
std::string link_target(const std::string& path) {
  std::string target(4096, '\0');
  const ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
  if (n < 0)
    throw InteropError(base::os_error(fmt::format("{}: cannot read the link", path), errno).what());
  target.resize(static_cast<size_t>(n));
  return target;
}

// A link followed from a snapshot leads into its own repo's blobs/: the blob there, which
// must be a regular file (a link in blobs/ would start a chain, a folder is no file).
FileIdentity blob_of(const std::string& path, const std::string& target,
                     const std::function<void(const std::string&)>& refuse) {
  std::error_code ec;
  fs::path folder = fs::path(path).parent_path();
  folder = fs::canonical(folder.empty() ? "." : folder, ec);
  if (ec) refuse("its folder cannot be resolved (" + ec.message() + ")");
  if (folder.parent_path().filename() != "snapshots")
    refuse("its folder is not a hub cache snapshot (REPO/snapshots/COMMIT)");
  const fs::path blobs = folder.parent_path().parent_path() / "blobs";
  struct stat st;
  if (::lstat(blobs.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    refuse("the repo has no blobs folder (" + blobs.string() + ")");
  const fs::path blob = blobs / target.substr(kBlobLink.size());
  if (::lstat(blob.c_str(), &st) != 0) refuse("the blob is not there");
  if (S_ISLNK(st.st_mode)) refuse("the blob is itself a symbolic link");
  if (!S_ISREG(st.st_mode)) refuse("the blob is " + base::file_kind(st.st_mode) + ", not a file");
  return {st.st_dev, st.st_ino};
}

}  // namespace

std::optional<FileIdentity> allowed_link(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return std::nullopt;
  const std::string target = link_target(path);
  const auto refuse = [&](const std::string& why) {
    throw InteropError(fmt::format(
        "{}: is a symbolic link to '{}', and attograd follows a link in a model folder only "
        "from a Hugging Face hub cache snapshot into its repo's blobs/ (../../blobs/HASH): {}",
        path, excerpt(target, 100), why));
  };
  if (target.starts_with('/')) refuse("the link is absolute");
  if (!target.starts_with(kBlobLink) || !is_hash(target.substr(kBlobLink.size())))
    refuse("the link does not lead to ../../blobs/HASH");
  return blob_of(path, target, refuse);
}

bool has_entry(const std::string& folder, const std::string& name) {
  struct stat st;
  const fs::path file = fs::path(folder.empty() ? "." : folder) / name;
  return ::lstat(file.c_str(), &st) == 0 || errno != ENOENT;
}

std::string hub_snapshot_of(const std::string& path) {
  std::error_code ec;
  const fs::path repo(path);
  if (!fs::is_directory(repo, ec) || has_entry(path, "config.json") ||
      !fs::is_directory(repo / "snapshots", ec) || !fs::is_directory(repo / "blobs", ec))
    return path;
  const std::string refs = (repo / "refs" / "main").string();
  if (!has_entry((repo / "refs").string(), "main"))
    throw InteropError(
        fmt::format("{}: a Hugging Face hub cache folder without refs/main: name one of its "
                    "snapshots instead ({})",
                    path, (repo / "snapshots" / "COMMIT").string()));
  const InputBytes in = InputBytes::open(refs);
  if (in.size() > kMaxRefBytes)
    throw InteropError(fmt::format("{}: {} bytes, more than a commit hash", refs, in.size()));
  std::string commit(in.size(), '\0');
  in.read(0, commit.data(), commit.size(), "the commit");
  if (commit.ends_with('\n')) commit.pop_back();
  if (!is_hash(commit))
    throw InteropError(fmt::format("{}: is not a commit hash (40 or 64 hex digits)", refs));
  const fs::path snapshot = repo / "snapshots" / commit;
  struct stat st;
  if (::lstat(snapshot.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw InteropError(fmt::format("{}: names commit {}, but {} is not there (as a folder)", refs,
                                   commit, snapshot.string()));
  return snapshot.string();
}

}  // namespace interop
