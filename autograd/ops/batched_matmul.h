#pragma once
// Internal: batched matrix products on the calling thread, for kernels that split their
// work among threads themselves (the blocked attention, ops/attention_onednn.h). Every
// matrix is dense and row-major (its rows side by side, batch after batch): oneDNN 2.6
// runs its brgemm kernels (AMX tiles where the CPU has them, AVX-512 BF16 elsewhere) only
// on such operands, and falls back to its older jit GEMM (no AMX) for any other stride.
// One call covers every matrix of the batch, so the call's cost is paid once for all.
#include <cstdint>

#include "autograd/bfloat16.h"

namespace ag::detail {

// C[b] = A[b] B[b] (+ C[b] where accumulate) for b < batch: C[b] is [m, n]; A[b] is [m, k],
// or [k, m] read transposed where ta; B[b] is [k, n], or [n, k] read transposed where tb.
struct BatchedProduct {
  int64_t batch, m, n, k;
  bool ta, tb;
};

// On oneDNN's bfloat16 kernels, whole on this thread (the primitive is made for one thread,
// so it never splits K; made once per shape and kept). false, C untouched, where oneDNN has
// only its reference code for it on this CPU.
bool onednn_batched_product(const BatchedProduct& p, const bfloat16* A, const bfloat16* B, float* C,
                            bool accumulate);

// The same product in float64 by plain loops: the blocked attention's float64 twin, which
// its gradient checks run
void plain_batched_product(const BatchedProduct& p, const double* A, const double* B, double* C,
                           bool accumulate);

}  // namespace ag::detail
