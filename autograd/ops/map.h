#pragma once
// Internal: elementwise maps over one or two float tensors of the same dtype, the second
// broadcast against the first, into a new contiguous tensor. Not recorded by autograd;
// ops build their forward and backward from these.
#include <fmt/format.h>

#include "autograd/parallel.h"
#include "autograd/profile.h"
#include "autograd/strided_loop.h"
#include "autograd/tensor.h"

namespace ag::detail {

inline void check_same_dtype(const Tensor& a, const Tensor& b, const char* what) {
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(fmt::format(
        "{}: dtype mismatch, {} {} vs {} {} (convert one with .to())", what, dtype_name(a.dtype()),
        shape_str(a.shape()), dtype_name(b.dtype()), shape_str(b.shape())));
}

// out[i] = f(a[i]) for a float tensor a.
template <typename F>
Tensor map1(const Tensor& a, const char* what, F f) {
  const profile::Timer timer(what);
  Tensor out = empty(a.shape(), a.dtype());
  AG_DISPATCH_FLOAT(a.dtype(), what, [&] {
    scalar_t* o = out.data<scalar_t>();
    const scalar_t* p = a.const_data<scalar_t>();
    if (a.is_contiguous()) {
      parallel_for(a.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
        AG_SIMD
        for (int64_t i = begin; i < end; ++i) o[i] = f(p[i]);
      });
      return;
    }
    for_each_run<2>(a.shape(), {out.strides(), a.strides()}, [&](auto off, int64_t n, auto st) {
      for (int64_t i = 0; i < n; ++i) o[off[0] + i * st[0]] = f(p[off[1] + i * st[1]]);
    });
  });
  return out;
}

// out[i] = f(a[i], b[i]) over the broadcast shape of a and b.
template <typename F>
Tensor map2(const Tensor& a, const Tensor& b, const char* what, F f) {
  const profile::Timer timer(what);
  check_same_dtype(a, b, what);
  Shape shape = a.shape() == b.shape() ? a.shape() : broadcast_shapes(a.shape(), b.shape(), what);
  Tensor out = empty(shape, a.dtype());
  AG_DISPATCH_FLOAT(a.dtype(), what, [&] {
    scalar_t* o = out.data<scalar_t>();
    const scalar_t* pa = a.const_data<scalar_t>();
    const scalar_t* pb = b.const_data<scalar_t>();
    if (a.shape() == b.shape() && a.is_contiguous() && b.is_contiguous()) {
      parallel_for(a.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
        AG_SIMD
        for (int64_t i = begin; i < end; ++i) o[i] = f(pa[i], pb[i]);
      });
      return;
    }
    Shape sa = broadcast_strides(a.shape(), a.strides(), shape);
    Shape sb = broadcast_strides(b.shape(), b.strides(), shape);
    for_each_run<3>(shape, {out.strides(), sa, sb}, [&](auto off, int64_t n, auto st) {
      scalar_t* op = o + off[0];
      const scalar_t* ap = pa + off[1];
      const scalar_t* bp = pb + off[2];
      if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
        AG_SIMD
        for (int64_t i = 0; i < n; ++i) op[i] = f(ap[i], bp[i]);
      } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
        const scalar_t bv = *bp;
        AG_SIMD
        for (int64_t i = 0; i < n; ++i) op[i] = f(ap[i], bv);
      } else {
        for (int64_t i = 0; i < n; ++i) op[i * st[0]] = f(ap[i * st[1]], bp[i * st[2]]);
      }
    });
  });
  return out;
}

}  // namespace ag::detail
