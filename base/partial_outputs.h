#pragma once
// What a command has begun to write and not yet finished, removed on every way out: by the
// owner's destructor on a return or an exception, and by a signal handler when a signal
// whose default action ends the process (SIGINT, SIGTERM, SIGHUP, SIGQUIT) arrives where
// nothing else takes it. A SIGKILL or a power loss cannot be caught: the next writer of the
// same output removes what a writer that is gone left (atomic_file.h, io/files.h).
//
//   base::remove_partials_on_fatal_signals();   // once, at start (cli/main.cpp)
//   base::PartialPath tmp(".run.h5.partial-123-abcdef");  // registered
//   ...                                         // Ctrl-C here: the handler unlinks it
//   tmp.release();                              // renamed into place: nothing to remove
#include <string>

namespace base {

// Installs the handler for each of those signals whose disposition is the default (an
// ignored signal stays ignored: `nohup` keeps meaning what it says). The handler removes
// every registered path, restores the default and raises the signal again, so the process
// ends as it would have, by that signal. Calling it again changes nothing.
void remove_partials_on_fatal_signals();

// One registered path: a file (unlinked) or a folder made to hold a writer's files (its
// files unlinked, then the folder). At most kMaxPartialPaths at once; more are not
// registered (their owners still remove them; only a signal would leave them).
class PartialPath {
 public:
  enum class Kind { file, folder };
  static constexpr int kMaxPartialPaths = 256;

  explicit PartialPath(const std::string& path, Kind kind = Kind::file);
  ~PartialPath() { release(); }
  PartialPath(const PartialPath&) = delete;
  PartialPath& operator=(const PartialPath&) = delete;
  PartialPath(PartialPath&& other) noexcept : slot_(other.slot_) { other.slot_ = -1; }

  // No longer removed on a signal (renamed into place, or removed by the owner).
  void release() noexcept;

 private:
  int slot_ = -1;
};

}  // namespace base
