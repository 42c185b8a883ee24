#pragma once
// Internal to the decoder (inference::linear): the float32 GEMV over a weight matrix held
// input-major in panels, for the models small enough that their decoder keeps such a copy
// (CachedInference, kPanelWeightBytes).
//
// The panels: W [out, in] as panels of 16 outputs, panel p holding W^T's columns 16 p ..
// 16 p + 15, input after input (in x 16 floats, contiguous; the last panel padded with
// zeros): panel p, input i, lane l is W[16 p + l][i]. A tile of panels is then read in
// order, a stream the hardware prefetchers follow (W^T's rows at their full width, a tile
// jumping a whole row of the matrix an input, kept a step of the default model waiting on
// the L3 cache: no faster than over W's rows).
//
// Why: a step of a small model (the default's 128-wide rows, weights that stay in the
// caches) is bound by arithmetic and by the caches, not by memory. Over rows of W
// (output-major) each output is a sum across a vector's lanes, and on 128-wide rows adding
// those lanes up took about as many instructions as the multiply-adds. Over the panels the
// outputs are the lanes: an output's sum is one chain of fused multiply-adds with nothing
// to add up at the end, and a weight vector loaded once serves eight rows of x. (One core
// of an Intel Xeon with AMX, a matrix in its L2 cache, 8 rows: 69-78 G multiply-adds a
// second against [384, 128], 35 over W's rows; one row 21-22 either way. In a step of the
// default model, whose 3.1 MB of weights exceed one core's 2 MB L2, the gain is smaller:
// docs/serving.md.)
//
// The order, the same for every row whatever the other rows, the outputs a thread takes or
// the CPU: y[r][o] (+)= (acc + bias[o]) where acc starts at +0 and becomes
// fma(W[o][i], x[r][i], acc) for i = 0, 1, ..., in - 1 (+ 0 without a bias; with accumulate,
// y[r][o] + that sum, rounded once more). AVX-512 takes a panel a vector, AVX2 a panel two;
// elsewhere std::fma gives the same roundings output by output.
#include <cstdint>

namespace nn::inference {

// Floats of w [out, in] as panels (out rounded up to a multiple of 16, times in).
int64_t panel_floats(int64_t out, int64_t in);
// w [out, in] (row-major) into panels at `panels` (panel_floats of them).
void pack_panels(const float* w, int64_t out, int64_t in, float* panels);

// y[r][o - first] (+)= bias[o - first] + x[r] . W[o] for r < rows and first <= o < first +
// out, W's panels at `panels` (the whole matrix's); x [rows, in], y rows of stride ldy
// (y and bias start at output `first`, which need not begin a panel).
void panel_linear(const float* x, int64_t rows, int64_t in, const float* panels, int64_t first,
                  const float* bias, int64_t out, float* y, int64_t ldy, bool accumulate);

}  // namespace nn::inference
