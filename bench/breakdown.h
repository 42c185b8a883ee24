#pragma once
// `attograd bench --breakdown`: where the timed steps' time went, by kernel class
// (autograd/profile.h's rows: each GEMM class with its kernel and GFLOP/s, the attention's
// forward and backward with theirs, each op's forward and backward node, roundings to
// bfloat16, copies, the optimiser, the reduction wait), per step, beside the measured
// step; the time outside every timer is a row of its own, so the rows sum to the step.
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/profile.h"

namespace bench {

struct BreakdownRun {
  std::string title;            // "base bf16 (dropout 0, 1 process x 2 threads)"
  int64_t steps = 0;            // timed steps the rows were summed over
  double measured_seconds = 0;  // those steps' measured time, summed
  // oneDNN matmuls looked up in gemm.cpp's cache over those steps, and those made
  // (ops/gemm.h's onednn_cache_stats): a step that makes none reuses every primitive
  int64_t onednn_lookups = 0, onednn_made = 0;
};

// The rows per step, most time first, as a table or (json) one JSON object on a line.
void print_breakdown(const BreakdownRun& run, const std::vector<ag::profile::Row>& rows, bool json);

}  // namespace bench
