#pragma once
// Internal to the decoder (inference::linear, `sample --weights q8_0|q4_k`): the GEMVs over
// rows of ggml blocks, y[r][o] (+)= bias[o] + x[r] . W[o] for a step's few rows r.
//
// Q8_0 (34 bytes per 32 weights: a half scale d, 32 int8 levels q): lane i of `lo` adds
// fma(q[32 b + i] x[32 b + i], d_b, lo[i]) block after block (b = 0, 1, ...; the product
// q x rounded, then one fused multiply-add by the block's scale), lane i of `hi` the same for
// the levels 32 b + 16 + i; the result is the sum over i = 0..15 of (lo[i] + hi[i]), in that
// order from 0, plus the bias. Rows of 2048 weights or more are taken four at a time (each
// block of x loaded once for the four), the rest one at a time: each row's sum the same bits
// whatever the group, the thread or the thread count (tests/test_block_gemv.cpp holds both to that
// order).
//
// Q4_K (144 bytes per 256 weights): ag::quant::dot_q4_k's order (unpack_kernels.h).
#include <cstdint>

namespace nn::inference {

void q8_0_linear(const float* x, int64_t rows, int64_t in, const uint8_t* w, const float* bias,
                 int64_t out, float* y, int64_t ldy, bool accumulate);
void q4_k_linear(const float* x, int64_t rows, int64_t in, const uint8_t* w, const float* bias,
                 int64_t out, float* y, int64_t ldy, bool accumulate);

}  // namespace nn::inference
