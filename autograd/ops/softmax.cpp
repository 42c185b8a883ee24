// masked_fill, softmax, log_softmax and the fused cross-entropy. Every row is
// max-subtracted before exp; a row that is -inf everywhere (fully masked) is defined as
// zeros (softmax) or -inf (log_softmax) with zero gradient rather than NaN.
#include <fmt/format.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/ops/cross_entropy_rows.h"
#include "autograd/ops/rows.h"
#include "autograd/parallel.h"
#include "autograd/profile.h"
#include "autograd/strided_loop.h"
#include "autograd/vec_math.h"

namespace ag {

namespace {

// out = masked ? fill : a, mask broadcast to a's shape (nonzero = masked).
Tensor where_masked(const Tensor& a, const Tensor& mask, double fill, const char* what) {
  Shape s = broadcast_shapes(a.shape(), mask.shape(), what);
  if (s != a.shape())
    throw std::invalid_argument(
        fmt::format("{}: mask of shape {} does not broadcast to the "
                    "input's shape {}",
                    what, shape_str(mask.shape()), shape_str(a.shape())));
  Shape ms = broadcast_strides(mask.shape(), mask.strides(), s);
  Tensor out = empty(s, a.dtype());
  AG_DISPATCH_FLOAT(a.dtype(), what, [&] {
    using T = scalar_t;
    T* o = out.data<T>();
    const T* pa = a.const_data<T>();
    const T v = static_cast<T>(fill);
    AG_DISPATCH_ALL(mask.dtype(), what, [&] {
      const scalar_t* pm = static_cast<const scalar_t*>(mask.const_raw_data());
      detail::for_each_run<3>(
          s, {out.strides(), a.strides(), ms}, [&](auto off, int64_t n, auto st) {
            for (int64_t i = 0; i < n; ++i)
              o[off[0] + i * st[0]] =
                  pm[off[2] + i * st[2]] != scalar_t(0) ? v : pa[off[1] + i * st[1]];
          });
    });
  });
  return out;
}

}  // namespace

// d out / d a = 0 where masked, 1 elsewhere
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value) {
  const profile::Timer timer("masked_fill");
  Tensor out = where_masked(a, mask, value, "masked_fill");
  if (needs_recording({a}))
    attach_backward(out, "MaskedFillBackward", {a},
                    [mask = mask.detach()](const Tensor& g) -> std::vector<Tensor> {
                      return {where_masked(g, mask, 0.0, "masked_fill backward")};
                    });
  return out;
}

// y = exp(x - max) / sum exp(x - max);  dx = y (g - sum(g y))
Tensor softmax(const Tensor& a, int64_t dim) {
  const profile::Timer timer("softmax");
  dim = normalize_dim(dim, a.dim(), "softmax");
  Tensor out = detail::map_rows<1>({a}, dim, "softmax", [](auto in, auto* y, int64_t n) {
    using T = std::remove_pointer_t<decltype(y)>;
    const T* x = in[0];
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
    if (m == -std::numeric_limits<T>::infinity()) {
      for (int64_t i = 0; i < n; ++i) y[i] = 0;
      return;
    }
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += (y[i] = detail::exp_fast(x[i] - m));
    const T inv = static_cast<T>(1.0 / s);
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  });
  if (needs_recording({a}))
    attach_backward(out, "SoftmaxBackward", {a},
                    [y = out.detach(), dim](const Tensor& g) -> std::vector<Tensor> {
                      return {detail::map_rows<2>({g, y}, dim, "softmax backward",
                                                  [](auto in, auto* dx, int64_t n) {
                                                    const auto* gr = in[0];
                                                    const auto* yr = in[1];
                                                    double dot = 0;
                                                    for (int64_t i = 0; i < n; ++i)
                                                      dot += gr[i] * yr[i];
                                                    for (int64_t i = 0; i < n; ++i)
                                                      dx[i] = yr[i] * (gr[i] - dot);
                                                  })};
                    });
  return out;
}

// y = x - max - log sum exp(x - max);  dx = g - exp(y) sum(g)
Tensor log_softmax(const Tensor& a, int64_t dim) {
  const profile::Timer timer("log_softmax");
  dim = normalize_dim(dim, a.dim(), "log_softmax");
  Tensor out = detail::map_rows<1>({a}, dim, "log_softmax", [](auto in, auto* y, int64_t n) {
    using T = std::remove_pointer_t<decltype(y)>;
    const T* x = in[0];
    const T inf = std::numeric_limits<T>::infinity();
    T m = -inf;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
    if (m == -inf) {
      for (int64_t i = 0; i < n; ++i) y[i] = -inf;
      return;
    }
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += detail::exp_fast(x[i] - m);
    // (x - m) - log s, not x - (m + log s): m + log s would round at the scale of m
    const T log_s = static_cast<T>(std::log(s));
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - log_s;
  });
  if (needs_recording({a}))
    attach_backward(out, "LogSoftmaxBackward", {a},
                    [y = out.detach(), dim](const Tensor& g) -> std::vector<Tensor> {
                      return {detail::map_rows<2>(
                          {g, y}, dim, "log_softmax backward", [](auto in, auto* dx, int64_t n) {
                            using T = std::remove_pointer_t<decltype(dx)>;
                            const T* gr = in[0];
                            const T* yr = in[1];
                            double gsum = 0;
                            bool all_masked = true;
                            for (int64_t i = 0; i < n; ++i) {
                              gsum += gr[i];
                              all_masked &= std::isinf(yr[i]) && yr[i] < 0;
                            }
                            for (int64_t i = 0; i < n; ++i)
                              dx[i] = all_masked ? T(0)
                                                 : static_cast<T>(gr[i] - std::exp(yr[i]) * gsum);
                          })};
                    });
  return out;
}

