#pragma once
// Internal: the GEMMs every matmul-like op runs (ops/matmul.cpp, the autocast paths).
// float64 goes to OpenBLAS. float32 goes to oneDNN or OpenBLAS, bfloat16 operands
// (autocast, autograd/autocast.h) to oneDNN's BF16 kernels (AMX or AVX-512 BF16) or widened
// to float32 for either library: whichever was measured fastest on this CPU for the GEMM's
// size class (gemm_tuning.h); where measuring is off or not allowed, by the fixed rules
// below (f32_backend by shape, bf16_backend by CPU). Every candidate sums each product
// exactly in float32; only the order of the sums differs between them.
//
// Operands are described as BLAS sees them: a row-major matrix as it lies in memory, or
// the transpose of one, with its leading dimension; so q @ k^T and the backward's
// g @ W^T copy nothing. Results are thread-count invariant: OpenBLAS's AVX-512 sgemm splits
// only M and N, and a oneDNN GEMM is cut into blocks of output rows or columns by problem
// size (never by thread count), each computed by one thread in one oneDNN call, made and run
// with one OpenMP thread (oneDNN would otherwise split K for some shapes, and its sums
// would depend on the thread count);
// inside a parallel region (a task of matmul.cpp's run_pair) the blocks become tasks. How
// the blocks are cut (OneDnnLayout: standard or large blocks, B repacked by every call or
// packed once per GEMM) is itself a measured candidate, recorded per size class; a whole
// GEMM as one oneDNN call on oneDNN's own threads is not one, as nothing guarantees that
// oneDNN leaves K whole on every thread count. A block's operands that are strided (A read
// transposed out of a wider matrix, B's or C's columns cut along N) are copied dense for
// its call: oneDNN 2.6 runs its brgemm kernels, AMX's among them, only on dense operands.
#include <cstdint>
#include <functional>

#include "autograd/bfloat16.h"
#include "autograd/tensor.h"

