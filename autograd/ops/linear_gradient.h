#pragma once
// Internal: the gradient of a linear's output as its backward's GEMMs read it
// (ops/matmul.cpp), made in one pass over the incoming gradient with the bias gradient
// summed from each row while it is in cache (ColumnSums: ag::sum's bits), where a pass
// of its own (and, under autocast, a float32 dh that only the bias would read) cost a
// read and a write of the whole [M, N] matrix more.
#include "autograd/tensor.h"

namespace ag::detail {

// dh: the gradient of h [M, N] (undefined where only dh16 was written); dh16: dh rounded to
// bfloat16 for the GEMMs under autocast (undefined otherwise); db: dh's column sums, where
// the pass took them (undefined: ag::sum(dh, {0}) is still to take).
struct LinearGradient {
  Tensor dh, dh16, db;
};

// g [M, N] itself; under autocast (bf16) also g rounded: the copy its producer attached,
// else rounded here, summing db on the way when with_bias.
LinearGradient linear_output_gradient(const Tensor& g, bool bf16, bool with_bias);

// dh = g gelu'(h) for GELU after a linear, from what the forward saved (matmul.cpp's
// GeluAfterLinear): gelu'(h) itself (float32, float64), or h rounded to bfloat16 (autocast:
// gelu' recomputed, and only dh16 written). db with it when with_bias and float32.
LinearGradient gelu_output_gradient(const Tensor& g, const Tensor& saved, bool with_bias);

}  // namespace ag::detail
