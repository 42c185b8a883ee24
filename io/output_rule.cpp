#include "io/output_rule.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "base/abandoned_partials.h"
#include "base/atomic_file.h"
#include "base/posix_file.h"
#include "base/utf8.h"

namespace io {

namespace {

using Identity = std::pair<dev_t, ino_t>;
// Folders are walked this far at most: a bound on the work, not on what is allowed (a
// folder with more is refused, not half checked).
constexpr size_t kMaxEntries = 100000;
constexpr int kMaxDepth = 8;

std::string quoted(const std::string& path) {
  return fmt::format("'{}'", base::printable(path));
}

std::optional<Identity> identity_of(const std::string& path, bool follow = true) {
  struct stat st;
  const int rc = follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st);
  if (rc != 0) return std::nullopt;
  return Identity{st.st_dev, st.st_ino};
}

bool is_folder(const std::string& path, bool follow = true) {
  struct stat st;
  const int rc = follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st);
  return rc == 0 && S_ISDIR(st.st_mode);
}

// The entries of a folder, "." and ".." left out; throws past kMaxEntries.
std::vector<std::string> entries_of(const std::string& folder, const std::string& named) {
  std::vector<std::string> names;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(folder.c_str()), ::closedir);
  if (!dir) return names;
  while (const dirent* e = ::readdir(dir.get())) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (names.size() == kMaxEntries)
      throw std::invalid_argument(fmt::format(
          "{} holds more than {} entries; attograd does not check or replace such a folder", named,
          kMaxEntries));
    names.push_back(folder + "/" + name);
  }
  return names;
}

// What the command reads, by identity: each input, and the files each input folder holds
// (links followed: a Hugging Face cache links its blobs). Listed once, when first needed.
struct FileRead {
  std::string role, input, file;  // file == input for the input itself
  Identity id;
};

class FilesRead {
 public:
  explicit FilesRead(const NamedPaths& inputs) : inputs_(inputs) {}
  const std::vector<FileRead>& list() {
    if (!list_) list_ = make();
    return *list_;
  }

 private:
  std::vector<FileRead> make() const {
    std::vector<FileRead> read;
    for (const auto& [role, path] : inputs_) {
      if (path.empty()) continue;
      if (const auto id = identity_of(path)) read.push_back({role, path, path, *id});
      if (!is_folder(path)) continue;
      for (const std::string& file : entries_of(path, fmt::format("{} {}", role, quoted(path)))) {
        struct stat st;
        if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode))
          read.push_back({role, path, file, Identity{st.st_dev, st.st_ino}});
      }
    }
    return read;
  }
  const NamedPaths& inputs_;
  std::optional<std::vector<FileRead>> list_;
};

// An output that exists is none of the files of a folder the command reads.
void refuse_file_of_input_folder(const Output& out, FilesRead& read) {
  const std::optional<Identity> id = identity_of(out.path);
  if (!id) return;
  for (const FileRead& r : read.list())
    if (r.file != r.input && r.id == *id)
      throw std::invalid_argument(fmt::format(
          "{} {} is {} of {} {}, which this command reads; refusing to overwrite an input",
          out.option, quoted(out.path), quoted(base::base_name(r.file)), r.role, quoted(r.input)));
}

// Everything a folder holds, at any depth (links not followed: removing a link removes the
// link), by identity; throws past kMaxEntries or kMaxDepth.
void walk(const std::string& folder, int depth, const std::string& named, std::set<Identity>& found,
          size_t& entries) {
  if (depth > kMaxDepth)
    throw std::invalid_argument(fmt::format(
        "{} is nested more than {} folders deep; attograd does not replace it", named, kMaxDepth));
  for (const std::string& path : entries_of(folder, named)) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    found.insert(Identity{st.st_dev, st.st_ino});
    if (++entries > kMaxEntries)
      throw std::invalid_argument(fmt::format(
          "{} holds more than {} entries; attograd does not replace it", named, kMaxEntries));
    if (S_ISDIR(st.st_mode)) walk(path, depth + 1, named, found, entries);
  }
}

// A folder output that exists holds no input (replacing it would remove the input).
void refuse_folder_holding_inputs(const Output& out, FilesRead& read) {
  if (!is_folder(out.path, false)) return;
  const std::string named = fmt::format("{} {}", out.option, quoted(out.path));
  std::set<Identity> held;
  size_t entries = 0;
  walk(out.path, 0, named, held, entries);
  for (const FileRead& r : read.list())
    if (held.count(r.id))
      throw std::invalid_argument(
          fmt::format("{} holds {} {}, which this command reads; refusing to replace an input",
                      named, r.role, quoted(r.file)));
}

// The first bytes of a regular file (at most n), or "" when it cannot be read.
std::string head_of(const std::string& path, size_t n) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  std::string head(n, '\0');
  const ssize_t got = fd.valid() ? ::pread(fd.get(), head.data(), n, 0) : -1;
  head.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return head;
}

