#pragma once
// Internal: run a kernel over the 1-D rows of tensors along one dim. The dim is moved last
// and made contiguous (free when it already is), the kernel sees plain pointers, and the
// result is laid back out in the input's dim order.
#include <numeric>

#include "autograd/tensor.h"

namespace ag::detail {

inline std::vector<int64_t> dim_last_order(int64_t rank, int64_t dim) {
  std::vector<int64_t> order(rank);
  std::iota(order.begin(), order.end(), 0);
  order.erase(order.begin() + dim);
  order.push_back(dim);
  return order;
}

inline Tensor rows_view(const Tensor& t, int64_t dim) {
  Tensor v = make_view(t, t.shape(), t.strides(), t.offset());
  if (dim == t.dim() - 1) return v.contiguous();
  return v.permute(dim_last_order(t.dim(), dim)).contiguous();
}

inline Tensor undo_rows_view(const Tensor& rows, int64_t dim) {
  if (dim == rows.dim() - 1) return rows;
  auto order = dim_last_order(rows.dim(), dim);
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int64_t>(i);
  return rows.permute(inverse).contiguous();
}

// out = f applied to each row of `ins` (all the same shape and float dtype) along `dim`;
// f(std::array<const T*, N> in_rows, T* out_row, int64_t n).
template <size_t N, typename F>
Tensor map_rows(const std::array<Tensor, N>& ins, int64_t dim, const char* what, F f) {
  const Tensor& a = ins[0];
  std::array<Tensor, N> rows;
  for (size_t k = 0; k < N; ++k) rows[k] = rows_view(ins[k], dim);
  Tensor out = empty(rows[0].shape(), a.dtype());
  const int64_t n = a.shape()[dim];
  const int64_t count = n == 0 ? 0 : a.numel() / n;
  AG_DISPATCH_FLOAT(a.dtype(), what, [&] {
    std::array<const scalar_t*, N> p;
    for (size_t k = 0; k < N; ++k) p[k] = rows[k].template data<scalar_t>();
    scalar_t* o = out.data<scalar_t>();
    for (int64_t r = 0; r < count; ++r) {
      std::array<const scalar_t*, N> row;
      for (size_t k = 0; k < N; ++k) row[k] = p[k] + r * n;
      f(row, o + r * n, n);
    }
  });
  return undo_rows_view(out, dim);
}

}  // namespace ag::detail
