#include "train/stop_signals.h"

#include <fcntl.h>
#include <omp.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

#include "train/stop_reason.h"

namespace train {

namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
std::atomic<int> g_count{0};
std::atomic<int> g_first{0};
std::atomic<pid_t> g_first_sender{0};  // the PID that sent the first signal (0: the kernel)
struct sigaction g_previous[std::size(kStopSignals)];

std::atomic<int> g_launcher_pipe{-1};  // the receiver's notification pipe (its write end)
std::atomic<bool> g_launcher_stop{false};

bool sent_by_parent(const siginfo_t* info) {
  return info && info->si_code == SI_USER && info->si_pid != 0 && info->si_pid == ::getppid();
}

extern "C" void on_stop_signal(int sig, siginfo_t* info, void*) {
  // every later write to a pipe whose reader left raises SIGPIPE again: it stops a run
  // once, and is not a user asking a second time
  if (sig == SIGPIPE && g_count.load() > 0) return;
  int none = 0;
  if (g_first.compare_exchange_strong(none, sig))  // before the count, which readers look at
    g_first_sender = info && info->si_code == SI_USER ? info->si_pid : 0;
  // the launcher's signal may follow one of someone else's: it still comes before a SIGKILL
  if (sent_by_parent(info) && !g_launcher_stop.exchange(true)) {
    const char byte = 1;
    const ssize_t ignored = ::write(g_launcher_pipe.load(), &byte, 1);
    (void)ignored;
  }
  if (g_count.fetch_add(1) != 1) return;  // the second signal is answered, once
  // only async-signal-safe calls here: one fixed message, once
  static const char kAgain[] =
      "\nattograd: already stopping: the checkpoint is written first (SIGKILL would end the run "
      "at once and lose the steps since the last checkpoint)\n";
  const ssize_t ignored = ::write(STDERR_FILENO, kAgain, sizeof(kAgain) - 1);
  (void)ignored;
}

// The signals a person or a scheduler sends (not SIGPIPE: that one is raised in the thread
// whose write failed, the thread that logs, never inside a kernel).
sigset_t sent_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  return set;
}

// Why a thread of its own: a handler that only counts is safe by itself, but being
// interrupted by a signal was not safe for every kernel. On this project's development
// VM (an Intel Xeon with AVX-512), a stop signal landing on a thread inside oneDNN's
// AVX-512 kernels corrupted the heap in about one run in ten (tests/cli signals_save: the
// same runs with oneDNN held to AVX2, or with every GEMM on OpenBLAS, never did). So while
// a StopSignals lives, the sent signals are blocked in the thread that made it and in the
// OpenMP threads (threads started later inherit the mask), and one thread that only waits
// takes them.
thread_local sigset_t t_saved_mask;

void block_in_team(const sigset_t& set) {
  pthread_sigmask(SIG_BLOCK, &set, &t_saved_mask);
#pragma omp parallel
  if (omp_get_thread_num() != 0) pthread_sigmask(SIG_BLOCK, &set, &t_saved_mask);
}

void restore_in_team() {
#pragma omp parallel
  if (omp_get_thread_num() != 0) pthread_sigmask(SIG_SETMASK, &t_saved_mask, nullptr);
  pthread_sigmask(SIG_SETMASK, &t_saved_mask, nullptr);
}

}  // namespace

struct StopSignals::Receiver {
  int wake[2] = {-1, -1};      // closed by the destructor: the thread's poll sees the end
  int launcher[2] = {-1, -1};  // the handler's byte: the launcher's stop came
  std::mutex mutex;
  std::function<void()> on_launcher_stop;
  std::thread thread;

