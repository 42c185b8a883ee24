#pragma once
// Internal to the decoder and the layers' inference steps: the float32 kernels of a pass, on raw
// pointers. The arithmetic follows the training ops' (norms by the ops' own row kernels,
// ag::kernels; exp_fast, gelu_value), so the logits agree with GPT::forward to float32 rounding.
#include <array>
#include <atomic>
#include <cstdint>

#include "autograd/bfloat16.h"

namespace nn::inference {

// A weight matrix [out, in], row-major, as the decoder reads it: float32, and optionally
// a bfloat16 copy holding the same values (the matrix was rounded to bfloat16 first), for
// the steps, which then read half the bytes.
// Or its ggml Q8_0 blocks (34 bytes per 32 weights of a row: a half scale, 32 int8 levels),
// holding the same values; or its Q4_K blocks (144 bytes per 256 weights). Or, beside the
// float32 rows, the same values as input-major panels (a small model's decoder's copy,
// panel_gemv.h), which the vector kernel then reads in place of the rows.
struct Weights {
  const float* f32 = nullptr;
  const ag::bfloat16* bf16 = nullptr;
  const uint8_t* q8_0 = nullptr;
  const uint8_t* q4_k = nullptr;
  const uint8_t* q8_0_q8 = nullptr;  // Q8_0 blocks interleaved for Q8_0 activations
  const uint8_t* q4_k_q8 = nullptr;  // Q4_K blocks for Q8_K activations
  const float* panels = nullptr;     // the whole matrix's panels (pack_panels)
  int64_t first = 0;                 // the output these weights start at (the panels' own)
  Weights rows_from(int64_t from, int64_t in) const {
    return {f32 + from * in,
            bf16 ? bf16 + from * in : nullptr,
            q8_0 ? q8_0 + from * in / 32 * 34 : nullptr,
            q4_k ? q4_k + from * in / 256 * 144 : nullptr,
            q8_0_q8 ? q8_0_q8 + from * in / 32 * 34 : nullptr,
            q4_k_q8 ? q4_k_q8 + from * in / 256 * 144 : nullptr,
            panels,
            first + from};
  }
};

// to (+)= sum + bias[o] (+ 0 without a bias): the last two roundings of every GEMV below,
// in that order.
inline void store_output(float sum, const float* bias, int64_t o, float& to, bool accumulate) {
  const float v = sum + (bias ? bias[o] : 0.0f);
  to = accumulate ? to + v : v;
}

// y[r] (r < rows, row stride ldy) = x[r] (row stride in) W^T + bias for W [out, in]; with
// accumulate, y[r] += the same. A few rows (a step's) by our own vector kernel, which
// never starts threads (a step shares its work out itself, and BLAS would start its own
// threads for every GEMV outside a parallel region), on the Q8_0 blocks or the bfloat16
// copy where there is one (each row's sum in one fixed order, whatever rows and threads share the
// work, so the same bits on any thread count; the bfloat16 pass pairs the weights differently from
// the float32 one, so the two agree to float32 rounding, not to the bit); more rows by BLAS's GEMM
// on the float32 values where the product is large (below).
// Where W has its panels (W.panels), the vector kernel is panel_linear's, in its order
// (panel_gemv.h), for every row count it takes.
// vector_rows: the most rows the vector kernel takes (kVectorRows; a server's step of
// independent sequences asks for more, so that every row keeps the bits it has alone, and
// so does a step of weights read by 8-bit activations, which only that kernel rounds).
// matrix_out: the whole matrix's outputs, of which [y, y + out) is this thread's share.
// BLAS's sums for an output depend on the shape of the call that computes it where the
// call is small (OpenBLAS's small-matrix kernels, under 10^6 multiply-adds), and a share's
// shape depends on the thread count (and on the pace's choice of one thread or the
// team): so BLAS takes only products of at least kBlasMultiplyAdds over the whole matrix
// (a share of 32 threads still above the small kernels), through ag::detail::sgemm_nt_here,
// whose library's sums are then the same whatever the share (OpenBLAS's AVX2 kernels' are
// not: there it calls oneDNN's sgemm), and smaller ones of more than vector_rows rows go through
// the vector kernel on the float32 weights, each row's sums fixed whatever the share.
inline constexpr int64_t kVectorRows = 4;
inline constexpr double kBlasMultiplyAdds = 32e6;
void linear(const float* x, int64_t rows, int64_t in, Weights W, const float* bias, int64_t out,
            int64_t matrix_out, float* y, int64_t ldy, bool accumulate,
            int64_t vector_rows = kVectorRows);

// y = gelu(y), GPT-2's tanh form.
void gelu(float* y, int64_t n);

// Rows first..first+rows of a causal score matrix, held as scores [rows, n]: the row of
// query i becomes the softmax of its first i + 1 entries, the rest 0.
void causal_softmax(float* scores, int64_t rows, int64_t n, int64_t first);

// One query q [D] against t cached positions of one head: keys transposed, kt[d * ldk + j]
// for position j; values v[j * ldv + d]. out [D] = sum_j softmax_j(scale q.k_j) v_j.
// s: t floats of scratch.
void attend(const float* q, const float* kt, int64_t ldk, const float* v, int64_t ldv, int64_t t,
            int64_t D, float scale, float* s, float* out);

// Rows [0, n) of k [n, ld] (columns c0..c1 of the model's width, head-major: c = h D + d)
// into the transposed cache kt, where column c of position t goes to kt[c * T + t].
void transpose_into(const float* k, int64_t n, int64_t ld, int64_t c0, int64_t c1, float* kt,
                    int64_t T, int64_t t0);

// [begin, end) of `n` items for thread `tid` of `threads`, in whole multiples of `align`
// (a cache line of floats, so that threads never write the same line).
struct Range {
  int64_t begin, end;
};
Range share(int64_t n, int tid, int threads, int64_t align = 16);

// A barrier for the threads of one parallel region that spins briefly, then yields the
// core. OpenMP's own barrier spins for up to a few hundred microseconds: on a machine with
// more runnable threads than cores the thread we wait for is then kept off the core by
// our spinning, and a step of ~30 barriers took 30 ms instead of 0.2 (measured with 8
// runnable processes on 2 cores). Yielding costs nothing when the cores are free.
class SpinBarrier {
 public:
  void wait(int threads);