// loss = mean over counted rows of (logsumexp(x) - x[target]);
// dx = (softmax(x) - onehot(target)) * g / count, zero on ignored rows.

namespace {

// The rows whose target is not ignore_index, after checking that each of those is a class
int64_t counted_targets(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  if (logits.dim() < 1)
    throw std::invalid_argument("cross_entropy: logits need a class dim, got a scalar");
  if (targets.dtype() != DType::Int64)
    throw std::invalid_argument(
        fmt::format("cross_entropy: targets must be int64, got {}", dtype_name(targets.dtype())));
  Shape expected(logits.shape().begin(), logits.shape().end() - 1);
  if (targets.shape() != expected)
    throw std::invalid_argument(
        fmt::format("cross_entropy: logits of shape {} need targets of "
                    "shape {}, got {}",
                    shape_str(logits.shape()), shape_str(expected), shape_str(targets.shape())));
  const int64_t C = logits.shape().back();
  Tensor t = targets.contiguous();
  const int64_t* tp = t.const_data<int64_t>();
  int64_t count = 0;
  for (int64_t r = 0; r < t.numel(); ++r) {
    if (tp[r] == ignore_index) continue;
    if (tp[r] < 0 || tp[r] >= C)
      throw std::out_of_range(
          fmt::format("cross_entropy: target {} at position {} is out of "
                      "range for {} classes",
                      tp[r], r, C));
    ++count;
  }
  return count;
}

// x [rows, C], t [rows]: lse[r] = log sum exp x[r] (saved for backward), and the loss
template <typename T>
T cross_entropy_forward(const T* x, const int64_t* t, int64_t rows, int64_t C, int64_t count,
                        int64_t ignore_index, T* lse) {
  const double total =
      detail::parallel_sum(rows, detail::kCrossEntropyRowGrain, C, [&](int64_t r0, int64_t r1) {
        double part = 0;
        for (int64_t r = r0; r < r1; ++r) {
          const bool counted = t[r] != ignore_index;
          const auto row = detail::cross_entropy_row(x + r * C, C, t[r], counted);
          lse[r] = row.lse;
          if (counted) part += row.term;
        }
        return part;
      });
  return static_cast<T>(count ? total / count : 0.0);
}

// dx [rows, C], already zero, from the loss gradient scaled by 1 / count
template <typename T>
void cross_entropy_backward(T* dx, const T* x, const int64_t* t, const T* lse, int64_t rows,
                            int64_t C, int64_t ignore_index, T scale) {
  detail::parallel_for_items(rows, detail::kCrossEntropyRowGrain, C, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      if (t[r] != ignore_index)
        detail::cross_entropy_row_gradient(dx + r * C, x + r * C, C, t[r], lse[r], scale);
  });
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  const profile::Timer timer("cross_entropy");
  const int64_t count = counted_targets(logits, targets, ignore_index);
  const int64_t C = logits.shape().back();
  Tensor x = detail::rows_view(logits, logits.dim() - 1);  // [rows, C] contiguous
  Tensor t = targets.contiguous();
  const int64_t rows = t.numel();
  Tensor lse = empty({rows}, logits.dtype());
  Tensor loss = empty({}, logits.dtype());
  AG_DISPATCH_FLOAT(logits.dtype(), "cross_entropy", [&] {
    *loss.data<scalar_t>() = cross_entropy_forward(x.data<scalar_t>(), t.data<int64_t>(), rows, C,
                                                   count, ignore_index, lse.data<scalar_t>());
  });
  if (needs_recording({logits}))
    attach_backward(loss, "CrossEntropyBackward", {logits},
                    [x = x.detach(), t, lse, count, ignore_index,
                     in_shape = logits.shape()](const Tensor& g) -> std::vector<Tensor> {
                      Tensor dx = zeros(x.shape(), x.dtype());
                      if (count == 0) return {dx.view(in_shape)};
                      AG_DISPATCH_FLOAT(x.dtype(), "cross_entropy backward", [&] {
                        cross_entropy_backward(dx.data<scalar_t>(), x.data<scalar_t>(),
                                               t.data<int64_t>(), lse.data<scalar_t>(), t.numel(),
                                               x.shape().back(), ignore_index,
                                               static_cast<scalar_t>(g.item() / count));
                      });
                      return {dx.view(in_shape)};
                    });
  return loss;
}

}  // namespace ag
