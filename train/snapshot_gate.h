#pragma once
// When another thread may copy a run's state while the run goes on (train/launcher_stop.h
// forks a saver from the thread that takes the stop signals). The run's thread keeps the
// gate closed while it changes what a checkpoint holds (the update, the history, a save's
// use of libhdf5) and opens it while it only computes (forward and backward, evaluation,
// waiting on the other processes). Another thread that takes the gate keeps it for good:
// the run's thread then stops at its next close(), and the state stays as it was when
// taken.
//
//   SnapshotGate gate;                      // closed, by the run's thread
//   { const SnapshotGate::Open open(gate);  // forward and backward: the state is unchanged
//     forward_backward(); }                 // (blocks here for good once taken)
//   gate.end();                             // the loop is over: take() gives up
//
//   if (gate.take()) fork_saver();          // another thread
#include <condition_variable>
#include <mutex>

namespace train {

class SnapshotGate {
 public:
  SnapshotGate() = default;
  SnapshotGate(const SnapshotGate&) = delete;
  SnapshotGate& operator=(const SnapshotGate&) = delete;

  // The run's thread: open for a scope that changes nothing a checkpoint holds.
  void open();
  // Closed again; blocks for good once another thread took the gate.
  void close();
  // The run's loop is over: a take() waiting, or to come, gives up (returns false). Blocks
  // for good when the gate was taken already.
  void end();

  // Another thread: waits until the gate is open, then keeps it for good (true), or returns
  // false once the run ended.
  bool take();
  bool taken() const;

  class Open {
   public:
    explicit Open(SnapshotGate* gate) : gate_(gate) {
      if (gate_) gate_->open();
    }
    ~Open() {
      if (gate_) gate_->close();
    }
    Open(const Open&) = delete;
    Open& operator=(const Open&) = delete;

   private:
    SnapshotGate* gate_;
  };

 private:
  enum class State { closed, open, taken, ended };
  void wait_for_good(std::unique_lock<std::mutex>& lock);

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  State state_ = State::closed;
};

}  // namespace train
