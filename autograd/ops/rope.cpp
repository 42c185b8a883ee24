// Rotary position embedding (RoPE), forward and backward side by side. Each token's heads
// turn by angles that grow with its position, so that q . k depends on the positions'
// difference only. Hugging Face's rotate-half layout: column i of a head pairs with column
// i + D/2 (not with i + 1, as the original paper's interleaved layout does).
#include <fmt/format.h>

#include <algorithm>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/profile.h"

namespace ag {

namespace kernels {

// One token: heads [0, heads) of D columns, in place; half = D / 2. The inverse turns the
// other way (the transpose of a rotation), which is backward.
template <typename T>
void rope_row(T* x, int64_t heads, int64_t D, const T* cos, const T* sin, bool inverse) {
  const int64_t half = D / 2;
  const T sign = inverse ? T(-1) : T(1);
  for (int64_t h = 0; h < heads; ++h) {
    T* a = x + h * D;
    T* b = a + half;
    AG_SIMD
    for (int64_t i = 0; i < half; ++i) {
      const T c = cos[i], s = sign * sin[i], x1 = a[i], x2 = b[i];
      a[i] = x1 * c - x2 * s;
      b[i] = x2 * c + x1 * s;
    }
  }
}

void rope_rows(float* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t D,
               const float* cos, const float* sin, int64_t first_position) {
  for (int64_t r = 0; r < rows; ++r)
    rope_row(x + r * row_stride, heads, D, cos + (first_position + r) * (D / 2),
             sin + (first_position + r) * (D / 2), false);
}

}  // namespace kernels

namespace {

// y = x with heads [0, rotated) of every token turned (inverse: back), tables of x's dtype.
// Each row is copied and turned while it is in cache: one pass over memory, where a clone
// of x and then the turn read and wrote the rows twice.
template <typename T>
void rotate(const Tensor& x, Tensor& y, const Tensor& cos, const Tensor& sin, int64_t rotated,
            int64_t D, bool inverse) {
  const int64_t B = y.shape()[0], Tn = y.shape()[1], W = y.shape()[2];
  const T* from = x.const_data<T>();
  T* p = y.data<T>();
  const T *c = cos.const_data<T>(), *s = sin.const_data<T>();
  detail::parallel_for_items(B * Tn, 16, static_cast<double>(W), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = r % Tn;
      std::copy(from + r * W, from + (r + 1) * W, p + r * W);
      kernels::rope_row(p + r * W, rotated, D, c + t * (D / 2), s + t * (D / 2), inverse);
    }
  });
}

void check_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t rotated, int64_t D) {
  const bool shapes = x.dim() == 3 && D > 0 && D % 2 == 0 && rotated >= 0 &&
                      rotated * D <= x.shape()[2] && cos.dim() == 2 && cos.shape() == sin.shape() &&
                      cos.shape()[0] >= x.shape()[1] && cos.shape()[1] == D / 2;
  if (!shapes)
    throw std::invalid_argument(fmt::format(
        "rope: x must be [batch, tokens, width] with {} heads of an even {} columns within the "
        "width, and cos, sin [>= tokens, {}]; got x {}, cos {}, sin {}",
        rotated, D, D / 2, shape_str(x.shape()), shape_str(cos.shape()), shape_str(sin.shape())));
  if (!is_floating(x.dtype())) throw std::invalid_argument("rope: x must be float32 or float64");
}

}  // namespace

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t rotated_heads,
            int64_t head_dim) {
  const profile::Timer timer("rope");
  check_rope(x, cos, sin, rotated_heads, head_dim);
  const Tensor c = cos.to(x.dtype()).contiguous(), s = sin.to(x.dtype()).contiguous();
  const Tensor x2 = x.detach().contiguous();
  Tensor out = empty(x.shape(), x.dtype());
  AG_DISPATCH_FLOAT(x.dtype(), "rope",
                    [&] { rotate<scalar_t>(x2, out, c, s, rotated_heads, head_dim, false); });
  if (needs_recording({x}))
    attach_backward(out, "RopeBackward", {x},
                    [c, s, rotated_heads, head_dim](const Tensor& g) -> std::vector<Tensor> {
                      const Tensor g2 = g.contiguous();
                      Tensor dx = empty(g.shape(), g.dtype());
                      AG_DISPATCH_FLOAT(dx.dtype(), "rope backward", [&] {
                        rotate<scalar_t>(g2, dx, c, s, rotated_heads, head_dim, true);
                      });
                      return {dx};
                    });
  return out;
}

}  // namespace ag
