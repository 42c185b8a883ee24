#include "base/partial_outputs.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iterator>

namespace base {

namespace {

// A fixed table the handler can read without a lock or an allocation: a slot is written
// while it is reserved and becomes visible to the handler only once it is ready.
enum SlotState : int { kFree = 0, kReserved = 1, kReady = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  std::atomic<unsigned long> order{0};  // later registrations are removed first
  bool folder = false;
  char path[PATH_MAX] = {};
};

Slot g_slots[PartialPath::kMaxPartialPaths];
std::atomic<unsigned long> g_next_order{1};
constexpr int kFatalSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// The files a partial folder holds (it holds nothing else: it was made to hold a writer's
// files), then the folder. Raw getdents64: opendir would allocate.
void remove_folder_of_files(const char* path) {
  const int dir = ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return;
  alignas(8) char buffer[4096];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir, buffer, sizeof buffer);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      const auto* e = reinterpret_cast<const dirent64*>(buffer + at);
      if (e->d_type != DT_DIR) ::unlinkat(dir, e->d_name, 0);
      at += e->d_reclen;
    }
  }
  ::close(dir);
  ::rmdir(path);
}

// Newest first: a folder's files are registered after it and go before it.
void remove_registered() {
  unsigned long below = ~0ul;
  for (;;) {
    int newest = -1;
    unsigned long newest_order = 0;
    for (int i = 0; i < PartialPath::kMaxPartialPaths; ++i) {
      const unsigned long o = g_slots[i].order.load();
      if (g_slots[i].state.load() == kReady && o < below && o > newest_order) {
        newest = i;
        newest_order = o;
      }
    }
    if (newest < 0) return;
    below = newest_order;
    Slot& s = g_slots[newest];
    if (s.folder)
      remove_folder_of_files(s.path);
    else
      ::unlink(s.path);
  }
}

extern "C" void on_fatal_signal(int sig) {
  const int saved_errno = errno;
  remove_registered();  // unlink and rmdir are async-signal-safe
  ::signal(sig, SIG_DFL);
  errno = saved_errno;
  ::raise(sig);  // delivered once the handler returns: the process ends by this signal
}

}  // namespace

void remove_partials_on_fatal_signals() {
  for (int sig : kFatalSignals) {
    struct sigaction now;
    if (::sigaction(sig, nullptr, &now) != 0 || now.sa_handler != SIG_DFL) continue;
    struct sigaction action = {};
    action.sa_handler = on_fatal_signal;
    sigemptyset(&action.sa_mask);
    for (int other : kFatalSignals) sigaddset(&action.sa_mask, other);  // one cleanup at a time
    ::sigaction(sig, &action, nullptr);
  }
}

PartialPath::PartialPath(const std::string& path, Kind kind) {
  if (path.size() >= PATH_MAX) return;
  for (int i = 0; i < kMaxPartialPaths; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kReserved)) continue;
    Slot& s = g_slots[i];
    std::memcpy(s.path, path.c_str(), path.size() + 1);
    s.folder = kind == Kind::folder;
    s.order = g_next_order.fetch_add(1);
    s.state = kReady;
    slot_ = i;
    return;
  }
}

void PartialPath::release() noexcept {
  if (slot_ < 0) return;
  g_slots[slot_].state = kFree;
  slot_ = -1;
}

}  // namespace base
