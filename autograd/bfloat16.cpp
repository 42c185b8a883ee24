#include "autograd/bfloat16.h"

#include <immintrin.h>

#include <bit>
#include <cstdint>

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

#ifdef __AVX512F__
namespace {

// 16 floats' bits rounded as bf16_bits_from_f32_bits rounds one
__m256i bf16_bits16(const float* src) {
  const __m512i u = _mm512_loadu_si512(src);
  const __m512i high = _mm512_srli_epi32(u, 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i lsb = _mm512_and_si512(high, _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
  r = _mm512_srli_epi32(r, 16);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(high, _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
}

}  // namespace
#endif

void to_bfloat16_streaming(const float* src, bfloat16* dst, int64_t n) {
  int64_t i = 0;
#ifdef __AVX512F__
  // a scalar head up to the first 64-byte line of dst, then whole lines streamed
  for (; i < n && reinterpret_cast<uintptr_t>(dst + i) % 64 != 0; ++i)
    dst[i].bits = bf16_bits_from_f32_bits(std::bit_cast<uint32_t>(src[i]));
  for (; i + 32 <= n; i += 32) {
    const __m512i line = _mm512_inserti64x4(_mm512_castsi256_si512(bf16_bits16(src + i)),
                                            bf16_bits16(src + i + 16), 1);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), line);
  }
  _mm_sfence();  // streaming stores are weakly ordered: visible before whoever reads next
#endif
  for (; i < n; ++i) dst[i].bits = bf16_bits_from_f32_bits(std::bit_cast<uint32_t>(src[i]));
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
