#pragma once
// Fast unpacking of a frozen base's blocks (packed_weight.h) and the decoder's block rows:
// rows of Q4_K or Q8_0 blocks to float32 or bfloat16 by AVX-512 or else AVX2 where the CPU
// has it (chosen at run time, whatever the build targets), by the format table's reference
// arithmetic (block_formats.h, ggml's dequantize_row_*) otherwise. Every kernel gives the
// reference's floats bit for bit (the same products and differences, one rounding each: the
// file is compiled without contraction), and bfloat16 as ag::to_bfloat16 rounds those floats
// (ties to even, NaN kept quiet, subnormals kept: not the CPU's VCVTNEPS2BF16, which
// flushes them). tests/test_unpack_kernels.cpp holds both kernels to the reference.
#include <cstdint>
#include <vector>

#include "autograd/bfloat16.h"

namespace ag::quant {

enum class UnpackKernel : uint8_t { reference, avx2, avx512 };

// The kernel this CPU runs: avx512 where it has AVX-512 F and BW, else avx2 where it has AVX2,
// FMA and F16C.
UnpackKernel unpack_kernel();
// Whether this CPU can run k (an AVX-512 CPU runs the AVX2 kernel too).
bool can_run(UnpackKernel k);

// n weights (a whole number of blocks) of Q4_K (256 weights, 144 bytes a block) or Q8_0
// (32 weights, 34 bytes) from `in`.
void unpack_q4_k(const uint8_t* in, int64_t n, float* out, UnpackKernel k = unpack_kernel());
void unpack_q4_k(const uint8_t* in, int64_t n, bfloat16* out, UnpackKernel k = unpack_kernel());
void unpack_q8_0(const uint8_t* in, int64_t n, float* out, UnpackKernel k = unpack_kernel());
void unpack_q8_0(const uint8_t* in, int64_t n, bfloat16* out, UnpackKernel k = unpack_kernel());

// x . w for one row w of n weights of Q4_K blocks (n a whole number of blocks): the
// decoder's GEMV (`sample --weights q4_k`), each weight dequantized in registers as
// unpack_q4_k gives it, times x[i], added into 32 sums by one fused multiply-add each:
// lane i of `low` takes weights 32 k + i, lane i of `high` 32 k + 16 + i, sub-block k after
// sub-block (k = 0, 1, ...); the result is sum over i = 0..15 of (low[i] + high[i]), in that
// order from 0. The same bits by either kernel: a float32 GEMV over the dequantized weights
// in that order (tests/test_unpack_kernels.cpp), as the Q8_0 GEMV pairs its 32 weights.
float dot_q4_k(const float* x, const uint8_t* w, int64_t n, UnpackKernel k = unpack_kernel());
// s[j] = dot_q4_k(x, w + j row_bytes, n) for the j < rows (1 to 4) rows from w, the same
// bits, their sums' chains side by side (one row's two chains of fused multiply-adds kept a
// core waiting on their latency); each row's bytes `ahead` on are asked for as it is read
// (the next group's, or a single row's own further on).
void dot_q4_k_rows(const float* x, const uint8_t* w, int64_t row_bytes, int64_t n, int rows,
                   int64_t ahead, float* s, UnpackKernel k = unpack_kernel());

// Q4_K weights by activations rounded to 8 bits (`sample --weights q4_k`, llama.cpp's kind of
// arithmetic: its Q4_K dot products take x as Q8_K blocks). A row x of n values (a whole
// number of 256-value blocks) rounded: per block b, m the largest |x|, scale dx_b = m / 127
// (a float), levels p = x (127 / m) rounded to the nearest integer, ties to even (|p| <= 127);
// levels 0 where dx_b is 0; a block holding an infinity or a NaN: levels 0, dx_b a NaN, so the
// row's sum is a NaN. sub_sums[8 b + j]: the sum of sub-block j's 32 levels.
struct Q8KRow {
  std::vector<int8_t> levels;
  std::vector<int32_t> sub_sums;
  std::vector<float> scales;
};
void round_to_q8_k(const float* x, int64_t n, Q8KRow& out, UnpackKernel k = unpack_kernel());
// s[j] = x . w_j for the j < rows (1 to 4) rows of Q4_K blocks from w (row_bytes apart),
// the order the same by either kernel, in 8 lanes l = 0..7: per block b, the exact integers
//   isum_l = sum over sub-blocks j of sc_j (sum over its weights 4 l..4 l + 3 of q p)
//   msum_l = m_l sub_sums[8 b + l]
// (sc_j, m_j the block's 6-bit scales and mins, q its 4-bit levels), then
//   lo[l] = fma(float(isum_l), d dx_b, lo[l]); hi[l] = fma(float(-msum_l), dmin dx_b, hi[l])
// block after block from 0 (d dx_b and dmin dx_b one float product each; float(isum_l)
// rounded where |isum_l| >= 2^24); the sum is lo[l] + hi[l] added from l = 0. Each row's
// bytes `ahead` on are asked for as it is read.
void dot_q4_k_q8_rows(const Q8KRow& x, const uint8_t* w, int64_t row_bytes, int64_t n, int rows,
                      int64_t ahead, float* s, UnpackKernel k = unpack_kernel());

}  // namespace ag::quant
