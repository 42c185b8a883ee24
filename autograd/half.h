#pragma once
// IEEE half (float16): the element type of F16 tensors in model files and the scales of
// ggml's quantised blocks (autograd/quant/). A storage type only, converted here.
#include <cstdint>

namespace ag {

// An IEEE half, exactly as a float (every half is a float; a NaN keeps its payload).
float half_to_float(uint16_t h);

// The nearest IEEE half (ties to even), as PyTorch's .half() and the F16C instruction
// (ggml's GGML_FP32_TO_FP16) round: beyond 65504 it is infinite, below 2^-24 a subnormal
// or zero.
uint16_t half_from_float(float f);

}  // namespace ag
