#pragma once
// Where a run's lines go. A run must outlive its audience: a closed terminal (SIGHUP, then
// EIO), a reader that went away (`attograd train | head`: EPIPE), a closed stdout (EBADF)
// or a full disk under --metrics must never stop it, and must never go unnoticed. The
// first failed write to each stream is reported once on stderr; the run goes on, and later
// writes are still tried.
#include <fmt/format.h>

#include <string>
#include <string_view>

namespace train {

// Called first thing in main(): a standard descriptor that was closed (`attograd ... >&-`)
// is opened on /dev/null (stdout on /dev/full, where every write fails), so that no file
// we open later takes its number and receives our progress lines; say() then reports the
// closed stdout once.
void guard_standard_streams();
// Whether say() already reported that stdout cannot be written (a run's progress lines are
// not its result: the run goes on and exits as it would).
bool stdout_problem_reported();

// On ranks other than 0 of a distributed run nothing is printed (say and warn are silent).
void set_quiet(bool quiet);

// Writes text to stdout and flushes it.
void say(std::string_view text);
template <typename... Args>
void sayf(fmt::format_string<Args...> format, Args&&... args) {
  say(fmt::format(format, std::forward<Args>(args)...));
}

// "attograd: warning: <text>" on stderr (which has nowhere to report its own failures).
void warn(std::string_view text);

// Writes text to stderr as it is, best-effort: a stderr that is gone (a closed terminal, a
// reader that left, a full device) never throws, so the save that follows a stop notice
// still happens. Printed on every rank: callers choose the rank.
void notice(std::string_view text);
template <typename... Args>
void noticef(fmt::format_string<Args...> format, Args&&... args) {
  notice(fmt::format(format, std::forward<Args>(args)...));
}

// A user-named JSON-lines file opened for appending (never through a symbolic link), or
// emptied first when `replace` (train --overwrite).
class MetricsFile {
 public:
  explicit MetricsFile(const std::string& path, bool replace = false);  // throws naming the path
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;

  // One line (a newline is added); a failure is reported once and the run goes on.
  void append(std::string_view line);

 private:
  std::string path_;
  int fd_ = -1;
  bool reported_ = false;
  bool cut_line_ = false;  // a write failed part-way: start the next line on a line of its own
};

}  // namespace train
