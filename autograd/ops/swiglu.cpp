// SwiGLU's gating, silu(gate) * up, forward and backward side by side: one pass over gate and
// up forward (writing, under bf16, the product's rounded copy that down_proj's GEMM reads),
// one over the gradient, gate and up backward. As silu then mul it took five passes forward
// and seven backward, and kept silu(gate) for backward as well; the values are the same
// expressions in the same order, so the bits are too.
#include <fmt/format.h>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/profile.h"
#include "autograd/vec_math.h"

namespace ag {

namespace {

template <typename T>
void swiglu_forward(const T* gate, const T* up, T* h, int64_t n, const Tensor& h16) {
  detail::parallel_for(n, detail::kElementwiseGrain, [&](int64_t i0, int64_t i1) {
    AG_SIMD
    for (int64_t i = i0; i < i1; ++i) h[i] = detail::silu_value(gate[i]) * up[i];
    detail::fill_bf16_copy(h16, h + i0, i0, i1 - i0);
  });
}

// d_up = g silu(gate); d_gate = (g up) silu'(gate): mul's and silu's backward, fused. Both
// (the usual case) from one exp an element: a loop of its own, since a store under a
// condition keeps the loop from vectorizing (54 -> 31 ms of a SmolLM2-shaped step).
template <typename T>
void swiglu_backward(const T* g, const T* gate, const T* up, T* d_gate, T* d_up, int64_t n) {
  detail::parallel_for(n, detail::kElementwiseGrain, [&](int64_t i0, int64_t i1) {
    if (d_up && d_gate) {
      AG_SIMD
      for (int64_t i = i0; i < i1; ++i) {
        T silu, slope;
        detail::silu_and_derivative(gate[i], silu, slope);
        d_up[i] = g[i] * silu;
        d_gate[i] = g[i] * up[i] * slope;
      }
    } else if (d_up) {
      AG_SIMD
      for (int64_t i = i0; i < i1; ++i) d_up[i] = g[i] * detail::silu_value(gate[i]);
    } else if (d_gate) {
      AG_SIMD
      for (int64_t i = i0; i < i1; ++i) d_gate[i] = g[i] * up[i] * detail::silu_derivative(gate[i]);
    }
  });
}

}  // namespace

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  const profile::Timer timer("swiglu");
  if (gate.shape() != up.shape() || gate.dtype() != up.dtype() || !is_floating(gate.dtype()) ||
      gate.dtype() == DType::BFloat16)
    throw std::invalid_argument(
        fmt::format("swiglu: gate {} {} and up {} {} must be float32 or float64 of one shape",
                    shape_str(gate.shape()), dtype_name(gate.dtype()), shape_str(up.shape()),
                    dtype_name(up.dtype())));
  const Tensor gc = gate.detach().contiguous(), uc = up.detach().contiguous();
  Tensor h = empty(gate.shape(), gate.dtype());
  void* const out = h.raw_data();  // taken before the copy is attached, which it would retire
  const Tensor h16 = detail::attach_bf16_copy(h);  // for the linear reading h, if bf16
  AG_DISPATCH_FLOAT(gate.dtype(), "swiglu", [&] {
    swiglu_forward(gc.const_data<scalar_t>(), uc.const_data<scalar_t>(),
                   static_cast<scalar_t*>(out), gc.numel(), h16);
  });
  if (!needs_recording({gate, up})) return h;
  attach_backward(h, "SwigluBackward", {gate, up},
                  [gc, uc, dg = gate.requires_grad(),
                   du = up.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                    const Tensor gg = g.contiguous();
                    Tensor d_gate = dg ? empty(gc.shape(), gc.dtype()) : Tensor(),
                           d_up = du ? empty(gc.shape(), gc.dtype()) : Tensor();
                    AG_DISPATCH_FLOAT(gc.dtype(), "swiglu", [&] {
                      swiglu_backward(gg.const_data<scalar_t>(), gc.const_data<scalar_t>(),
                                      uc.const_data<scalar_t>(),
                                      dg ? d_gate.data<scalar_t>() : nullptr,
                                      du ? d_up.data<scalar_t>() : nullptr, gc.numel());
                    });
                    return {d_gate, d_up};
                  });
  return h;
}

}  // namespace ag
