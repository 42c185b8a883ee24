#pragma once
// Hugging Face's hub cache (where from_pretrained downloads a model), and the one rule for
// symbolic links in a model folder (see interop.h for the map). The cache keeps a repo as
//
//   models--org--name/blobs/<hash>                    the files (sha256, or git's sha1)
//   models--org--name/snapshots/<commit>/config.json -> ../../blobs/<hash>
//   models--org--name/refs/main                       the commit `main` names
//
// so a snapshot's files are all links. A link in a model folder (or the file PATH itself)
// is followed only when it is such a link: in a folder REPO/snapshots/COMMIT, exactly
// ../../blobs/<40 or 64 hex digits>, to a regular file there (not a link, not a folder).
// Any other link (absolute, out of the repo, into another repo, a chain, to a folder) is an
// InteropError naming the file, the link and the reason, before anything is read through it.
//
//   std::string folder = interop::hub_snapshot_of("models--openai-community--gpt2");
//   // "models--openai-community--gpt2/snapshots/607a30d7..." (refs/main's commit)
#include <sys/types.h>

#include <optional>
#include <string>

namespace interop {

// path itself, unless it is a hub cache repo folder (snapshots/ and blobs/ in it, no
// config.json): then the snapshot its refs/main names, once refs/main holds a commit hash
// (40 or 64 hex digits, a newline after it allowed) and that snapshot is a folder there.
// Throws InteropError naming refs/main or the folder.
std::string hub_snapshot_of(const std::string& path);

// The file a link leads to, as the kernel identifies it.
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
};

// The link rule for path: nullopt when path is not a symbolic link (or is not there: the
// open names that); for a link a snapshot may hold, the identity of the blob it leads to,
// which the file opened must then have (a link swapped meanwhile is refused). Throws
// InteropError for any other link.
std::optional<FileIdentity> allowed_link(const std::string& path);

// Whether folder has an entry called name, of any kind: a dangling link counts, so that it
// is refused by name rather than taken for a missing file.
bool has_entry(const std::string& folder, const std::string& name);

}  // namespace interop
