#include "train/snapshot_gate.h"

namespace train {

void SnapshotGate::open() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (state_ != State::closed) return;
  state_ = State::open;
  changed_.notify_all();
}

void SnapshotGate::close() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (state_ == State::taken) wait_for_good(lock);
  if (state_ == State::open) state_ = State::closed;
}

void SnapshotGate::end() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (state_ == State::taken) wait_for_good(lock);
  state_ = State::ended;
  changed_.notify_all();
}

bool SnapshotGate::take() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return state_ == State::open || state_ == State::ended; });
  if (state_ == State::ended) return false;
  state_ = State::taken;
  return true;
}

bool SnapshotGate::taken() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return state_ == State::taken;
}

// The thread that took the gate ends the process (launcher_stop.cpp): until then the run
// changes nothing it copies.
void SnapshotGate::wait_for_good(std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [] { return false; });
}

}  // namespace train
