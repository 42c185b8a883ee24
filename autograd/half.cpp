#include "autograd/half.h"

#include <bit>
#include <cstring>

namespace ag {

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // infinity or NaN (payload kept)
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;  // a signed zero
  } else {        // subnormal: normalise
    int shift = 0;
    while ((mantissa & 0x400u) == 0) mantissa <<= 1, ++shift;
    bits = sign | static_cast<uint32_t>(113 - shift) << 23 | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t half_from_float(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u, magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (magnitude >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 2^16
  uint32_t h, rest, halfway;
  if (magnitude >= 0x38800000u) {  // a normal half: the exponent rebiased from 127 to 15
    h = (magnitude >> 13) - (112u << 10);
    rest = magnitude & 0x1fffu, halfway = 0x1000u;
  } else {  // a subnormal half: the significand (hidden bit included) shifted into it
    if (magnitude < 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25: zero
    const uint32_t shift = 126 - (magnitude >> 23);
    const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    h = significand >> shift;
    rest = significand & ((1u << shift) - 1), halfway = 1u << (shift - 1);
  }
  if (rest > halfway || (rest == halfway && (h & 1u))) ++h;  // a carry rounds up to inf
  return static_cast<uint16_t>(sign | h);
}

}  // namespace ag