  // Waits for the end, running the launcher's action when its stop comes.
  void serve() {
    for (;;) {
      pollfd fds[2] = {{wake[0], POLLIN, 0}, {launcher[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) continue;  // EINTR: the handler ran here
      if (fds[0].revents != 0) return;
      char byte;
      if ((fds[1].revents & POLLIN) == 0 || ::read(launcher[0], &byte, 1) != 1) continue;
      std::function<void()> action;
      {
        const std::lock_guard<std::mutex> lock(mutex);
        action = on_launcher_stop;
      }
      if (action) action();
    }
  }
  void start(const sigset_t& sent) {
    if (::pipe2(wake, O_CLOEXEC) != 0 || ::pipe2(launcher, O_CLOEXEC | O_NONBLOCK) != 0)
      throw std::system_error(errno, std::generic_category());
    g_launcher_pipe = launcher[1];
    thread = std::thread([this, sent] {
      pthread_sigmask(SIG_UNBLOCK, &sent, nullptr);
      serve();
    });
  }
  void close_pipes() {
    g_launcher_pipe = -1;
    for (int* pipe : {wake, launcher})
      for (int i : {0, 1})
        if (pipe[i] >= 0) ::close(pipe[i]), pipe[i] = -1;
  }
};

StopSignals::StopSignals() : receiver_(std::make_unique<Receiver>()) {
  g_count = 0;
  g_first = 0;
  g_first_sender = 0;
  g_launcher_stop = false;
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_sigaction = on_stop_signal;
  sigemptyset(&action.sa_mask);
  // SA_RESTART: a signal must not make a read or write of ours fail; SA_SIGINFO: who sent it
  action.sa_flags = SA_RESTART | SA_SIGINFO;
  for (size_t i = 0; i < std::size(kStopSignals); ++i)
    ::sigaction(kStopSignals[i], &action, &g_previous[i]);
  const sigset_t sent = sent_signals();
  block_in_team(sent);
  try {
    receiver_->start(sent);
  } catch (const std::system_error&) {  // no receiver: the team takes them, as it used to
    receiver_->close_pipes();
    restore_in_team();
  }
}

void StopSignals::on_launcher_stop(std::function<void()> action) {
  const std::lock_guard<std::mutex> lock(receiver_->mutex);
  receiver_->on_launcher_stop = std::move(action);
}

StopSignals::~StopSignals() {
  if (receiver_->thread.joinable()) {
    ::close(receiver_->wake[1]);
    receiver_->wake[1] = -1;
    receiver_->thread.join();
  }
  for (size_t i = 0; i < std::size(kStopSignals); ++i)
    ::sigaction(kStopSignals[i], &g_previous[i], nullptr);
  receiver_->close_pipes();  // after the handlers are gone: none writes to a closed pipe
  restore_in_team();
  // a stop belongs to the run that caught it: a TrainingRun driven step by step in the same
  // process afterwards (the library's API, a test) must not find it requested
  g_count = 0;
  g_first = 0;
}

PipeSignalIgnored::PipeSignalIgnored() {
  struct sigaction ignore;
  std::memset(&ignore, 0, sizeof ignore);
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, &previous_);
}

PipeSignalIgnored::~PipeSignalIgnored() {
  ::sigaction(SIGPIPE, &previous_, nullptr);
}

int StopSignals::count() {
  return g_count.load();
}
int StopSignals::first() {
  return g_first.load();
}

std::string stop_reason(bool under_launcher) {
  const int sig = StopSignals::first();
  // Open MPI's mpirun answers Ctrl-C (SIGINT) and a SIGTERM of its own alike: it sends each
  // rank SIGCONT, then SIGTERM one odls_base_sigkill_timeout later, so a rank never sees the
  // SIGINT; the sender (the launcher, this process's parent) tells the two apart from a
  // SIGTERM someone sent the rank itself
  if (sig == SIGTERM && under_launcher && g_first_sender.load() != 0 &&
      g_first_sender.load() == ::getppid())
    return "SIGINT (Ctrl-C) or SIGTERM to mpirun, which sends the ranks SIGTERM";
  return signal_name(sig);
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    default: return "a signal";
  }
}

int stopped_exit_code() {
  const int sig = StopSignals::first();
  return 128 + (sig != 0 ? sig : SIGTERM);
}

int stop_signal_of(int exit_code) {
  for (const int sig : kStopSignals)
    if (exit_code == 128 + sig) return sig;
  return 0;
}

}  // namespace train