 private:
  std::atomic<int> arrived_{0};
  std::atomic<unsigned> generation_{0};
};

// Whether a step should run on its threads or on one: both are timed as steps run (at the
// start in turn, each one's first step discarded as the team's threads start then, and the
// minimum of its next two kept), the faster is used (a moving average that one slow step
// moves by an eighth at most), and the slower is tried again now and then (two steps, the
// first discarded: the team's threads wake), the more rarely the slower it was, so that
// trying costs about 3% of the time.
class StepPace {
 public:
  bool threaded();                             // the choice for the next step
  void record(bool threaded, double seconds);  // how long that step took

 private:
  static constexpr int64_t kTimedFirst = 2;  // each way's steps timed at the start
  double average_[2] = {0, 0};               // one thread, threads (seconds a step)
  int64_t timed_[2] = {0, 0};                // steps timed each way
  int64_t steps_ = 0, next_trial_ = 0;
  int trial_ = 0;  // steps left of a trial of the slower way: its warm-up, then the timed one
};

// A StepPace for each size of pass: one row and eight, or a prefill of 3 positions and one
// of 60, take different times each way, and one pace for all would weigh one size's
// threaded time against another's time on one thread (a server's 8-row team steps against
// its 1-row steps on one thread could keep both on one). Exact up to 16 rows, then one pace
// per power of two.
class PacesByRows {
 public:
  StepPace& operator[](int64_t rows);

 private:
  static constexpr uint64_t kExact = 16;
  std::array<StepPace, kExact + 64 - 3> paces_;  // up to rows of 2^64
};

}  // namespace nn::inference
