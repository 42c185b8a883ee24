#include "bench/background_load.h"

#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace bench {

namespace {

// The highest-numbered core this process may run on.
int last_allowed_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    throw std::runtime_error(
        fmt::format("--background-load: sched_getaffinity: {}", std::strerror(errno)));
  for (int cpu = CPU_SETSIZE - 1; cpu >= 0; --cpu)
    if (CPU_ISSET(cpu, &set)) return cpu;
  throw std::runtime_error("--background-load: this process may run on no core");
}

// The child: async-signal-safe calls only (the parent has OpenMP threads), then a busy loop
// until it is killed: by the parent, or by the kernel when the parent dies.
[[noreturn]] void spin_on(int cpu, pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) _exit(0);  // the parent died before prctl took effect
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
  volatile unsigned long long spins = 0;
  for (;;) spins = spins + 1;
}

}  // namespace

BackgroundLoad::BackgroundLoad() : cpu_(last_allowed_cpu()) {
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0)
    throw std::runtime_error(fmt::format("--background-load: fork: {}", std::strerror(errno)));
  if (pid_ == 0) spin_on(cpu_, parent);
}

BackgroundLoad::~BackgroundLoad() {
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace bench
