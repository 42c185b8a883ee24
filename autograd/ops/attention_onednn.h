#pragma once
// Internal: the fused attention's bf16 products on oneDNN's matmuls, a candidate beside the
// tile kernels (ops/attention.cpp) for the measured choice (ops/gemm_tuning.h). oneDNN
// picks its own kernel for the CPU: AMX tiles where the CPU has them (Intel Sapphire Rapids
// and later), AVX-512 BF16 dot products elsewhere.
//
// Blocked, flash-style: a call takes a group of key and value rows (with the query rows
// that read them: grouped-query attention folds a group's heads into the products' rows),
// a block of queries and a block of keys, so each product is one batched matmul over the
// group's rows of 64 queries by 64 keys, large enough for AMX tiles and one call for all
// the rows (ops/batched_matmul.h; oneDNN's brgemm kernels need dense operands, so the
// blocks are copied out first, a copy per 64 multiply-adds of each element). Causal blocks
// wholly above the diagonal are skipped.
//
// Per group of rows and block of queries, for each block of keys they see (s its raw
// scores, in float32):
//   forward   s = q kᵀ; per query m' = max(m, scale max s), e = exp(scale s - m'),
//             l = l exp(m - m') + sum e, o = o exp(m - m') + bf16(e keep) v; at the end
//             o /= l and lse = m + log l (the online softmax)
//   backward  s = q kᵀ and dp = do vᵀ; p = exp(scale s - lse), a = p keep,
//             ds = p (dp keep - delta) scale with delta = do . o; then dv += bf16(a)ᵀ do,
//             dk += bf16(ds)ᵀ q, dq += bf16(ds) k
// The softmax statistics stay float32 as in the tiles, and the values rounded to bfloat16
// before a product are the tiles' kind (e keep, a and ds; e relative to the running
// maximum), so the kernels differ by float32 summation and those roundings. A group of rows
// is one thread's work from start to end, each oneDNN call runs whole on that thread, and
// the groups and blocks come from the problem's size: results do not depend on the thread
// count. The same code on float64 operands with exact products (plain loops) is its twin,
// which the float64 gradient checks run (Spec::blocked_twin).
#include <cstdint>

#include "autograd/bfloat16.h"
#include "autograd/ops/attention_rows.h"

namespace ag::detail::attention {

// Whether oneDNN has bfloat16 kernels for s's products on this CPU (it has only reference
// code without AVX-512, and for ONEDNN_MAX_CPU_ISA capped below AVX512_CORE).
bool onednn_available(const Spec& s);

// What a call takes: key and value rows, queries and keys
struct Blocking {
  int64_t kv_rows, queries, keys;
};
Blocking blocking_of(const Spec& s);
// Tests: blocks of this many queries and keys (0, 0: the kernel's own) for the blocked
// kernel, and its float64 twin for float64 attention (Spec::blocked_twin)
void set_blocks_for_tests(int64_t queries, int64_t keys, bool twin);
bool blocked_twin_for_tests();

// o [R, T, Dv] and lse [R, T] from q [R, T, D], k [R / group, S, D], v [R / group, S, Dv]:
// In bfloat16 (oneDNN) with Out float, or In = Out = double (the twin)
template <typename In, typename Out>
void blocked_forward(const Spec& s, const In* q, const In* k, const In* v, Out* o, Out* lse);
// dq, dk, dv (the shapes of q, k, v) from the forward's operands, its output o (rounded to
// bfloat16, as backward keeps it), lse and the output's gradient dout
template <typename In, typename Out>
void blocked_backward(const Spec& s, const In* q, const In* k, const In* v, const In* o,
                      const Out* lse, const In* dout, Out* dq, Out* dk, Out* dv);

}  // namespace ag::detail::attention