namespace ag::detail {

// How this process multiplies autocast's bfloat16 operands (always stored as bfloat16),
// chosen once from the CPU:
//  - onednn: oneDNN's BF16 dot-product kernels, where those outrun float32 FMAs: AMD Zen 4
//    and later (AVX-512 BF16 at twice the f32 rate, measured on an EPYC: 770 against
//    350 GFLOP/s), or AMX.
//  - openblas: the operands widened to float32 and multiplied by the float32 GEMM (oneDNN's
//    or OpenBLAS's, f32_backend), where BF16 dot products are slower than FMAs (Intel
//    without AMX: vdpbf16ps retires half the multiply-adds of vfmadd231ps per cycle,
//    measured on a Xeon model 207) or missing.
// Products of bfloat16 values are exact in float32, so both sum the same products in
// float32; only the order of the sums differs. ATTOGRAD_BF16_GEMM=onednn|openblas overrides.
enum class Bf16Backend { onednn, openblas };
Bf16Backend bf16_backend();

struct GemmOperand {
  bool trans;  // stored as the transpose: element (i, j) at j * ld + i
  int64_t ld;
};

// Which library multiplies a float32 GEMM, by shape. Measured with `attograd bench --micro`
// over the training GEMMs of the tiny, small and base configs (docs/performance.md):
// oneDNN's float32 kernels, one output block per thread, beat OpenBLAS's sgemm on every
// forward and input-gradient shape (1.0x to 2.3x, most where K is small and OpenBLAS's
// packing dominates); OpenBLAS wins the weight gradients (A transposed) whose output has
// 2^18 elements or more. Below 2^16 multiply-adds OpenBLAS keeps them: no kernel to compile
// per shape. ATTOGRAD_F32_GEMM=openblas|onednn overrides.
enum class F32Backend { openblas, onednn };
constexpr double kOneDnnMinWork = 1 << 16;
constexpr int64_t kBlasWeightGradOutputs = 1 << 18;
F32Backend f32_backend(const GemmOperand& oa, int64_t M, int64_t N, int64_t K);

// How a GEMM can read a rows x cols matrix with strides (sr, sc), if it can.
bool gemm_layout(int64_t rows, int64_t cols, int64_t sr, int64_t sc, GemmOperand& out);

// The last two dims of x as a GEMM operand; x becomes a contiguous copy when no layout fits
// (an expanded or doubly strided view).
GemmOperand gemm_operand(Tensor& x);

// What a GEMM does to its result besides the product: a bias row added to every row, and
// rows_done(row0, rows) called on finished rows while they are still in cache (every row
// exactly once; calls for different rows may run at the same time on different threads).
// oneDNN adds the bias in its kernel and calls rows_done after each block of output rows;
// elsewhere C starts as the bias and rows_done runs over the finished C. Either way each
// element is the same single float32 sum, product + bias.
template <typename T>
struct GemmEpilogue {
  const T* bias = nullptr;  // [N]
  std::function<void(int64_t row0, int64_t rows)> rows_done;
};

// C [M, N] (leading dimension N) = A [M, K] B [K, N] + beta C (+ bias), beta 0 or 1.
void gemm(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N, int64_t K,
          const float* A, const float* B, float* C, float beta = 0,
          const GemmEpilogue<float>& epilogue = {});
void gemm(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N, int64_t K,
          const double* A, const double* B, double* C, double beta = 0,
          const GemmEpilogue<double>& epilogue = {});
// bfloat16 operands, float32 accumulation and result, by the backend bf16_backend() names.
void gemm(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N, int64_t K,
          const bfloat16* A, const bfloat16* B, float* C, float beta = 0,
          const GemmEpilogue<float>& epilogue = {});
// How a oneDNN GEMM is cut into single-threaded calls; each way is a candidate of the tuner
// (gemm_tuning.h's onednn_* kernels), all from the problem's size, never the thread count:
//  - standard: output blocks of at least 2^21 multiply-adds, at most 16 of them;
//  - large_blocks: fewer, larger blocks (at least 2^23 multiply-adds, at most 4, and never
//    fewer than two where the standard cut has two or more), so that each call is big
//    enough for AMX's tiles to amortise their set-up;
//  - packed_b: B reordered once per GEMM into the layout oneDNN's kernel prefers (its
//    format_tag::any), shared by every block along M, instead of each block's call
//    repacking it from the plain layout. Blocks along N (N > M) share no B: they run plain.
//    Nothing packed outlives the GEMM, so no pack can be stale after an optimiser step.
struct OneDnnLayout {
  bool large_blocks = false;
  bool packed_b = false;
};

// Each library alone, whatever the backend rules say (gemm() above follows them): oneDNN,
// cut as `layout` says, on float32 or on bfloat16 (its BF16 kernels; widened where it has
// none); OpenBLAS's sgemm. For the measurements behind the rules, and tests of both.
void gemm_onednn(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N, int64_t K,
                 const float* A, const float* B, float* C, float beta = 0,
                 const GemmEpilogue<float>& epilogue = {}, OneDnnLayout layout = {});
void gemm_onednn(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N, int64_t K,
                 const bfloat16* A, const bfloat16* B, float* C, float beta = 0,
                 const GemmEpilogue<float>& epilogue = {}, OneDnnLayout layout = {});

// oneDNN's primitive cache since the process began: lookups that found a made matmul, and
// those that made one (each distinct block shape, layout and epilogue once).
struct OneDnnCacheStats {
  int64_t hits = 0, made = 0;
};
OneDnnCacheStats onednn_cache_stats();
// Whether oneDNN's kernel for a block of this shape (float32 or bfloat16 operands) reads B
// from a layout of its own on this CPU, so that the _packed kernels exist: false where it
// reads B as given (gemm:jit's bfloat16 on a CPU without BF16 units) or has no kernel.
bool onednn_packs_b(bool bf16, const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N,
                    int64_t K);
void gemm_openblas(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N, int64_t K,
                   const float* A, const float* B, float* C, float beta = 0,
                   const GemmEpilogue<float>& epilogue = {});

// C [M, N] (leading dimension ldc) = A [M, K] B^T (B [N, K]) + beta C, whole, on the calling
// thread, for callers that share a matrix's outputs among threads themselves (the cached
// decoder): by a library whose sums for an output do not depend on the columns beside it
// in the call, so that any share gives the same bits: OpenBLAS where
// openblas_split_keeps_bits (threading.h), else oneDNN's sgemm (measured so on an AMD EPYC
// Zen 3 at every split tried).
void sgemm_nt_here(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                   int64_t ldb, float beta, float* C, int64_t ldc);

// a [..., M, K] @ b [..., K, N] -> [batch..., M, N], both rank >= 2, through gemm() (each
// operand as it lies where a GEMM can read it); not recorded. bfloat16 operands give a
// float32 result.
Tensor matmul_forward(Tensor a, Tensor b);

// Under autocast, whether a GEMM of this layout and shape pays for bfloat16 on this CPU
// (docs/mixed-precision.md, "Where bf16 does not pay"). false where its two classes, bf16 and
// f32, were measured (gemm_tuning.h) and float32 came out ahead: the bf16 class kept a
// widened kernel (float32's kernels after a widening pass), or float32's kernel beat
// oneDNN's bfloat16 one by the tuning margin. The caller then multiplies its float32
// operands as fp32 does. true where nothing is measured (ATTOGRAD_TUNE=off,
// ATTOGRAD_BF16_GEMM, GEMMs too small to tune, a class no rank measured). Measures the
// classes on made-up operands when they are not decided yet.
bool bf16_pays(bool ta, bool tb, int64_t M, int64_t N, int64_t K);

// One oneDNN matmul on bfloat16 operands, whole, on the calling thread: C [M, N] (leading
// dimension ldc) = A B, or + C with beta 1. For kernels that split their work themselves
// (the attention's oneDNN products, one row of heads per thread). false, C untouched, where
// oneDNN has no bfloat16 kernel for it on this CPU.
bool onednn_matmul_here(const GemmOperand& oa, const GemmOperand& ob, int64_t M, int64_t N,
                        int64_t K, const bfloat16* A, const bfloat16* B, float* C, int64_t ldc,
                        float beta = 0);

}  // namespace ag::detail
