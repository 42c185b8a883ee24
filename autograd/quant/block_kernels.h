#pragma once
// Internal to autograd/quant/: each block format's two functions (block_formats.h's table
// holds them) and what the quantizers share.
#include <cstdint>
#include <cstring>

#include "autograd/half.h"

namespace ag::quant::blocks {

inline float load_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return half_to_float(h);
}
inline void store_half(float f, uint8_t* p) {
  const uint16_t h = half_from_float(f);
  std::memcpy(p, &h, 2);
}
// The half a float rounds to, as a float (a scale as the block will hold it).
inline float as_stored_half(float f) {
  return half_to_float(half_from_float(f));
}

// The nearest integer, ties to even, by ggml's trick (adding 1.5 * 2^23 leaves the integer
// in the low mantissa bits); |f| must be below 2^22.
inline int nearest_int(float f) {
  const float shifted = f + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

// Q4_K's and Q5_K's sub-block j's 6-bit scale and min from their 12 bytes q: j < 4 in the
// low 6 bits of bytes j and j + 4; j >= 4 in byte j + 4's nibbles, with their top 2 bits in
// the top 2 bits of bytes j - 4 (scale) and j (min) (ggml's get_scale_min_k4).
inline void scale_min_k4(int j, const uint8_t* q, int& scale, int& min) {
  if (j < 4) {
    scale = q[j] & 63, min = q[j + 4] & 63;
  } else {
    scale = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// llama.cpp's scale searches (see scale_search.cpp)
// A scale and a minimum for n weights with levels 0..nmax: L the levels, *negated_min the
// minimum's negation; the scale that lowers the weighted squared error over nstep + 1 trial
// scales (make_qkx2_quants, use_mad false).
float scale_and_min(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                    float* negated_min, float rmin, float rdelta, int nstep);
// A signed scale for n weights with levels -nmax..nmax-1 (L holds level + nmax), weighted by
// x^2, over 19 trial scales (make_qx_quants with rmse_type 1 and no importance weights).
float signed_scale(int n, int nmax, const float* x, int8_t* L);

void quantize_q4_0(const float* x, uint8_t* b);
void dequantize_q4_0(const uint8_t* b, float* y);
void quantize_q4_1(const float* x, uint8_t* b);
void dequantize_q4_1(const uint8_t* b, float* y);
void quantize_q5_0(const float* x, uint8_t* b);
void dequantize_q5_0(const uint8_t* b, float* y);
void quantize_q5_1(const float* x, uint8_t* b);
void dequantize_q5_1(const uint8_t* b, float* y);
void quantize_q8_0(const float* x, uint8_t* b);
void dequantize_q8_0(const uint8_t* b, float* y);
void quantize_q4_k(const float* x, uint8_t* b);
void dequantize_q4_k(const uint8_t* b, float* y);
void quantize_q5_k(const float* x, uint8_t* b);
void dequantize_q5_k(const uint8_t* b, float* y);
void quantize_q6_k(const float* x, uint8_t* b);
void dequantize_q6_k(const uint8_t* b, float* y);
void dequantize_q8_k(const uint8_t* b, float* y);

}  // namespace ag::quant::blocks
