// Elementwise ops: forward and backward side by side. Binary ops broadcast; their
// backward sums the gradient back to each input's shape (sum_to).
#include <cmath>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/ops/map.h"
#include "autograd/vec_math.h"

namespace ag {

using detail::map1;
using detail::map2;

// ---------------------------------------------------------------- add / sub
// d(a+b)/da = 1, d(a+b)/db = 1
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = map2(a, b, "add", [](auto x, auto y) { return x + y; });
  if (needs_recording({a, b}))
    attach_backward(out, "AddBackward", {a, b},
                    [sa = a.shape(), sb = b.shape()](const Tensor& g) -> std::vector<Tensor> {
                      return {sum_to(g, sa), sum_to(g, sb)};
                    });
  return out;
}

// d(a-b)/da = 1, d(a-b)/db = -1
Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = map2(a, b, "sub", [](auto x, auto y) { return x - y; });
  if (needs_recording({a, b}))
    attach_backward(out, "SubBackward", {a, b},
                    [sa = a.shape(), sb = b.shape(),
                     gb = b.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                      return {sum_to(g, sa), gb ? sum_to(neg(g), sb) : Tensor()};
                    });
  return out;
}

// ---------------------------------------------------------------- mul / div
// d(ab)/da = b, d(ab)/db = a
Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = map2(a, b, "mul", [](auto x, auto y) { return x * y; });
  if (needs_recording({a, b}))
    attach_backward(out, "MulBackward", {a, b},
                    [a = a.detach(), b = b.detach(), ga = a.requires_grad(),
                     gb = b.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                      return {ga ? sum_to(mul(g, b), a.shape()) : Tensor(),
                              gb ? sum_to(mul(g, a), b.shape()) : Tensor()};
                    });
  return out;
}

// d(a/b)/da = 1/b, d(a/b)/db = -a/b^2
Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = map2(a, b, "div", [](auto x, auto y) { return x / y; });
  if (needs_recording({a, b}))
    attach_backward(out, "DivBackward", {a, b},
                    [a = a.detach(), b = b.detach(), ga = a.requires_grad(),
                     gb = b.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                      Tensor g_over_b = div(g, b);
                      return {ga ? sum_to(g_over_b, a.shape()) : Tensor(),
                              gb ? sum_to(neg(mul(g_over_b, div(a, b))), b.shape()) : Tensor()};
                    });
  return out;
}

// ---------------------------------------------------------------- scalar forms
Tensor add(const Tensor& a, double s) {
  Tensor out = map1(a, "add", [s](auto x) { return x + static_cast<decltype(x)>(s); });
  if (needs_recording({a}))
    attach_backward(out, "AddScalarBackward", {a},
                    [](const Tensor& g) -> std::vector<Tensor> { return {g}; });
  return out;
}

Tensor mul(const Tensor& a, double s) {
  Tensor out = map1(a, "mul", [s](auto x) { return x * static_cast<decltype(x)>(s); });
  if (needs_recording({a}))
    attach_backward(out, "MulScalarBackward", {a},
                    [s](const Tensor& g) -> std::vector<Tensor> { return {mul(g, s)}; });
  return out;
}

Tensor neg(const Tensor& a) {
  Tensor out = map1(a, "neg", [](auto x) { return -x; });
  if (needs_recording({a}))
    attach_backward(out, "NegBackward", {a},
                    [](const Tensor& g) -> std::vector<Tensor> { return {neg(g)}; });
  return out;
}

// ---------------------------------------------------------------- pow
// d(a^e)/da = e a^(e-1)
Tensor pow(const Tensor& a, double e) {
  Tensor out = map1(a, "pow", [e](auto x) { return std::pow(x, static_cast<decltype(x)>(e)); });
  if (needs_recording({a}))
    attach_backward(out, "PowBackward", {a},
                    [a = a.detach(), e](const Tensor& g) -> std::vector<Tensor> {
                      return {mul(g, map1(a, "pow backward", [e](auto x) {
                                    using T = decltype(x);
                                    return static_cast<T>(e) * std::pow(x, static_cast<T>(e - 1));
                                  }))};
                    });
  return out;
}

// d(a^b)/da = b a^(b-1), d(a^b)/db = a^b ln a
Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = map2(a, b, "pow", [](auto x, auto y) { return std::pow(x, y); });
  if (needs_recording({a, b}))
    attach_backward(out, "PowBackward", {a, b},
                    [a = a.detach(), b = b.detach(), y = out.detach(), ga = a.requires_grad(),
                     gb = b.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                      Tensor da, db;
                      if (ga) da = sum_to(mul(g, mul(b, pow(a, add(b, -1.0)))), a.shape());
                      if (gb) db = sum_to(mul(g, mul(y, log(a))), b.shape());
                      return {da, db};
                    });
  return out;
}

// ---------------------------------------------------------------- unary functions
// d exp(a) = exp(a)
Tensor exp(const Tensor& a) {
  Tensor out = map1(a, "exp", [](auto x) { return detail::exp_fast(x); });
  if (needs_recording({a}))
    attach_backward(
        out, "ExpBackward", {a},
        [y = out.detach()](const Tensor& g) -> std::vector<Tensor> { return {mul(g, y)}; });
  return out;
}

