// ggml's K formats: super-blocks of 256 weights in sub-blocks with 6-bit (Q4_K, Q5_K) or
// 8-bit (Q6_K) scales under one half-precision scale. block_formats.h gives the layouts;
// each quantizer is llama.cpp's reference (quantize_row_*_K_ref) step for step in float32.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "autograd/quant/block_kernels.h"

namespace ag::quant::blocks {

namespace {

constexpr int kSuper = 256;

// Q4_K and Q5_K: d (half), dmin (half), 12 bytes of scales, then the levels.
constexpr int kScalesAt = 4, kLevelsAt4 = 16, kHighAt5 = 16, kLevelsAt5 = 48;

void pack_scale_min_k4(const uint8_t* ls, const uint8_t* lm, uint8_t* q) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      q[j] = ls[j], q[j + 4] = lm[j];
    } else {
      q[j + 4] = static_cast<uint8_t>((ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4));
      q[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      q[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// Q4_K's and Q5_K's levels (0..nmax), in L: each sub-block of 32 searched for a scale and
// min, those quantized to 6 bits under d and dmin, the levels found again under the stored
// scales. Writes d, dmin and the 12 scale bytes to b.
void k4_levels(const float* x, int nmax, float rmin, int nstep, uint8_t* b, uint8_t* L) {
  float scales[8], mins[8], weights[32], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = scale_and_min(32, nmax, xs, weights, L + 32 * j, &mins[j], rmin, 0.1f, nstep);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
  }
  pack_scale_min_k4(ls, lm, b + kScalesAt);
  store_half(max_scale / 63.f, b);
  store_half(max_min / 63.f, b + 2);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    scale_min_k4(j, b + kScalesAt, sc, m);
    const float d = load_half(b) * static_cast<float>(sc);
    if (d == 0) continue;
    const float dm = load_half(b + 2) * static_cast<float>(m);
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] =
          static_cast<uint8_t>(std::max(0, std::min(nmax, nearest_int((x[32 * j + i] + dm) / d))));
  }
}

// y = d sc level - dmin m for Q4_K and Q5_K, the levels given by level(i) for i < 256.
template <typename Level>
void k4_dequantize(const uint8_t* b, float* y, Level level) {
  const float d = load_half(b), dmin = load_half(b + 2);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    scale_min_k4(j, b + kScalesAt, sc, m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    for (int i = 32 * j; i < 32 * j + 32; ++i) y[i] = d1 * static_cast<float>(level(i)) - m1;
  }
}

}  // namespace

// Levels of 64 weights at a time: the first 32 in the low nibbles of 32 bytes, the next 32
// in the high.
void quantize_q4_k(const float* x, uint8_t* b) {
  uint8_t L[kSuper];
  std::memset(b, 0, 144);
  k4_levels(x, 15, -1.f, 20, b, L);
  for (int i = 0; i < kSuper; ++i)
    b[kLevelsAt4 + (i / 64) * 32 + i % 32] |= L[i] << (i % 64 / 32 * 4);
}

void dequantize_q4_k(const uint8_t* b, float* y) {
  k4_dequantize(b, y, [b](int i) {
    return (b[kLevelsAt4 + (i / 64) * 32 + i % 32] >> (i % 64 / 32 * 4)) & 0x0f;
  });
}

// As Q4_K; the fifth bit of element i in bit i / 32 of qh[i % 32].
void quantize_q5_k(const float* x, uint8_t* b) {
  uint8_t L[kSuper];
  std::memset(b, 0, 176);
  k4_levels(x, 31, -0.5f, 15, b, L);
  for (int i = 0; i < kSuper; ++i) {
    b[kLevelsAt5 + (i / 64) * 32 + i % 32] |= (L[i] & 0x0f) << (i % 64 / 32 * 4);
    b[kHighAt5 + i % 32] |= (L[i] >> 4) << (i / 32);
  }
}

void dequantize_q5_k(const uint8_t* b, float* y) {
  k4_dequantize(b, y, [b](int i) {
    const int low = (b[kLevelsAt5 + (i / 64) * 32 + i % 32] >> (i % 64 / 32 * 4)) & 0x0f;
    return low + (((b[kHighAt5 + i % 32] >> (i / 32)) & 1) << 4);
  });
}

namespace {

// Q6_K: ql[128], qh[64], scales[16] (int8), d (half). Element i of a half of 128 (h, r =
// i % 128): its low nibble in ql[64 h + r % 64], low for r < 64, high above; its top 2
// bits in qh[32 h + r % 32] at bit 2 (r / 32).
constexpr int kQh6 = 128, kScales6 = 192, kD6 = 208;

int q6_level(const uint8_t* b, int i) {
  const int h = i / 128, r = i % 128;
  const int low = (b[64 * h + r % 64] >> (r / 64 * 4)) & 0x0f;
  const int high = (b[kQh6 + 32 * h + r % 32] >> (2 * (r / 32))) & 3;
  return low | (high << 4);
}

}  // namespace

void quantize_q6_k(const float* x, uint8_t* b) {
  int8_t L[kSuper];
  float scales[16], max_scale = 0, max_abs_scale = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = signed_scale(16, 32, x + 16 * j, L + 16 * j);
    if (std::fabs(scales[j]) > max_abs_scale)
      max_abs_scale = std::fabs(scales[j]), max_scale = scales[j];
  }
  std::memset(b, 0, 210);
  if (max_abs_scale < 1e-15f) return;  // all zero (d = +0)
  const float iscale = -128.f / max_scale;
  store_half(1 / iscale, b + kD6);
  for (int j = 0; j < 16; ++j)
    b[kScales6 + j] =
        static_cast<uint8_t>(static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j]))));
  for (int j = 0; j < 16; ++j) {
    const float d = load_half(b + kD6) * static_cast<float>(static_cast<int8_t>(b[kScales6 + j]));
    if (d == 0) continue;
    for (int i = 16 * j; i < 16 * j + 16; ++i)
      L[i] = static_cast<int8_t>(std::max(-32, std::min(31, nearest_int(x[i] / d))) + 32);
  }
  for (int i = 0; i < kSuper; ++i) {
    const int h = i / 128, r = i % 128;
    b[64 * h + r % 64] |= (L[i] & 0x0f) << (r / 64 * 4);
    b[kQh6 + 32 * h + r % 32] |= (L[i] >> 4) << (2 * (r / 32));
  }
}

void dequantize_q6_k(const uint8_t* b, float* y) {
  const float d = load_half(b + kD6);
  for (int i = 0; i < kSuper; ++i) {
    const auto sc = static_cast<float>(static_cast<int8_t>(b[kScales6 + i / 16]));
    y[i] = d * sc * static_cast<float>(q6_level(b, i) - 32);
  }
}

// Q8_K: d (a float32), qs[256] int8, bsums[16] (sums of 16 levels, for dot products)
void dequantize_q8_k(const uint8_t* b, float* y) {
  float d;
  std::memcpy(&d, b, 4);
  for (int i = 0; i < kSuper; ++i) y[i] = d * static_cast<float>(static_cast<int8_t>(b[4 + i]));
}

}  // namespace ag::quant::blocks
