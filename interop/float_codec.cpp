#include "interop/float_codec.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "autograd/bfloat16.h"

namespace interop {

namespace {

constexpr int64_t kChunk = 1 << 16;  // elements converted at a time

// An IEEE half, exactly as a float (every half is a float).
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

// The nearest IEEE half (ties to even), as PyTorch's .half() rounds: beyond 65504 it is
// infinite, below 2^-24 a subnormal or zero.
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

}  // namespace

size_t stored_bytes(StoredType t) {
  return t == StoredType::f32 ? 4 : 2;
}

void write_floats(const float* src, int64_t n, StoredType t, const ByteSink& out) {
  if (t == StoredType::f32) {
    out(reinterpret_cast<const char*>(src), static_cast<size_t>(n) * 4);
    return;
  }
  std::vector<uint16_t> chunk(static_cast<size_t>(std::min(n, kChunk)));
  for (int64_t done = 0; done < n; done += kChunk) {
    const int64_t m = std::min(kChunk, n - done);
    // one thread, in this loop: ag::to_bfloat16 would open a parallel region per chunk,
    // which costs far more than the conversion (8 s instead of 0.1 for GPT-2 124M)
    if (t == StoredType::f16)
      for (int64_t i = 0; i < m; ++i)
        chunk[static_cast<size_t>(i)] = half_from_float(src[done + i]);
    else
      for (int64_t i = 0; i < m; ++i)
        chunk[static_cast<size_t>(i)] =
            ag::bf16_bits_from_f32_bits(std::bit_cast<uint32_t>(src[done + i]));
    out(reinterpret_cast<const char*>(chunk.data()), static_cast<size_t>(m) * 2);
  }
}

void read_floats(const char* src, int64_t n, StoredType t, float* dst) {
  if (t == StoredType::f32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
  } else if (t == StoredType::bf16) {
    ag::from_bfloat16(reinterpret_cast<const ag::bfloat16*>(src), dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      dst[i] = half_to_float(h);
    }
  }
}

void write_zeros(int64_t n, StoredType t, const ByteSink& out) {
  const std::vector<char> zeros(static_cast<size_t>(std::min(n, kChunk)) * stored_bytes(t), 0);
  for (int64_t done = 0; done < n; done += kChunk)
    out(zeros.data(), static_cast<size_t>(std::min(kChunk, n - done)) * stored_bytes(t));
}

}  // namespace interop
