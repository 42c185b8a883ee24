#include "train/stop_signals.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

namespace train {

namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
std::atomic<int> g_count{0};
std::atomic<int> g_first{0};
struct sigaction g_previous[std::size(kStopSignals)];

extern "C" void on_stop_signal(int sig) {
  // every later write to a pipe whose reader left raises SIGPIPE again: it stops a run
  // once, and is not a user asking a second time
  if (sig == SIGPIPE && g_count.load() > 0) return;
  int none = 0;
  g_first.compare_exchange_strong(none, sig);  // before the count, which readers look at
  if (g_count.fetch_add(1) != 1) return;       // the second signal is answered, once
  // only async-signal-safe calls here: one fixed message, once
  static const char kAgain[] =
      "\nattograd: already stopping: the checkpoint is written first (SIGKILL would end the run "
      "at once and lose the steps since the last checkpoint)\n";
  const ssize_t ignored = ::write(STDERR_FILENO, kAgain, sizeof(kAgain) - 1);
  (void)ignored;
}

}  // namespace

StopSignals::StopSignals() {
  g_count = 0;
  g_first = 0;
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a signal must not make a read or write of ours fail
  for (size_t i = 0; i < std::size(kStopSignals); ++i)
    ::sigaction(kStopSignals[i], &action, &g_previous[i]);
}

StopSignals::~StopSignals() {
  for (size_t i = 0; i < std::size(kStopSignals); ++i)
    ::sigaction(kStopSignals[i], &g_previous[i], nullptr);
}

int StopSignals::count() {
  return g_count.load();
}
int StopSignals::first() {
  return g_first.load();
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

}  // namespace train
