#pragma once
// Fewer threads while another program holds a core. A team of threads is as slow as its
// slowest member: when another busy program shares one of two cores, the thread on that
// core runs half the time, every parallel region waits for it, and a 2-thread step takes
// longer than a 1-thread step on the free core (measured in docs/performance.md, "Under
// load"). Steps are timed and the team is chosen by what the steps show: a step that
// drifts well above its recent best tries one thread fewer (a try that loses makes the
// drifted time the new reference), and a smaller team tries one more after 4 steps, then
// after twice as many as the last try each time it loses (at most kMaxReprobe), so the
// team grows back soon after the core is free again and tries cost little while it is not.
// A larger team is judged by its second step: the first wakes the thread it gains, whose
// caches are cold (on tiny that step took twice the next). The step after the first two
// measured ones (the faster of them the reference: one alone misled a quiet run) tries
// one thread fewer once, for a machine that was busy from the start; and the
// team never exceeds the cores this process may run on (sched_getaffinity: taskset, a container's
// cpuset). The results never depend on the team: every kernel gives the same bits on any thread
// count (parallel.h; OpenBLAS's through openblas_split_keeps_bits's rule). Off with
// ATTOGRAD_ADAPT_THREADS=0.
#include <chrono>
#include <cstdint>
#include <deque>

namespace ag {

// The policy alone, on step times given to it (tests drive it with made-up times).
class TeamChooser {
 public:
  static constexpr double kDrift = 1.3;        // a step this much over the recent best is slowed
  static constexpr double kSwitch = 0.9;       // a tried team is kept if at least 10% faster
  static constexpr int64_t kFirstReprobe = 4;  // steps before a larger team is tried
  static constexpr int64_t kMaxReprobe = 32;   // the longest wait before another try
  static constexpr size_t kWindow = 16;        // steps the recent best is taken over

  explicit TeamChooser(int most);  // most: the thread count asked for, >= 1
  int next() const { return probe_ > 0 ? probe_ : current_; }  // the team for the next step
  void observed(double ms);  // the step run with next()'s team took ms

 private:
  void settle(double probe_ms);
  void consider_probe();

  int most_, current_, probe_ = 0;
  int probe_warmups_ = 0;  // steps of the tried team still to pass before it is judged
  int64_t steps_ = 0, since_probe_ = 0, reprobe_gap_ = kFirstReprobe;
  std::deque<double> recent_;  // the latest steps at current_, newest last
};

// The chooser applied to a training loop: step() sets the thread count for the step
// (set_num_threads) and times it until the returned guard goes out of scope.
class AdaptiveThreads {
 public:
  explicit AdaptiveThreads(int threads);
  bool adapting() const { return adapting_; }
  int team() const { return team_; }                        // the threads of the latest step
  int64_t reduced_steps() const { return reduced_steps_; }  // run with fewer threads than asked

  class Step {
   public:
    explicit Step(AdaptiveThreads& owner);
    ~Step();
    Step(const Step&) = delete;
    Step& operator=(const Step&) = delete;

   private:
    AdaptiveThreads& owner_;
    std::chrono::steady_clock::time_point start_;
  };
  Step step() { return Step(*this); }

 private:
  TeamChooser chooser_;
  int threads_, team_;
  bool adapting_;
  int64_t reduced_steps_ = 0;
};

}  // namespace ag
