#include "autograd/bfloat16.h"

#include <bit>

#include "autograd/dtype.h"
#include "autograd/parallel.h"

namespace ag {

// Plain loops over the bits, which GCC vectorises (AVX-512: 16 floats a step); the
// hardware's own conversion (vcvtne2ps2bf16) flushes subnormals to zero, which the
// definition does not.
void to_bfloat16(const float* src, bfloat16* dst, int64_t n) {
  detail::parallel_for(n, detail::kElementwiseGrain, [&](int64_t i0, int64_t i1) {
    AG_SIMD
    for (int64_t i = i0; i < i1; ++i)
      dst[i].bits = bf16_bits_from_f32_bits(std::bit_cast<uint32_t>(src[i]));
  });
}

void from_bfloat16(const bfloat16* src, float* dst, int64_t n) {
  detail::parallel_for(n, detail::kElementwiseGrain, [&](int64_t i0, int64_t i1) {
    AG_SIMD
    for (int64_t i = i0; i < i1; ++i)
      dst[i] = std::bit_cast<float>(static_cast<uint32_t>(src[i].bits) << 16);
  });
}

void round_to_bfloat16(const float* src, float* dst, int64_t n) {
  detail::parallel_for(n, detail::kElementwiseGrain, [&](int64_t i0, int64_t i1) {
    AG_SIMD
    for (int64_t i = i0; i < i1; ++i) dst[i] = bf16_rounded(src[i]);
  });
}

}  // namespace ag