// d log(a) = 1/a
Tensor log(const Tensor& a) {
  Tensor out = map1(a, "log", [](auto x) { return std::log(x); });
  if (needs_recording({a}))
    attach_backward(
        out, "LogBackward", {a},
        [a = a.detach()](const Tensor& g) -> std::vector<Tensor> { return {div(g, a)}; });
  return out;
}

// d sqrt(a) = 1 / (2 sqrt(a))
Tensor sqrt(const Tensor& a) {
  Tensor out = map1(a, "sqrt", [](auto x) { return std::sqrt(x); });
  if (needs_recording({a}))
    attach_backward(
        out, "SqrtBackward", {a}, [y = out.detach()](const Tensor& g) -> std::vector<Tensor> {
          return {map2(g, y, "sqrt backward", [](auto gv, auto yv) { return gv / (yv + yv); })};
        });
  return out;
}

// d tanh(a) = 1 - tanh(a)^2
Tensor tanh(const Tensor& a) {
  Tensor out = map1(a, "tanh", [](auto x) { return std::tanh(x); });
  if (needs_recording({a}))
    attach_backward(
        out, "TanhBackward", {a}, [y = out.detach()](const Tensor& g) -> std::vector<Tensor> {
          return {map2(g, y, "tanh backward", [](auto gv, auto yv) { return gv * (1 - yv * yv); })};
        });
  return out;
}

// d relu(a) = 1 where a > 0, else 0 (the kink at 0 takes 0, as PyTorch)
Tensor relu(const Tensor& a) {
  Tensor out = map1(a, "relu", [](auto x) { return x > 0 ? x : decltype(x)(0); });
  if (needs_recording({a}))
    attach_backward(out, "ReluBackward", {a},
                    [a = a.detach()](const Tensor& g) -> std::vector<Tensor> {
                      return {map2(g, a, "relu backward",
                                   [](auto gv, auto x) { return x > 0 ? gv : decltype(gv)(0); })};
                    });
  return out;
}

// gelu and its derivative: detail::gelu_value / gelu_derivative (vec_math.h)
Tensor gelu(const Tensor& a) {
  Tensor out = map1(a, "gelu", [](auto x) { return detail::gelu_value(x); });
  if (needs_recording({a}))
    attach_backward(
        out, "GeluBackward", {a}, [a = a.detach()](const Tensor& g) -> std::vector<Tensor> {
          return {map2(g, a, "gelu backward",
                       [](auto gv, auto x) { return gv * detail::gelu_derivative(x); })};
        });
  return out;
}

// silu and its derivative: detail::silu_value / silu_derivative (vec_math.h)
Tensor silu(const Tensor& a) {
  Tensor out = map1(a, "silu", [](auto x) { return detail::silu_value(x); });
  if (needs_recording({a}))
    attach_backward(
        out, "SiluBackward", {a}, [a = a.detach()](const Tensor& g) -> std::vector<Tensor> {
          return {map2(g, a, "silu backward",
                       [](auto gv, auto x) { return gv * detail::silu_derivative(x); })};
        });
  return out;
}

// ---------------------------------------------------------------- in place, unrecorded
void add_(Tensor& a, const Tensor& b) {
  detail::check_same_dtype(a, b, "add_");
  Shape s = broadcast_shapes(a.shape(), b.shape(), "add_");
  if (s != a.shape())
    throw std::invalid_argument(fmt::format("add_: shape {} does not broadcast into {}",
                                            shape_str(b.shape()), shape_str(a.shape())));
  Shape sb = broadcast_strides(b.shape(), b.strides(), s);
  AG_DISPATCH_FLOAT(a.dtype(), "add_", [&] {
    scalar_t* pa = a.data<scalar_t>();
    const scalar_t* pb = b.const_data<scalar_t>();
    if (a.is_contiguous() && b.is_contiguous() && b.shape() == s) {  // gradient accumulation
      detail::parallel_for(a.numel(), detail::kElementwiseGrain, [&](int64_t i0, int64_t i1) {
        AG_SIMD
        for (int64_t i = i0; i < i1; ++i) pa[i] += pb[i];
      });
      return;
    }
    detail::for_each_run<2>(s, {a.strides(), sb}, [&](auto off, int64_t n, auto st) {
      if (st[0] == 1 && st[1] == 1) {
        AG_SIMD
        for (int64_t i = 0; i < n; ++i) pa[off[0] + i] += pb[off[1] + i];
      } else {
        for (int64_t i = 0; i < n; ++i) pa[off[0] + i * st[0]] += pb[off[1] + i * st[1]];
      }
    });
  });
}

// ---------------------------------------------------------------- operators
Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
Tensor operator-(const Tensor& a) {
  return neg(a);
}
Tensor operator+(const Tensor& a, double b) {
  return add(a, b);
}
Tensor operator-(const Tensor& a, double b) {
  return add(a, -b);
}
Tensor operator*(const Tensor& a, double b) {
  return mul(a, b);
}
Tensor operator/(const Tensor& a, double b) {
  return mul(a, 1.0 / b);
}
Tensor operator*(double a, const Tensor& b) {
  return mul(b, a);
}

}  // namespace ag
