#pragma once
// bfloat16: the top 16 bits of an IEEE float32 (sign, 8 exponent bits, 7 mantissa bits), the
// operand type of the CPU's BF16 dot products. A storage type only: tensors of it can be
// made, viewed, copied and converted, and autocast (autograd/autocast.h) feeds them to
// GEMMs and the attention kernel, which accumulate in float32; no arithmetic op takes them.
//
//   ag::bfloat16 b(1.00390625f);   // round to nearest, ties to even: 1.0 (0x3F80)
//   float f = b;                   // exact: every bfloat16 is a float32
//
// float32 -> bfloat16 rounds to nearest with ties to even on the 16 bits dropped, as the
// definition (and PyTorch's c10::BFloat16) does: subnormals are kept, not flushed, infinities
// stay infinite and a NaN stays a NaN (quietened, its sign kept). A double converts through
// float32, as in PyTorch.
#include <cstdint>
#include <cstring>

namespace ag {

// The bits of the bfloat16 nearest to the float with bits u (ties to even); a NaN keeps its
// sign and top payload bits and is made quiet, so no NaN rounds to an infinity.
constexpr uint16_t bf16_bits_from_f32_bits(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// f rounded to the nearest bfloat16, as a float
inline float bf16_rounded(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  u = static_cast<uint32_t>(bf16_bits_from_f32_bits(u)) << 16;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

struct bfloat16 {
  uint16_t bits = 0;

  bfloat16() = default;
  explicit bfloat16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    bits = bf16_bits_from_f32_bits(u);
  }
  explicit bfloat16(double d) : bfloat16(static_cast<float>(d)) {}
  explicit bfloat16(int64_t i) : bfloat16(static_cast<float>(i)) {}
  explicit bfloat16(int i) : bfloat16(static_cast<float>(i)) {}
  explicit bfloat16(bool b) : bfloat16(b ? 1.0f : 0.0f) {}
  static bfloat16 from_bits(uint16_t b) {
    bfloat16 x;
    x.bits = b;
    return x;
  }

  operator float() const {
    const uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
};
static_assert(sizeof(bfloat16) == 2);

// dst[i] = bfloat16(src[i]) for n floats: the bulk conversion autocast makes of activations
// and weights (one pass, vectorised by the compiler; ties to even, NaN kept).
void to_bfloat16(const float* src, bfloat16* dst, int64_t n);
// to_bfloat16 on the calling thread alone, with streaming stores where the CPU has AVX-512:
// for a copy read long after it is written (the optimiser's weight copies), which would
// only push other data out of the cache, and whose lines need not be read before being
// overwritten. The same bits as to_bfloat16.
void to_bfloat16_streaming(const float* src, bfloat16* dst, int64_t n);
// dst[i] = float(src[i]): exact.
void from_bfloat16(const bfloat16* src, float* dst, int64_t n);
// dst[i] = float(bfloat16(src[i])): the rounding without the narrower storage (dst may be
// src), for GEMMs that multiply bfloat16 values held in float32.
void round_to_bfloat16(const float* src, float* dst, int64_t n);

}  // namespace ag
