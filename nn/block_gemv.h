#pragma once
// Internal to the decoder (inference::linear, `sample --weights q8_0|q8_0-f32|q4_k`): the GEMVs
// over rows of ggml blocks, y[r][o] (+)= bias[o] + x[r] . W[o] for a step's few rows r.
//
// Q8_0 by float32 (WeightFormat::q8_0_f32; 34 bytes per 32 weights: a half scale d, 32 int8 levels
// q): lane i of `lo` adds fma(q[32 b + i] x[32 b + i], d_b, lo[i]) block after block (b = 0, 1,
// ...; the product q x rounded, then one fused multiply-add by the block's scale), lane i of `hi`
// the same for the levels 32 b + 16 + i; the result is the sum over i = 0..15 of (lo[i] + hi[i]),
// in that order from 0, plus the bias. Rows of 2048 weights or more are taken four at a time (each
// block of x loaded once for the four), the rest one at a time: each row's sum the same bits
// whatever the group, the thread or the thread count (tests/test_block_gemv.cpp holds both to that
// order).
//
// Q8_0 by Q8_0 (WeightFormat::q8_0, llama.cpp's arithmetic for Q8_0 weights): each row of x is
// first rounded to Q8_0 blocks of its own, per 32 values x with m the largest |x|: levels p = x
// (127 / m) rounded to the nearest integer (ties to even), scale dx = m / 127 rounded to a half
// (levels 0 where dx is 0; a block holding an infinity or a NaN: levels 0, dx a NaN, so the row's
// sum is a NaN). Each block b's sum of q p is an exact integer; lane l of one sum of 16 lanes adds
// fma(float(sum_b), d_b dx_b, acc[l]) for the blocks b = 16 g + l, g = 0, 1, ... (d_b dx_b, two
// halves, is exact); the lanes past a row's last block add fma(0, 0, acc[l]); the result is acc[0]
// + ... + acc[15] in that order from 0, plus the bias. The weights are read interleaved
// (interleave_q8_0, the same 34 bytes per 32 weights a row): per group of 16 blocks (fewer in a
// row's last group, n blocks), their n half scales, then 8 chunks of 4 n bytes, chunk j holding
// levels 4j..4j+3 of each block in turn, each level plus 128 as an unsigned byte (so that one VNNI
// instruction multiplies 64 of them by x's signed levels; -128 times the sum of x's levels undoes
// the 128). One weight row at a time, against every row of x. Where the CPU has no AVX-512 VNNI the
// same exact sums are taken by AVX2's 16-bit pair products (block_gemv_q8.cpp), or lane by lane
// without AVX2: the same bits, slower.
//
// Q4_K (144 bytes per 256 weights) by float32 (WeightFormat::q4_k_f32): ag::quant::dot_q4_k's
// order (unpack_kernels.h). Q4_K by Q8_K (WeightFormat::q4_k, llama.cpp's kind of arithmetic):
// each row of x rounded by ag::quant::round_to_q8_k, each sum ag::quant::dot_q4_k_q8_rows's.
#include <cstdint>

namespace nn::inference {

void q8_0_linear(const float* x, int64_t rows, int64_t in, const uint8_t* w, const float* bias,
                 int64_t out, float* y, int64_t ldy, bool accumulate);
// Rows of `in` weights (a multiple of 32) as Q8_0 blocks, `rows` of them, into the
// interleaved layout q8_0_q8_linear reads, at `to` (as many bytes).
void interleave_q8_0(const uint8_t* blocks, int64_t rows, int64_t in, uint8_t* to);
void q8_0_q8_linear(const float* x, int64_t rows, int64_t in, const uint8_t* w, const float* bias,
                    int64_t out, float* y, int64_t ldy, bool accumulate);
void q4_k_linear(const float* x, int64_t rows, int64_t in, const uint8_t* w, const float* bias,
                 int64_t out, float* y, int64_t ldy, bool accumulate);
void q4_k_q8_linear(const float* x, int64_t rows, int64_t in, const uint8_t* w, const float* bias,
                    int64_t out, float* y, int64_t ldy, bool accumulate);

}  // namespace nn::inference
