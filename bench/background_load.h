#pragma once
// `attograd bench --background-load`: one other busy program on the machine while the
// steps run, as on a shared workstation or a CI runner. A child process spins on one of the
// cores this process may use (the last of its affinity set), pinned there with
// sched_setaffinity, from the benchmark's first step to its end; the destructor kills and
// reaps it, and the kernel kills it if the benchmark dies first (PR_SET_PDEATHSIG), so it
// never outlives the benchmark however that ends.
#include <sys/types.h>

namespace bench {

class BackgroundLoad {
 public:
  BackgroundLoad();  // forks the spinning child; throws std::runtime_error if it cannot
  ~BackgroundLoad();
  BackgroundLoad(const BackgroundLoad&) = delete;
  BackgroundLoad& operator=(const BackgroundLoad&) = delete;

  int cpu() const { return cpu_; }  // the core the child is pinned to
  pid_t pid() const { return pid_; }

 private:
  int cpu_ = -1;
  pid_t pid_ = -1;
};

}  // namespace bench
