#pragma once
// How long a run is when it is given in epochs, and what its schedule is (run_schedule.cpp
// also holds TrainingRun's schedule, ETA, early stopping and best checkpoint).
#include <cstdint>

namespace train {

// The steps of `epochs` passes over `per_epoch` units (a task's training examples, or a
// text's training tokens) at `per_step` units a step (sequences, or sequences times the
// context, of every micro-batch of every process): rounded up, so that the last pass is
// whole. Throws std::invalid_argument when the count would not fit in 63 bits.
int64_t epoch_steps(int64_t epochs, int64_t per_epoch, int64_t per_step);

}  // namespace train
