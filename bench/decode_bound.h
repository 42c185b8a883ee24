#pragma once
// `attograd bench --decode`: the cached decoder's speed at a config's shape against the bound
// the machine sets. A token reads every weight matrix once (nn::GPT::streamed_matrices:
// the blocks' projections and the head), so it cannot take less than those bytes over the
// memory's read bandwidth, measured here on the same matrices and threads as the decoder.
// (Weights under 256 MB may stay in the caches: memory's bandwidth is then read on a buffer
// of 256 MB, and the bound, loose, may be passed.) Printed for float32, bfloat16, Q8_0 and Q4_K
// weights (`sample --weights bf16|q8_0|q4_k`; Q8_0: 34 bytes per 32 weights, Q4_K 144 per
// 256, Q8_0 where rows are not a multiple of 256): bytes a token, the read bandwidth, the
// bound in tokens/s, the decoder's tokens/s and its share of the bound. The formats take
// turns over 3 rounds, each round bounded by reads just before and after its steps (a
// shared machine's memory moves by a third from minute to minute): each figure is the median
// of its rounds, with their range, and Q8_0 over bf16 the median of the rounds' ratios.
//
//   attograd bench --decode --config smollm2-135m --threads 2
#include <cstdint>
#include <utility>
#include <vector>

#include "nn/config.h"

namespace bench {

// GB/s of a plain read of float32 spans (four sums of 16 lanes, nothing to wait for), each
// of `threads` threads reading its share of every span, best of `rounds`.
double read_gbs(const std::vector<std::pair<const float*, int64_t>>& spans, int threads,
                int rounds);

int run_decode(const nn::GPTConfig& model, const std::string& name, int threads, int64_t steps,
               bool json);

}  // namespace bench
