// ggml's blocks of 32 weights with one scale (Q8_0, Q4_0, Q5_0) or a scale and a minimum
// (Q4_1, Q5_1): block_formats.h gives the layouts. Each quantizer is llama.cpp's reference
// (quantize_row_*_ref) step for step in float32.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "autograd/quant/block_kernels.h"

namespace ag::quant::blocks {

namespace {

constexpr int kBlock = 32, kHalf = 16;

// The element of greatest magnitude (the first of equal ones), with its sign.
float signed_absmax(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlock; ++j)
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
  return max;
}

// Q4_1's and Q5_1's head: d = (max - min) / top and the minimum, as halves; returns 1 / d
// (0 for a constant block) and the minimum.
float min_scale_head(const float* x, float top, uint8_t* b, float& min) {
  float max = -FLT_MAX;
  min = FLT_MAX;
  for (int j = 0; j < kBlock; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / top;
  store_half(d, b);
  store_half(min, b + 2);
  return d != 0.0f ? 1.0f / d : 0.0f;
}

// Levels of 5 bits: the low 4 in qs (element j low nibble, j + 16 high), the fifth in qh.
void pack_five_bits(const uint8_t* levels, uint8_t* qh, uint8_t* qs) {
  uint32_t high = 0;
  for (int j = 0; j < kHalf; ++j) {
    const uint8_t a = levels[j], b = levels[j + kHalf];
    qs[j] = static_cast<uint8_t>((a & 0x0f) | ((b & 0x0f) << 4));
    high |= ((a & 0x10u) >> 4) << j;
    high |= ((b & 0x10u) >> 4) << (j + kHalf);
  }
  std::memcpy(qh, &high, 4);
}

// The 5-bit level of element j (0..31) of a block's qh and qs.
int five_bit_level(const uint8_t* qh, const uint8_t* qs, int j) {
  uint32_t high;
  std::memcpy(&high, qh, 4);
  const int low = j < kHalf ? qs[j] & 0x0f : qs[j - kHalf] >> 4;
  return low | static_cast<int>(((high >> j) & 1u) << 4);
}

}  // namespace

void quantize_q8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_half(d, b);
  for (int j = 0; j < kBlock; ++j)
    b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * id)));
}

void dequantize_q8_0(const uint8_t* b, float* y) {
  const float d = load_half(b);
  for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

void quantize_q4_0(const float* x, uint8_t* b) {
  const float d = signed_absmax(x) / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_half(d, b);
  for (int j = 0; j < kHalf; ++j) {
    const int lo = std::min(15, static_cast<int>(x[j] * id + 8.5f));
    const int hi = std::min(15, static_cast<int>(x[j + kHalf] * id + 8.5f));
    b[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void dequantize_q4_0(const uint8_t* b, float* y) {
  const float d = load_half(b);
  for (int j = 0; j < kHalf; ++j) {
    y[j] = static_cast<float>((b[2 + j] & 0x0f) - 8) * d;
    y[j + kHalf] = static_cast<float>((b[2 + j] >> 4) - 8) * d;
  }
}

void quantize_q4_1(const float* x, uint8_t* b) {
  float min;
  const float id = min_scale_head(x, 15.0f, b, min);
  for (int j = 0; j < kHalf; ++j) {
    const int lo = std::min(15, static_cast<int>((x[j] - min) * id + 0.5f));
    const int hi = std::min(15, static_cast<int>((x[j + kHalf] - min) * id + 0.5f));
    b[4 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void dequantize_q4_1(const uint8_t* b, float* y) {
  const float d = load_half(b), m = load_half(b + 2);
  for (int j = 0; j < kHalf; ++j) {
    y[j] = static_cast<float>(b[4 + j] & 0x0f) * d + m;
    y[j + kHalf] = static_cast<float>(b[4 + j] >> 4) * d + m;
  }
}

void quantize_q5_0(const float* x, uint8_t* b) {
  const float d = signed_absmax(x) / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_half(d, b);
  uint8_t levels[kBlock];
  for (int j = 0; j < kBlock; ++j)
    levels[j] = static_cast<uint8_t>(std::min(31, static_cast<int>(x[j] * id + 16.5f)));
  pack_five_bits(levels, b + 2, b + 6);
}

void dequantize_q5_0(const uint8_t* b, float* y) {
  const float d = load_half(b);
  for (int j = 0; j < kBlock; ++j)
    y[j] = static_cast<float>(five_bit_level(b + 2, b + 6, j) - 16) * d;
}

void quantize_q5_1(const float* x, uint8_t* b) {
  float min;
  const float id = min_scale_head(x, 31.0f, b, min);
  uint8_t levels[kBlock];  // llama.cpp does not clamp these: (max - min) id rounds to 31
  for (int j = 0; j < kBlock; ++j) levels[j] = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
  pack_five_bits(levels, b + 4, b + 8);
}

void dequantize_q5_1(const uint8_t* b, float* y) {
  const float d = load_half(b), m = load_half(b + 2);
  for (int j = 0; j < kBlock; ++j)
    y[j] = static_cast<float>(five_bit_level(b + 4, b + 8, j)) * d + m;
}

}  // namespace ag::quant::blocks
