#include "autograd/adaptive_threads.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "autograd/threading.h"

namespace ag {

TeamChooser::TeamChooser(int most) : most_(most), current_(most) {
  if (most < 1) throw std::invalid_argument("TeamChooser: need at least 1 thread");
}

namespace {
// The lower median of the last `last` times (of two, the faster).
double median(const std::deque<double>& xs, size_t last) {
  std::vector<double> v(xs.end() - static_cast<std::ptrdiff_t>(std::min(last, xs.size())),
                        xs.end());
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}
}  // namespace

void TeamChooser::observed(double ms) {
  ++steps_;
  ++since_probe_;
  if (steps_ == 1) return;  // the first step makes caches and kernels: not a measure of speed
  if (probe_ > 0 && probe_warmups_ > 0) {
    --probe_warmups_;
    return;
  }
  if (probe_ > 0) return settle(ms);
  recent_.push_back(ms);
  if (recent_.size() > kWindow) recent_.pop_front();
  consider_probe();
}

// Keeps the team just tried if it beat the current one's latest steps (their median: the
// time they take now, after a drift too).
void TeamChooser::settle(double probe_ms) {
  const bool larger = probe_ > current_;
  if (probe_ms < kSwitch * median(recent_, 3)) {
    current_ = probe_;
    recent_.assign(1, probe_ms);
    reprobe_gap_ = kFirstReprobe;
  } else {  // the current team stays: its time now is the reference a later drift is seen from
    recent_.erase(recent_.begin(), recent_.end() - std::min<std::ptrdiff_t>(3, recent_.size()));
    if (larger) reprobe_gap_ = std::min(2 * reprobe_gap_, kMaxReprobe);
  }
  probe_ = 0;
  since_probe_ = 0;
}

void TeamChooser::consider_probe() {
  if (most_ == 1) return;
  const bool first = steps_ == 3;  // two measured steps: try one thread fewer, once
  const double best = *std::min_element(recent_.begin(), recent_.end());
  const bool drifted = recent_.size() >= 3 && median(recent_, 3) > kDrift * best;
  if (current_ > 1 && (first || drifted))
    probe_ = current_ - 1;
  else if (current_ < most_ && since_probe_ >= reprobe_gap_) {
    probe_ = current_ + 1;
    probe_warmups_ = 1;
  }
}

namespace {
bool adaption_wanted() {
  const char* v = std::getenv("ATTOGRAD_ADAPT_THREADS");
  if (v == nullptr || std::strcmp(v, "1") == 0) return true;
  if (std::strcmp(v, "0") == 0) return false;
  throw std::invalid_argument("ATTOGRAD_ADAPT_THREADS must be 0 or 1, got '" +
                              std::string(v).substr(0, 64) + "'");
}

// The cores this process may run on (taskset, a container's cpuset), or `threads` where
// that cannot be read.
int allowed_cores(int threads) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return threads;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace

AdaptiveThreads::AdaptiveThreads(int threads)
    : chooser_(std::min(threads, allowed_cores(threads))),
      threads_(threads),
      team_(threads),
      adapting_(threads > 1 && adaption_wanted()) {}

AdaptiveThreads::Step::Step(AdaptiveThreads& owner)
    : owner_(owner), start_(std::chrono::steady_clock::now()) {
  if (!owner_.adapting_) return;
  const int team = owner_.chooser_.next();
  if (team != owner_.team_) set_num_threads(team);
  owner_.team_ = team;
  if (team < owner_.threads_) ++owner_.reduced_steps_;
}

AdaptiveThreads::Step::~Step() {
  if (!owner_.adapting_) return;
  owner_.chooser_.observed(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count());
}

}  // namespace ag
