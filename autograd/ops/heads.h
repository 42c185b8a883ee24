#pragma once
// Internal: head packing for causal_self_attention (ops/attention.cpp). A projection's
// output holds each token's heads side by side, [B, T, H, D] with a stride between tokens;
// the attention kernels read each (batch, head) row as one contiguous [T, D] block.
#include <cstdint>
#include <cstring>

#include "autograd/bfloat16.h"
#include "autograd/parallel.h"

namespace ag::detail {

enum class HeadCopy { gather, scatter };

// fn(rows, heads) for every (b, h, t): the offset of that head's D values in the [B, T, H, D]
// rows (row_stride elements between tokens, heads D apart) and in the [B, H, T, D]
// contiguous packing; (b, h) rows shared among the threads
template <typename F>
void for_each_head_row(int64_t B, int64_t Tn, int64_t H, int64_t D, int64_t row_stride, F&& fn) {
  parallel_for_items(B * H, 1, static_cast<double>(Tn) * D, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / H, h = r % H;
      for (int64_t t = 0; t < Tn; ++t) fn((b * Tn + t) * row_stride + h * D, (r * Tn + t) * D);
    }
  });
}

// gather: [B, T, H, D] rows into [B, H, T, D] contiguous; scatter: back. One pass of
// D-element copies per (b, h, t).
template <typename T>
void copy_heads(HeadCopy direction, T* dst, const T* src, int64_t B, int64_t Tn, int64_t H,
                int64_t D, int64_t row_stride) {
  for_each_head_row(B, Tn, H, D, row_stride, [&](int64_t rows, int64_t heads) {
    if (direction == HeadCopy::gather)
      std::memcpy(dst + heads, src + rows, D * sizeof(T));
    else
      std::memcpy(dst + rows, src + heads, D * sizeof(T));
  });
}

// gather into bfloat16, rounding on the way (ties to even): what the attention's BF16 units
// read, with no separate rounding pass
inline void gather_heads_rounded(bfloat16* dst, const float* src, int64_t B, int64_t Tn, int64_t H,
                                 int64_t D, int64_t row_stride) {
  for_each_head_row(B, Tn, H, D, row_stride,
                    [&](int64_t rows, int64_t heads) { to_bfloat16(src + rows, dst + heads, D); });
}

// scatter, and the same values rounded into dst16 (the output's bfloat16 copy for the
// projection that reads it) while each head's row is in cache
inline void scatter_heads_with_copy(float* dst, bfloat16* dst16, const float* src, int64_t B,
                                    int64_t Tn, int64_t H, int64_t D, int64_t row_stride) {
  for_each_head_row(B, Tn, H, D, row_stride, [&](int64_t rows, int64_t heads) {
    std::memcpy(dst + rows, src + heads, D * sizeof(float));
    to_bfloat16(src + heads, dst16 + rows, D);
  });
}

}  // namespace ag::detail
