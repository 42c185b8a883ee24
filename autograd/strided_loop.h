#pragma once
// Internal: walks N operands of one logical shape, each with its own strides, one run of
// the innermost dimension at a time. Dimensions that are contiguous for every operand are
// merged first, so contiguous tensors become a single run and the inner loop vectorises.
#include <array>
#include <cstdint>
#include <vector>

#include "autograd/shape.h"

namespace ag::detail {

template <size_t N>
struct StridedLayout {
  Shape shape;  // merged shape, rank >= 1
  std::array<Shape, N> strides;

  StridedLayout(const Shape& s, const std::array<Shape, N>& st) {
    // drop size-1 dims, then merge dim d into d+1 where every operand is contiguous across
    Shape sh;
    std::array<Shape, N> str;
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] == 1) continue;
      sh.push_back(s[d]);
      for (size_t k = 0; k < N; ++k) str[k].push_back(st[k][d]);
    }
    if (sh.empty()) {
      sh.push_back(1);
      for (size_t k = 0; k < N; ++k) str[k].push_back(0);
    }
    shape.push_back(sh[0]);
    for (size_t k = 0; k < N; ++k) strides[k].push_back(str[k][0]);
    for (size_t d = 1; d < sh.size(); ++d) {
      bool mergeable = true;
      for (size_t k = 0; k < N; ++k)
        if (strides[k].back() != str[k][d] * sh[d]) mergeable = false;
      if (mergeable) {
        shape.back() *= sh[d];
        for (size_t k = 0; k < N; ++k) strides[k].back() = str[k][d];
      } else {
        shape.push_back(sh[d]);
        for (size_t k = 0; k < N; ++k) strides[k].push_back(str[k][d]);
      }
    }
  }
};

// Calls run(offsets, n, inner_strides) for every innermost run, offsets in elements.
template <size_t N, typename Run>
void for_each_run(const Shape& shape, const std::array<Shape, N>& strides, Run&& run) {
  if (shape_numel(shape) == 0) return;
  StridedLayout<N> L(shape, strides);
  const int64_t rank = static_cast<int64_t>(L.shape.size());
  const int64_t n = L.shape.back();
  std::array<int64_t, N> inner{};
  for (size_t k = 0; k < N; ++k) inner[k] = L.strides[k].back();
  std::array<int64_t, N> off{};
  std::vector<int64_t> idx(rank, 0);
  const int64_t runs = shape_numel(L.shape) / n;
  for (int64_t r = 0; r < runs; ++r) {
    run(off, n, inner);
    for (int64_t d = rank - 2; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k) off[k] += L.strides[k][d];
      if (++idx[d] < L.shape[d]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= L.strides[k][d] * L.shape[d];
      idx[d] = 0;
    }
  }
}

}  // namespace ag::detail
