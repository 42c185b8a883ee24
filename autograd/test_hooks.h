#pragma once
// Test support: hooks that let tests (and the CLI's --inject-nan testing aid) look inside
// or break the library on purpose. Not part of the public map (autograd/autograd.h does not
// include it); nothing in a normal run calls these. The NaN injection and the mask replay
// are in the autograd_testing library (attograd::testing), with the op table; the switches
// that pick among the core's own kernels stay in attograd::core, beside the environment
// variables that pick the same kernels (ATTOGRAD_ATTENTION_BF16), as does the GEMM count.
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace ag {

// ---- fused attention (ops/attention.cpp; the mask replay: attention_dropout_mask.cpp)
// The mask (0 or 1/(1-p), [rows, T, S] with rows = product of leading dims) that the
// fused attention applies after taking `draw` from its generator, replayed through
// Generator itself: for tests that compare the fused op with the composed ops.
Tensor attention_dropout_mask(int64_t rows, int64_t T, int64_t S, bool causal, double p,
                              uint64_t draw, DType dtype);
// Whether the CPU has the BF16 dot products the fused attention's bf16 (autocast) products
// may run on (ops/tile_kernels_bf16.h), and the kernels forced for them (chosen: as measured,
// or the rule; units: the BF16 units, where available; fma: the FMA kernels; onednn:
// oneDNN's matmuls, ops/attention_onednn.h): for tests that compare them.
bool attention_bf16_units_available();
// Whether oneDNN has bfloat16 kernels for the attention's products on this CPU
bool attention_onednn_available();
enum class AttentionKernelForTests { chosen, units, fma, onednn };
void force_attention_kernel_for_tests(AttentionKernelForTests kernel);
// The blocked oneDNN kernel's blocks (ops/attention_onednn.h) made this many queries and keys
// (0, 0: its own), and, where float64_twin, float64 attention run on its float64 twin (the
// same blocked code with exact products) for its gradient checks
void force_attention_blocks_for_tests(int64_t queries, int64_t keys, bool float64_twin);

// ---- GEMMs (ops/gemm.cpp)
// While on, every block of a oneDNN GEMM is computed by its fallback (OpenBLAS's sgemm on
// the block, bfloat16 operands widened), as on a CPU where oneDNN has no kernel.
namespace detail {
void force_gemm_fallback_for_tests(bool on);
// The matrix products run so far by the ops (matmul, linear and their backward; not the
// decoder's or attention's own kernels), for tests that a frozen weight costs no
// weight-gradient GEMM.
int64_t gemm_count();

// ---- producers' bfloat16 copies (autocast.cpp)
// Off: no op attaches a rounded copy to its output (autocast.h, attach_bf16_copy), so every
// bfloat16 GEMM operand is rounded by its GEMM: for tests that the copies change no bit.
void use_bf16_copies_for_tests(bool on);
}  // namespace detail

// ---- NaN injection (nan_injection.cpp, in the autograd_testing library), for tests of
// anomaly detection itself and `train --inject-nan`
// "forward:PATH" plants a NaN in the output of the first op run inside module PATH,
// "backward:PATH" in the first gradient that op's backward returns; "" clears. Throws on a
// malformed spec. While a spec is set, it is the engine's fault injector (anomaly.h), and
// modules record their scopes as under detection.
void set_nan_injection(const std::string& spec);
// The injector: plants the NaN where the injection names (returns whether it did). A forward
// output that is a view of one of the op's inputs is left alone.
bool maybe_inject_nan(bool backward, const std::string& where, Tensor& t,
                      const std::vector<Tensor>& inputs = {});

}  // namespace ag