bool starts_with(const std::string& text, std::string_view prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// A report page or heat map this attograd (or an earlier one) wrote: what `page` outputs
// replace without --overwrite, as a build replaces its own outputs.
bool is_attograd_page(const std::string& head) {
  if (starts_with(head, "<svg class=\"heat-map\" id=\"map-")) return true;
  return starts_with(head, "<!DOCTYPE html>\n<html lang=\"en\">") &&
         head.find("<title>attograd report") != std::string::npos;
}

// What is at an existing output, in words: "an attograd checkpoint", "a file of 12 bytes".
std::string what_is_at(const std::string& path, const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return "a folder that is not empty";
  if (is_hdf5_file(path)) return "an HDF5 file (a checkpoint?)";
  if (starts_with(head_of(path, 4), "GGUF")) return "a GGUF model file";
  return fmt::format("a file of {} bytes", static_cast<long long>(st.st_size));
}

// A folder --overwrite may replace holds files alone: a subfolder or anything else in it
// is not something an export wrote, and is kept from being removed.
void refuse_folder_of_more_than_files(const Output& out) {
  const std::string named = fmt::format("{} {}", out.option, quoted(out.path));
  for (const std::string& path : entries_of(out.path, named)) {
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      throw std::invalid_argument(fmt::format(
          "{} holds {} ({}); --overwrite replaces a folder of files only: remove it yourself, or "
          "choose a new or empty folder",
          named, quoted(base::base_name(path)), base::file_kind(st.st_mode)));
  }
}

// A folder holds nothing anyone had: it is empty, or holds only the temporary files of
// writers that were killed (a prepare killed outright), which its next writer removes.
bool holds_nothing(const Output& out) {
  const std::string named = fmt::format("{} {}", out.option, quoted(out.path));
  for (const std::string& path : entries_of(out.path, named))
    if (!base::is_abandoned_partial(path)) return false;
  return true;
}

// What is at the output may be replaced: nothing, an empty file or folder, a page attograd
// wrote, or anything else when --overwrite says so.
void refuse_replacing(const Output& out, bool overwrite) {
  struct stat st;
  if (out.kind == OutputKind::run || ::lstat(out.path.c_str(), &st) != 0) return;
  const bool folder = S_ISDIR(st.st_mode);
  if (folder ? holds_nothing(out) : st.st_size == 0) return;
  if (out.kind == OutputKind::page && S_ISREG(st.st_mode) &&
      is_attograd_page(head_of(out.path, 4096)))
    return;
  if (folder && out.kind == OutputKind::folder && overwrite)
    return refuse_folder_of_more_than_files(out);
  if (overwrite && !folder) return;
  throw std::invalid_argument(
      fmt::format("{} {} already holds {}; give --overwrite to replace it, or choose another {}",
                  out.option, quoted(out.path), what_is_at(out.path, st),
                  out.moved_by.empty() ? out.option : out.moved_by));
}

// A folder output can be made: its parent takes a new entry; what is there is a folder.
void check_can_write_folder(const Output& out) {
  struct stat st;
  if (::lstat(out.path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    throw std::runtime_error(fmt::format("cannot write {} {}: it is {}, not a folder", out.option,
                                         quoted(out.path), base::file_kind(st.st_mode)));
  base::check_can_write(base::folder_of(out.path) + "/.attograd-probe");
}

// "run-hf/" names the folder run-hf.
Output without_trailing_slash(Output out) {
  while (out.path.size() > 1 && out.path.back() == '/') out.path.pop_back();
  return out;
}

}  // namespace

void check_output_rule(const std::vector<Output>& outputs, const NamedPaths& inputs,
                       const OutputClaim& claim) {
  NamedPaths named;
  for (const Output& out : outputs) named.emplace_back(out.option, out.path);
  refuse_shared_outputs(named);
  FilesRead read(inputs);
  for (const Output& given : outputs) {
    if (given.path.empty()) continue;
    const Output out = without_trailing_slash(given);
    refuse_output_over_inputs(out.path, out.option, inputs);  // first: it names both files
    refuse_file_of_input_folder(out, read);
    if (out.kind == OutputKind::folder) {
      check_can_write_folder(out);
      refuse_folder_holding_inputs(out, read);
    } else {
      base::check_can_write(out.path);
    }
    refuse_replacing(out, claim.overwrite);
  }
}

ClaimedOutputs::ClaimedOutputs(const std::vector<Output>& outputs, const NamedPaths& inputs,
                               const OutputClaim& claim) {
  check_output_rule(outputs, inputs, claim);
  if (!claim.lock) return;
  for (const Output& out : outputs)
    if (!out.path.empty())
      locks_.push_back(std::make_unique<OutputLock>(without_trailing_slash(out).path, out.option));
}

}  // namespace io
