#pragma once
// What a run checks before it builds anything large, and the small decisions of its set-up
// (internal to train/: training_run.cpp's set-up reads as its phases).
#include <string>
#include <utility>

#include "io/checkpoint.h"
#include "nn/gpt.h"
#include "train/config.h"

namespace train {

// A checkpoint to continue is a training checkpoint (not a gradient dump, not weights
// only) whose optimiser took one update per step it records: a step count that disagrees
// would change the update's bias correction from the first step on. Null: nothing to check.
void check_resumable(const io::Checkpoint* resumed);

// Refuses, before the text is read, data that alone would not fit in memory.
void check_data_fits(const RunConfig& cfg);

// A resumed run must continue on the text it trained on, wherever that text is now.
void check_same_data(const io::Checkpoint& resumed, const std::string& identity,
                     const RunConfig& cfg);

// --inject-nan PHASE:MODULE[@STEP], a fault-injection aid for testing anomaly detection:
// the module must exist; it arms at STEP (default 1). Returns {spec without step, step}.
std::pair<std::string, int64_t> parse_nan_injection(const std::string& option,
                                                    const nn::GPT& model);

// "runs/shakespeare.h5" -> "shakespeare"
std::string default_run_name(const std::string& out);

}  // namespace train
