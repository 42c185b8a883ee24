// Rank 0's save when an MPI launcher stops the job (launcher_stop.h), and the saver process
// it forks.
#include "train/launcher_stop.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <thread>

#include "io/files.h"
#include "train/console.h"
#include "train/stop_reason.h"
#include "train/training_run.h"

namespace train {

namespace {

// Out of the rank's process group, which the launcher kills: its own session (a process
// that is no group leader may start one). The run's stop signals no longer concern it.
bool g_in_saver = false;  // a saver saves itself: it is out of reach of the kill already

void become_saver() {
  g_in_saver = true;
  ::setsid();
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) std::signal(sig, SIG_IGN);
  io::OutputLock::hand_over_held_to_this_process();
}

int exit_status_of(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// A pipe or a terminal gets a descriptor of its own, non-blocking (setting O_NONBLOCK on
// the inherited one would change it for the launcher too); a file is written as it is.
int saver_descriptor(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return -1;
  if (!S_ISFIFO(st.st_mode) && !(S_ISCHR(st.st_mode) && ::isatty(fd))) return fd;
  const std::string path = fmt::format("/proc/self/fd/{}", fd);
  return ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
}

}  // namespace

int save_in_own_session(const std::function<int()>& save,
                        const std::function<void(pid_t saver)>& started) {
  const pid_t pid = ::fork();
  if (pid < 0) return save();  // no process to spare: saved here, as before (racing the kill)
  if (pid == 0) {
    become_saver();
    int code = 1;
    try {
      code = save();
    } catch (...) {
    }
    ::_exit(code);
  }
  started(pid);
  return exit_status_of(pid);
}

void save_outliving_this_process(const std::string& path, const io::Checkpoint& checkpoint) {
  int message[2];
  if (g_in_saver || ::pipe2(message, O_CLOEXEC) != 0) return io::save_checkpoint(path, checkpoint);
  const pid_t run = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(message[0]), ::close(message[1]);
    return io::save_checkpoint(path, checkpoint);
  }
  if (pid == 0) {
    ::setsid();
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) std::signal(sig, SIG_IGN);
    int code = 0;
    try {
      io::save_checkpoint(path, checkpoint);
    } catch (const std::exception& e) {
      const std::string what = e.what();
      [[maybe_unused]] const ssize_t n = ::write(message[1], what.data(), what.size());
      code = 1;
    }
    if (::getppid() != run) {  // the run was killed meanwhile: its locks are left to us
      io::OutputLock::hand_over_held_to_this_process();
      io::OutputLock::release_held();
    }
    ::_exit(code);
  }
  ::close(message[1]);
  std::string error;
  char buffer[4096];
  for (ssize_t n; (n = ::read(message[0], buffer, sizeof buffer)) != 0;)
    if (n > 0)
      error.append(buffer, static_cast<size_t>(n));
    else if (errno != EINTR)
      break;
  ::close(message[0]);
  if (exit_status_of(pid) != 0)
    throw io::CheckpointError(error.empty() ? fmt::format("'{}': the saving process failed", path)
                                            : error);
}

void say_from_saver(const std::string& text, bool to_stderr) {
  constexpr int kWaitMs = 200;
  const int fd = to_stderr ? STDERR_FILENO : STDOUT_FILENO;
  const int out = saver_descriptor(fd);
  if (out < 0) return;
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(out, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    pollfd room{out, POLLOUT, 0};
    if (n < 0 && errno == EAGAIN && ::poll(&room, 1, kWaitMs) > 0) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  if (out != fd) ::close(out);
}

// ------------------------------------------------------------------ TrainingRun's part
// In the thread that takes the signals, on rank 0, at the launcher's stop. Never returns
// once it has the state: the process ends here (the run's thread waits at the gate).
void TrainingRun::save_before_the_kill() {
  if (!gate_.take()) return;  // the loop is over: finish() saves, as after any stop
  const bool abandoned = engine_->in_step();
  const int64_t at = abandoned ? progress_.step - 1 : progress_.step;
  const std::string stopping = fmt::format(
      "{}attograd: {}: stopping after step {}{}", report_->fresh_line(), stop_reason(true), at,
      abandoned ? fmt::format(" (step {} abandoned)", at + 1) : std::string());
  if (at == progress_.last_saved) {  // saved already: only the locks are left to remove
    noticef("{}; {} holds it already\n", stopping, cfg_.out);
    io::OutputLock::release_held();
    ::_exit(0);
  }
  ::_exit(save_in_own_session([&] { return save_as_saver(at); },
                              [&](pid_t saver) {
                                noticef(
                                    "{}; saving {} in process {}, which finishes the save if "
                                    "mpirun kills this one first\n",
                                    stopping, cfg_.out, saver);
                              }));
}

// The launcher's stop on another rank: it holds nothing rank 0 does not, so it stops
// computing (the saver wants the cores) and ends, a moment after rank 0 has taken its copy
// (an exchange that fails because a rank left must not end rank 0 before it has).
void TrainingRun::leave() {
  constexpr auto kRankZerosMoment = std::chrono::milliseconds(500);
  if (!gate_.take()) return;
  std::this_thread::sleep_for(kRankZerosMoment);
  ::_exit(0);
}

// In the saver: the checkpoint (or its rescue copy), what became of it, and the locks.
int TrainingRun::save_as_saver(int64_t at) {
  const auto start = std::chrono::steady_clock::now();
  int code = 0;
  try {
    const SavedTo saved = save_or_rescue(at);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (saved.path != cfg_.out) {
      say_from_saver(fmt::format("attograd: error: {}; the run's state (step {}) was saved to {} "
                                 "instead; continue this run with: {}\n",
                                 saved.out_error, at, saved.path, continue_command(saved.path)),
                     true);
      code = 1;
    } else {
      say_from_saver(saved_line(at, seconds));
      if (at < cfg_.steps)
        say_from_saver(
            fmt::format("attograd: continue this run with: {}\n", continue_command(cfg_.out)),
            true);
    }
  } catch (const std::exception& e) {
    say_from_saver(fmt::format("attograd: error: {}; nothing was saved\n", e.what()), true);
    code = 1;
  }
  io::OutputLock::release_held();
  return code;
}

}  // namespace train
