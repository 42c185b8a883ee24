#include "train/console.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "base/utf8.h"
#include "io/files.h"
#include "train/stop_signals.h"

namespace train {

namespace {

bool g_stdout_was_closed = false;
bool g_stdout_reported = false;

// A descriptor of its own, non-blocking, on what fd writes to when that is a pipe or a
// terminal (a new open file description: the O_NONBLOCK flag is not shared with the shell
// or the launcher that gave us fd); -1 where there is none (a file, a socket). Kept for
// stdout and stderr while they stay the same.
int nonblocking_twin(int fd) {
  struct Twin {
    int fd = -1;
    dev_t dev = 0;
    ino_t ino = 0;
    bool tried = false;
  };
  static Twin twins[3];
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  struct stat st;
  if (fd < 1 || fd > 2 || ::fstat(fd, &st) != 0 ||
      !(S_ISFIFO(st.st_mode) || (S_ISCHR(st.st_mode) && ::isatty(fd))))
    return -1;
  Twin& t = twins[fd];
  if (t.tried && t.dev == st.st_dev && t.ino == st.st_ino) return t.fd;
  if (t.fd >= 0) ::close(t.fd);
  t = {::open(fmt::format("/proc/self/fd/{}", fd).c_str(),
              O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC),
       st.st_dev, st.st_ino, true};
  return t.fd;
}

// Writes all of text to fd; 0 or the errno of the write that failed. A reader that stops
// reading never holds a stopping run: mpirun forwards nothing while it waits to kill its
// ranks (their output a pseudo-terminal), and a rank printing a line a step fills it and
// would wait in write() until the SIGKILL, its checkpoint unsaved. So a pipe or terminal
// is written through a non-blocking twin, waiting in poll() for room, and once a stop
// signal came a write that cannot go on within kStopWaitMs is given up (EAGAIN): the line
// is lost, the save is not.
int write_fully(int fd, std::string_view text, size_t* written = nullptr) {
  constexpr int kStopWaitMs = 200;
  const int twin = nonblocking_twin(fd);
  const int out = twin >= 0 ? twin : fd;
  size_t done = 0;
  int err = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(out, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && twin >= 0) {
      pollfd room{twin, POLLOUT, 0};
      if (::poll(&room, 1, kStopWaitMs) == 0 && StopSignals::requested()) {
        err = EAGAIN;
        break;
      }
      continue;
    }
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (written) *written = done;
  return err;
}

}  // namespace

void guard_standard_streams() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // a closed stdout takes /dev/full: what a command prints there fails, and is reported
    // (cli's exit status), rather than vanishing as into /dev/null
    const int null = ::open(fd == 1 ? "/dev/full" : "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (null >= 0 && null != fd) ::dup2(null, fd), ::close(null);
    if (fd == 1) g_stdout_was_closed = true;
  }
}

namespace {
bool g_quiet = false;
}  // namespace

void set_quiet(bool quiet) {
  g_quiet = quiet;
}

bool stdout_problem_reported() {
  return g_stdout_reported;
}

void say(std::string_view text) {
  if (g_quiet) return;
  // stdio's buffer is flushed first, so lines printed through it elsewhere keep their order
  std::fflush(stdout);
  const int err = g_stdout_was_closed ? EBADF : write_fully(STDOUT_FILENO, text);
  // a line given up while stopping (the reader not reading) is not worth a warning
  if (err == 0 || g_stdout_reported || (err == EAGAIN && StopSignals::requested())) return;
  g_stdout_reported = true;
  warn(
      fmt::format("cannot write to standard output ({}); the run goes on without its progress "
                  "lines, and its checkpoint is still written",
                  std::strerror(err)));
}

void warn(std::string_view text) {
  if (g_quiet) return;
  std::fflush(stderr);
  write_fully(STDERR_FILENO, fmt::format("attograd: warning: {}\n", base::printable(text)));
}

void notice(std::string_view text) {
  std::fflush(stderr);
  write_fully(STDERR_FILENO, text);
}

MetricsFile::MetricsFile(const std::string& path, bool replace) : path_(path) {
  fd_ = io::open_append_output(path, "metrics file");
  if (replace && ::ftruncate(fd_, 0) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error(
        fmt::format("cannot empty metrics file '{}' (--overwrite): {}", path, std::strerror(err)));
  }
}

MetricsFile::~MetricsFile() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsFile::append(std::string_view line) {
  if (fd_ < 0) return;
  std::string text = cut_line_ ? "\n" : "";
  text.append(line).push_back('\n');
  size_t written = 0;
  const int err = write_fully(fd_, text, &written);
  if (err == 0 || written > 0) cut_line_ = err != 0;
  if (err == 0 || reported_) return;
  reported_ = true;
  warn(
      fmt::format("cannot write metrics file '{}' ({}); training goes on, and lines from here on "
                  "may be missing from it",
                  path_, std::strerror(err)));
}

}  // namespace train
