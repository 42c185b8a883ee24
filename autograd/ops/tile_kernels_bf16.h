#pragma once
// Internal: the fused attention's tile products on the CPU's BF16 dot products (AVX-512
// BF16's vdpbf16ps: 32 bfloat16 multiply-adds into 16 float32 sums per instruction, twice
// the work of an FMA, issued at the same rate on AMD Zen 4 and 5). The same tiles, strips
// and causal skipping as ops/tile_kernels.h, for the bf16 autocast path of
// ops/attention.cpp; the softmax between the products stays float32 and stays there.
//
// vdpbf16ps sums two products per float32 lane, so every operand is packed in 32-bit words
// holding the two bfloat16 values adjacent along the reduction (the lower half the even
// index). An A operand is read a word at a time (broadcast); a B operand a row of words:
//   b[p][c] = (x[2p][c], x[2p + 1][c]) for the sum over rows of x ("paired rows"), or
//   bt[p][x] = (src[x][2p], src[x][2p + 1]) for the sum along rows of src ("transposed").
// A missing partner (an odd count) is a zero. Every kernel does the same arithmetic in the
// same order whichever thread runs it; the order differs from the FMA kernels' (each lane
// adds two products at once), so the two agree to float32 summation, not bit for bit.
//
// Which kernels the attention uses is measured per size class (ops/gemm_tuning.h: these,
// the FMA kernels and oneDNN's matmuls (ops/attention_onednn.h) timed on one row's forward
// and backward, the fastest kept and cached per CPU), with rule_units() as the rule where
// nothing is measured: the BF16 units where the CPU has AVX-512 BF16 and is AMD (on Intel
// without AMX, vdpbf16ps retires half the multiply-adds of an FMA: docs/performance.md).
// ATTOGRAD_ATTENTION_BF16=units|fma|onednn forces one (one the CPU lacks is an error).
#include <cstdint>

#include "autograd/bfloat16.h"

namespace ag::tile::bf16 {

using word = uint32_t;  // two bfloat16 values

// Whether the CPU has AVX-512 BF16
bool units_available();
// The kernels forced by ATTOGRAD_ATTENTION_BF16 or by a test (test_hooks.h's
// force_attention_kernel_for_tests), else Forced::none: measure
enum class Forced { none, units, fma, onednn };
Forced forced();
// Where nothing is measured (ATTOGRAD_TUNE=off, a rank that adopts a table): AMD with
// AVX-512 BF16
bool rule_units();

// ---- packing

// Rows of bfloat16 values n long (n even) are rows of n / 2 words as they lie
inline const word* words(const bfloat16* rows) {
  return reinterpret_cast<const word*>(rows);
}
// bt[p][x] = (src[x][2p], src[x][2p + 1]) for x < m, 0 for the lanes up to kTile; n even
void transposed_words(const bfloat16* src, int64_t m, int64_t n, word* bt);
// dst[p][c] = (src[2p][c], src[2p + 1][c]) for c < n (src rows n long), 0 for c up to w and
// for the partner of an odd last row: ceil(rows / 2) rows of w words
void paired_rows(const bfloat16* src, int64_t rows, int64_t n, int64_t w, word* dst);
// A key-major float32 tile t[j][x] (kTile lanes) rounded to bfloat16 (ties to even) and
// paired down the keys, dst[p][x] = (t[2p][x], t[2p + 1][x]) for the keys j < nk ...
void key_pairs(const float* tile, int64_t nk, word* dst);
// ... or along its lanes, dst[j][p] = (t[j][2p], t[j][2p + 1]), kTile / 2 words a key
void lane_pairs(const float* tile, int64_t nk, word* dst);

// ---- the products, as tile_kernels.h's of the same names, on words

// st[j][x] = alpha sum_p rows[j][p] . bt[p][x] for keys j < nk (np words a row): the
// key-major score tile, hidden whole vectors skipped when causal
void key_major_tile(bool causal, int64_t i0, int64_t nk, const word* rows, int64_t np,
                    const word* bt, float alpha, float* st);
// out[x][0, w) = sum_p tile[p][x] . b[p][0, w) over the key pairs each strip of the m
// queries sees (tile from key_pairs, b paired rows w words wide)
void query_rows(bool causal, int64_t i0, int64_t m, int64_t nk, const word* tile, const word* b,
                int64_t w, float* out, int64_t ldo);
// acc[j][0, w) (+)= sum_p tile[j][p] . b[p][0, w) over the query pairs that see key j
// (tile from lane_pairs, b paired rows of the tile's queries); keys from `fresh` on written
void key_rows(bool causal, int64_t i0, int64_t m, int64_t nk, int64_t fresh, const word* tile,
              const word* b, int64_t w, float* acc, int64_t lda);

}  // namespace ag::tile::bf16
