#pragma once
// `attograd bench --micro --decode --config NAME`: the decoder's GEMVs (nn::inference::linear,
// one row of x, as a step runs them) on one thread at the config's MLP shapes ([F, C] and
// [C, F]), for bfloat16, Q8_0 and Q4_K weights: G weights/s and GB/s of the weights read,
//   - from memory: as many copies of the matrix as make 256 MB of the format's bytes, each
//     read once a call (more than the L3 holds: what a token's step sees), beside a plain
//     one-thread read of the same bytes (bench::read_gbs);
//   - from the caches: 64 rows of the matrix (under 1 MB) read again and again: the kernel's
//     arithmetic alone, what it could reach were memory faster.
// Medians of 15 calls; the weights are random (the speed does not depend on their values).
#include <string>

#include "nn/config.h"

namespace bench {

int run_decoder_micro(const nn::GPTConfig& model, const std::string& name, bool json);

}  // namespace bench
