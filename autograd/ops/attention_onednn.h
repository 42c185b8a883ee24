#pragma once
// Internal: the fused attention's bf16 products on oneDNN's matmuls, a candidate beside the
// tile kernels (ops/attention.cpp) for the measured choice (ops/gemm_tuning.h). oneDNN
// picks its own kernel for the CPU: AMX tiles where the CPU has them (Intel Sapphire Rapids
// and later), AVX-512 BF16 dot products elsewhere; oneDNN 2.6 has no public brgemm API, so
// a product is one matmul primitive over a block of queries of one (batch, head) row,
// which amortises the call over up to kBlockScores scores.
//
// Per row r and block of queries [i0, i1) (the keys it sees: nk):
//   forward   s = q kᵀ (oneDNN), then per query, in float32: m = max s, e = exp(scale s - m)
//             keep, l = sum exp(scale s - m), lse = m + log l; o = bf16(e) v (oneDNN) / l
//   backward  s = q kᵀ and dp = do vᵀ (oneDNN); p = exp(scale s - lse), a = p keep,
//             ds = p (dp keep - delta) scale with delta = do . o; then dv += bf16(a)ᵀ do,
//             dk += bf16(ds)ᵀ q, dq = bf16(ds) k (oneDNN)
// The softmax statistics stay float32 as in the tiles, and the values rounded to bfloat16
// before a product are the tiles' own (e keep, a and ds), so the two differ only by the
// order of float32 sums. A row is one thread's work from start to end, and every oneDNN
// call runs whole on that thread, so results do not depend on the thread count.
#include <cstdint>

#include "autograd/bfloat16.h"
#include "autograd/ops/attention_rows.h"

namespace ag::detail::attention {

// Scores held by one block of queries (float32, per thread; the block's bfloat16 copies
// and backward's dp beside them): 2^18, 1 MiB.
constexpr int64_t kBlockScores = 1 << 18;

// Whether oneDNN has bfloat16 kernels for s's products on this CPU (it has only reference
// code without AVX-512, and for ONEDNN_MAX_CPU_ISA capped below AVX512_CORE).
bool onednn_available(const Spec& s);

// o [R, T, Dv] and lse [R, T] from q [R, T, D], k [R, S, D], v [R, S, Dv]
void onednn_forward(const Spec& s, const bfloat16* q, const bfloat16* k, const bfloat16* v,
                    float* o, float* lse);
// dq, dk, dv (float32, the shapes of q, k, v) from the forward's operands, its output o
// (rounded to bfloat16, as backward keeps it), lse and the output's gradient dout
void onednn_backward(const Spec& s, const bfloat16* q, const bfloat16* k, const bfloat16* v,
                     const bfloat16* o, const float* lse, const bfloat16* dout, float* dq,
                     float* dk, float* dv);

}  // namespace ag::detail::attention
