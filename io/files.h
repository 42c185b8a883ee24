#pragma once
// The files a run reads and writes, made safe against a hostile or careless neighbour:
// inputs are read only when they are regular files (base/posix_file.h), an output never
// names an input or another output, one run at a time writes an output, temporary files are
// created exclusively (base/atomic_file.h) and the rescue copy goes into a private folder.
//
//   // before any work (each throw is a usage error: exit 2)
//   io::refuse_shared_outputs({{"--out", cfg.out}, {"--metrics", cfg.metrics}});
//   io::refuse_output_over_inputs(cfg.out, "--out", {{"--data", cfg.data}, {"--config", config}});
//   base::check_can_write(cfg.out);
//   io::OutputLock lock(cfg.out, "--out");  // held until the run ends
//   int64_t bytes = base::regular_file_size(cfg.data, "data file");  // for the memory plan
//   std::string text = base::read_input_file(cfg.data, "data file");
//   int metrics = io::open_append_output(cfg.metrics, "metrics file");
//   ...
//   base::write_file_atomically(cfg.out, image);  // if that fails:
//   base::write_file_atomically(io::make_rescue_path(cfg.out), image);
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/atomic_file.h"
#include "base/partial_outputs.h"
#include "base/posix_file.h"

namespace io {

// Whether a and b name one file: the same inode when both exist (a hard link, or a symbolic
// link to it, included), else the same path once resolved as far as it exists.
bool same_file(const std::string& a, const std::string& b);

// Whether a file starts with HDF5's signature (a checkpoint, a gradient dump), so a
// checkpoint given where something else belongs (or the reverse) is named for what it is.
// Opened without blocking (a FIFO answers false); false when it cannot be read.
bool is_hdf5_file(const std::string& path);

// {option or role, path}: {"--data", "corpus.txt"}. An empty path is skipped.
using NamedPaths = std::vector<std::pair<std::string, std::string>>;

// Throws std::invalid_argument ("--out 'x.txt' is the same file as --data 'corpus.txt';
// refusing to overwrite an input") when output names the same file as one of inputs, by
// path, hard link or symbolic link. An output that does not exist yet is fine.
void refuse_output_over_inputs(const std::string& output, const std::string& option_name,
                               const NamedPaths& inputs);

// Throws std::invalid_argument when two of outputs name one file, whether it exists yet or
// not ("--metrics 'a' is the same file as --out 'a'; give each output its own file").
void refuse_shared_outputs(const NamedPaths& outputs);

// A user-named file that lines are appended to (--metrics), opened O_APPEND and created
// 0666 & ~umask when missing. Returns the descriptor (O_CLOEXEC; the caller closes it and
// reports its write errors). Throws std::runtime_error naming the file when it cannot be
// opened, is a symbolic link (never followed) or is not a regular file (a FIFO never blocks).
int open_append_output(const std::string& path, const std::string& what);

// Where to put the run's state when its output cannot be written: a fresh private folder
// (mode 0700, made by mkdtemp) in $TMPDIR, or /tmp when that is unset or fails, and in it a
// file named after out's base name. std::runtime_error when no folder can be made.
std::string make_rescue_path(const std::string& out);

// One writer per output: an advisory flock on ".NAME.lock" beside output, holding the
// owner's PID. A second OutputLock on the same output, in this process or another, throws
// std::runtime_error("'run.h5' is being written by another attograd run (PID 1234); wait for
// it or choose another --out"). The lock file is made with O_EXCL and only such a file is
// written; one already there is opened read-only without O_CREAT, and refused when it is a
// symbolic link, not a regular file, or has more than one name (a hard link planted there
// would make its PID overwrite another file). Released, and the lock file removed, when
// destroyed, or by a fatal signal's handler (base/partial_outputs.h); the kernel releases it
// when the process dies, and the next run removes a file left behind (it never writes into
// it) and makes its own.
class OutputLock {
 public:
  explicit OutputLock(const std::string& output, const std::string& option_name = "--out");
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  const std::string& lock_path() const { return lock_path_; }

  // For a forked child that finishes this process's work after it is gone (a saver,
  // train/launcher_stop.cpp): every lock this process holds becomes the child's (the flock
  // is shared through fork; the lock files now name the child's PID, so a run refused
  // meanwhile names the process to wait for), and release_held() removes them when the
  // work is done. The child calls both; no other thread may make or drop a lock meanwhile.
  static void hand_over_held_to_this_process();
  static void release_held();

 private:
  void release();

  std::string lock_path_;
  int fd_ = -1;
  pid_t owner_ = 0;  // a forked child must not remove its parent's lock file
  std::optional<base::PartialPath> on_signal_;  // a fatal signal's handler removes it too
};

}  // namespace io
