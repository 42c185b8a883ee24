// matmul and linear: GEMMs (ops/gemm.h) with their backward beside them. Each operand's
// last two dims are handed to the GEMM as they lie in memory, a transposed view as a
// transposed operand, so q @ k^T and the backward's g @ W^T copy nothing; only layouts a
// GEMM cannot describe (e.g. expanded or doubly strided) are copied first. Under a bf16
// autocast scope (autograd/autocast.h) float32 operands are rounded to bfloat16 first and
// the GEMMs, forward and backward, accumulate in float32.
#include <fmt/format.h>
#include <omp.h>

#include <cstring>
#include <functional>
#include <optional>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/ops/gemm.h"
#include "autograd/parallel.h"
#include "autograd/profile.h"
#include "autograd/quant/packed_weight.h"
#include "autograd/vec_math.h"

namespace ag {

namespace {

using detail::gemm, detail::gemm_operand, detail::GemmOperand;

// Multiply-adds below which the two GEMMs of a backward run side by side (run_pair)
// rather than one after the other on all threads.
constexpr double kSmallGemmWork = 1 << 26;

// Runs the two GEMMs of a backward: side by side as two OpenMP tasks on all threads when
// they are small (two small GEMMs keep the cores busier than one after the other), else
// one after the other on all threads; tiny ones (team_pays) one after the other here. A oneDNN GEMM
// run in a task hands its blocks out as tasks too (gemm.h), so a thread that finishes its GEMM
// first takes blocks of the other's. Every block, and every OpenBLAS GEMM (which splits only M and
// N), sums each C element in the same order whichever thread runs it: the bits do not depend on
// this.
template <typename A, typename B>
void run_pair(bool do_a, bool do_b, double work, A&& first, B&& second) {
  if (do_a && do_b && work < kSmallGemmWork && detail::team_pays(work / detail::kMacsPerElement)) {
    profile::Timer timer("GEMM pairs side by side");
    if (timer.on()) timer.describe("GEMM pairs side by side", "two OpenMP tasks", 4 * work);
#pragma omp parallel
#pragma omp single
    {
#pragma omp task
      first();
#pragma omp task
      second();
    }
    return;
  }
  if (do_a) first();
  if (do_b) second();
}

// fn(In{}, Out{}) for the operand and result types of a GEMM on operands of dtype d:
// bfloat16 operands give a float32 result.
template <typename F>
void dispatch_gemm(DType d, const char* what, F&& fn) {
  switch (d) {
    case DType::Float32: return fn(float{}, float{});
    case DType::Float64: return fn(double{}, double{});
    case DType::BFloat16: return fn(bfloat16{}, float{});
    default:
      throw std::invalid_argument(fmt::format(
          "{}: expected float32, float64 or bfloat16 operands, got {}", what, dtype_name(d)));
  }
}

DType gemm_result_type(DType operands) {
  return operands == DType::BFloat16 ? DType::Float32 : operands;
}

}  // namespace

namespace detail {

Tensor matmul_forward(Tensor a, Tensor b) {
  const int64_t M = a.shape()[a.dim() - 2], K = a.shape()[a.dim() - 1];
  const int64_t N = b.shape()[b.dim() - 1];
  Shape batch_a(a.shape().begin(), a.shape().end() - 2);
  Shape batch_b(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes(batch_a, batch_b, "matmul (batch dims)");
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = empty(out_shape, gemm_result_type(a.dtype()));
  if (out.numel() == 0) return out;
  if (K == 0) {
    fill_(out, 0);
    return out;
  }
  GemmOperand oa = gemm_operand(a), ob = gemm_operand(b);
  Shape sa = broadcast_strides(batch_a, Shape(a.strides().begin(), a.strides().end() - 2), batch);
  Shape sb = broadcast_strides(batch_b, Shape(b.strides().begin(), b.strides().end() - 2), batch);
  const int64_t batches = shape_numel(batch);
  dispatch_gemm(a.dtype(), "matmul", [&](auto in, auto result) {
    using In = decltype(in);
    const In* pa = a.const_data<In>();
    const In* pb = b.const_data<In>();
    auto* pc = out.data<decltype(result)>();
    for (int64_t i = 0; i < batches; ++i) {
      int64_t offa = 0, offb = 0, rem = i;
      for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
        int64_t k = rem % batch[d];
        rem /= batch[d];
        offa += k * sa[d];
        offb += k * sb[d];
      }
      gemm(oa, ob, M, N, K, pa + offa, pb + offb, pc + i * M * N);
    }
  });
  return out;
}

}  // namespace detail

namespace {

using detail::matmul_forward;

// detail::bf16_pays for a [..., M, K] @ b [..., K, N], each batch's GEMM as its operands lie
// (a layout no GEMM can read is copied, contiguous, untransposed)
bool bf16_pays_for(const Tensor& a, const Tensor& b) {
  auto transposed = [](const Tensor& t) {
    const int64_t r = t.dim();
    GemmOperand op;
    return detail::gemm_layout(t.shape()[r - 2], t.shape()[r - 1], t.strides()[r - 2],
                               t.strides()[r - 1], op) &&
           op.trans;
  };
  return detail::bf16_pays(transposed(a), transposed(b), a.shape()[a.dim() - 2],
                           b.shape()[b.dim() - 1], a.shape().back());
}

}  // namespace

// C = A B: dA = dC B^T, dB = A^T dC, each summed back over broadcast batch dims.
Tensor matmul(const Tensor& a, const Tensor& b) {
  const profile::Timer timer("matmul");
  if (a.dim() == 0 || b.dim() == 0)
    throw std::invalid_argument(
        fmt::format("matmul: both operands need at least one dim, got "
                    "{} and {}",
                    shape_str(a.shape()), shape_str(b.shape())));
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(fmt::format("matmul: dtype mismatch, {} {} vs {} {}",
                                            dtype_name(a.dtype()), shape_str(a.shape()),
                                            dtype_name(b.dtype()), shape_str(b.shape())));
  const int64_t ka = a.shape().back();
  const int64_t kb = b.dim() == 1 ? b.shape()[0] : b.shape()[b.dim() - 2];
  if (ka != kb)
    throw std::invalid_argument(
        fmt::format("matmul: shapes {} and {} are not aligned (inner dims {} vs {})",
                    shape_str(a.shape()), shape_str(b.shape()), ka, kb));
  // vectors become matrices through differentiable views, as in NumPy
  if (a.dim() == 1 && b.dim() == 1) return matmul(a.unsqueeze(0), b.unsqueeze(-1)).reshape({});
  if (a.dim() == 1) return matmul(a.unsqueeze(0), b).squeeze(-2);
  if (b.dim() == 1) return matmul(a, b.unsqueeze(-1)).squeeze(-1);
  // [..., M, K] @ [K, N]: fold the batch into M, one GEMM (and one for dB in backward)
  if (a.dim() > 2 && b.dim() == 2) {
    Shape out_shape = a.shape();
    out_shape.back() = b.shape()[1];
    return matmul(a.reshape({-1, ka}), b).view(out_shape);
  }
  // autocast: bfloat16 operands (a parameter's copy made once per scope), and the
  // incoming gradient rounded to bfloat16 in backward, where bfloat16 pays for this shape
  const bool bf16 = detail::autocast_to_bf16(a.dtype()) && bf16_pays_for(a, b);
  Tensor ca = bf16 ? detail::autocast_operand(a) : a.detach();
  Tensor cb = bf16 ? detail::autocast_operand(b) : b.detach();
  Tensor out = matmul_forward(ca, cb);
  if (needs_recording({a, b}))
    attach_backward(out, "MatmulBackward", {a, b},
                    [a = ca, b = cb, ga = a.requires_grad(), gb = b.requires_grad(),
                     bf16](const Tensor& grad) -> std::vector<Tensor> {
                      Tensor da, db, g = bf16 ? detail::bf16_operand(grad) : grad;
                      run_pair(
                          ga, gb, static_cast<double>(g.numel()) * a.shape().back(),
                          [&] { da = matmul_forward(g, b.transpose(-1, -2)); },
                          [&] { db = matmul_forward(a.transpose(-1, -2), g); });
                      if (ga) da = sum_to(da, a.shape());
                      if (gb) db = sum_to(db, b.shape());
                      return {da, db};
                    });
  return out;
}

// ---- linear
// M = rows of x, K = in, N = out.  h = x W^T + b;  y = act(h)
// dh = g act'(h);  db = sum over rows of dh;  dx = dh W;  dW = dh^T x

namespace {

void check_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (x.dim() < 1 || weight.dim() != 2 || x.shape().back() != weight.shape()[1])
    throw std::invalid_argument(fmt::format(
        "linear: input {} and weight {} do not fit (the weight is [out, in], the input [..., in])",
        shape_str(x.shape()), shape_str(weight.shape())));
  // a packed weight's values are exact in any float type: it is unpacked as x's
  if ((x.dtype() != weight.dtype() && !weight.packing()) ||
      (bias.defined() && bias.dtype() != x.dtype()))
    throw std::invalid_argument(
        fmt::format("linear: dtypes differ (input {}, weight {}{})", dtype_name(x.dtype()),
                    dtype_name(weight.dtype()),
                    bias.defined() ? ", bias " + std::string(dtype_name(bias.dtype())) : ""));
  if (bias.defined() && bias.shape() != Shape{weight.shape()[0]})
    throw std::invalid_argument(
        fmt::format("linear: bias {} for {} outputs", shape_str(bias.shape()), weight.shape()[0]));
}

// h [M, N] (allocated by the caller) = x2 [M, K] w^T + b, b [N] or undefined, with
// rows_done(row0, rows) run on finished rows of h while they are in cache
using RowsDone = std::function<void(int64_t row0, int64_t rows)>;

void linear_forward(Tensor x2, const Tensor& w, const Tensor& b, Tensor& h,
                    const RowsDone& rows_done = {}) {
  const int64_t M = x2.shape()[0], K = x2.shape()[1], N = w.shape()[0];
  if (M == 0 || N == 0) return;
  dispatch_gemm(x2.dtype(), "linear", [&](auto in, auto result) {
    using In = decltype(in);
    using Out = decltype(result);
    Out* hp = h.data<Out>();
    Tensor bc = b.defined() ? b.contiguous() : Tensor();
    const detail::GemmEpilogue<Out> epilogue{bc.defined() ? bc.data<Out>() : nullptr, rows_done};
    if (K == 0) {  // h is the bias, or zero
      for (int64_t r = 0; r < M; ++r)
        for (int64_t c = 0; c < N; ++c) hp[r * N + c] = epilogue.bias ? epilogue.bias[c] : Out(0);
      if (rows_done) rows_done(0, M);
      return;
    }
    Tensor wt = w.t();
    GemmOperand ox = gemm_operand(x2), ow = gemm_operand(wt);
    gemm(ox, ow, M, N, K, x2.const_data<In>(), wt.const_data<In>(), hp, Out(0), epilogue);
  });
}

// {dx [M, K], dw [N, K], db [N]} from dh [M, N], each only where asked for; the GEMMs take
// dh rounded to bfloat16 when the forward's did (bf16: dh16 where the producer of dh made
// that copy already), the bias sums it as it is
std::vector<Tensor> linear_backward(const Tensor& dh, const Tensor& x2, const Tensor& w, bool gx,
                                    bool gw, bool gb, bool bf16, const Tensor& dh16 = Tensor()) {
  const Tensor d = !bf16 ? dh : dh16.defined() ? dh16 : detail::bf16_operand(dh);
  Tensor dx, dw, db;
  run_pair(
      gx, gw, static_cast<double>(dh.numel()) * x2.shape()[1], [&] { dx = matmul_forward(d, w); },
      [&] { dw = matmul_forward(d.t(), x2); });
  if (gb) db = sum(dh, {0});
  return {dx, dw, db};
}

// GELU after a linear, computed on each block of rows the GEMM finishes (while it is in
// cache): y = gelu(h), and for backward either gelu'(h), written over h (float32 and
// float64: backward is then one multiply), or, under autocast, h rounded to bfloat16 (as
// torch.autocast keeps a linear's output; backward recomputes gelu' from it). Nothing is
// kept when the op is not recorded.
struct GeluAfterLinear {
  Tensor y, saved;  // saved: gelu'(h) (that is, h itself), or bfloat16 h; or undefined
  void* y_data;     // y's writable pointer, taken before y16 is attached (it would retire it)
  Tensor y16;       // under autocast, y rounded for the linear that reads it

  GeluAfterLinear(Tensor& h, bool bf16, bool record)
      : y(empty(h.shape(), h.dtype())),
        saved(!record ? Tensor()
              : bf16  ? empty(h.shape(), DType::BFloat16)
                      : h),
        y_data(y.raw_data()),
        y16(detail::attach_bf16_copy(y)) {}

  RowsDone rows_done(Tensor& h) {
    const int64_t N = h.shape()[1];
    return [this, &h, N](int64_t row0, int64_t rows) {
      AG_DISPATCH_FLOAT(h.dtype(), "linear gelu", [&] {
        scalar_t* hp = h.data<scalar_t>() + row0 * N;
        scalar_t* yp = static_cast<scalar_t*>(y_data) + row0 * N;
        const int64_t n = rows * N;
        if (saved.defined() && saved.dtype() != DType::BFloat16) {  // the derivative over h
          AG_SIMD
          for (int64_t i = 0; i < n; ++i) detail::gelu_and_derivative(hp[i], yp[i], hp[i]);
        } else {
          AG_SIMD
          for (int64_t i = 0; i < n; ++i) yp[i] = detail::gelu_value(hp[i]);
          if (saved.defined())  // autocast: h is float32
            to_bfloat16(h.data<float>() + row0 * N, saved.data<bfloat16>() + row0 * N, n);
        }
        // y16 also where this linear runs in float32 under autocast (bf16 did not pay for
        // its shape): the linear reading y may still run in bf16
        detail::fill_bf16_copy(y16, yp, row0 * N, n);
      });
    };
  }
};

// dh = g gelu'(h) from what GeluAfterLinear saved, and under autocast (saved: bfloat16 h)
// dh16, dh rounded to bfloat16 for the GEMMs in the same pass, each chunk while in cache
struct GeluGradient {
  Tensor dh, dh16;
};

GeluGradient gelu_backward(const Tensor& g, const Tensor& saved) {
  Tensor d = empty(g.shape(), g.dtype());
  if (saved.dtype() == DType::BFloat16) {
    Tensor d16 = empty(g.shape(), DType::BFloat16);
    const float* gp = g.const_data<float>();
    const bfloat16* hp = saved.const_data<bfloat16>();
    float* dp = d.data<float>();
    detail::parallel_for(g.numel(), detail::kElementwiseGrain, [&](int64_t i0, int64_t i1) {
      AG_SIMD
      for (int64_t i = i0; i < i1; ++i) dp[i] = gp[i] * detail::gelu_derivative(float(hp[i]));
      to_bfloat16(dp + i0, d16.data<bfloat16>() + i0, i1 - i0);
    });
    return {d, d16};
  }
  AG_DISPATCH_FLOAT(g.dtype(), "linear gelu backward", [&] {
    const scalar_t* gp = g.const_data<scalar_t>();
    const scalar_t* sp = saved.const_data<scalar_t>();
    scalar_t* dp = d.data<scalar_t>();
    detail::parallel_for(g.numel(), detail::kElementwiseGrain, [&](int64_t i0, int64_t i1) {
      AG_SIMD
      for (int64_t i = i0; i < i1; ++i) dp[i] = gp[i] * sp[i];
    });
  });
  return {d, Tensor()};
}

// The gradients of the parts that were stacked along dim 0 into the operand whose
// gradient is g (one part: g itself); undefined parts where g is
std::vector<Tensor> unstack(const Tensor& g, const std::vector<int64_t>& sizes) {
  if (sizes.size() == 1) return {g};
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t n : sizes) {
    parts.push_back(g.defined() ? g.narrow(0, start, n).contiguous() : Tensor());
    start += n;
  }
  return parts;
}

bool any_packed(const std::vector<Tensor>& parts) {
  for (const auto& p : parts)
    if (p.packing()) return true;
  return false;
}

// The weights stacked along dim 0 as a new matrix of dtype (float32, float64, or bfloat16
// under autocast), packed parts unpacked (quant/packed_weight.h) and the others converted:
// bfloat16 rounded as autocast rounds them, so the GEMMs see what the dequantized float
// weights would give them.
Tensor unpacked_stack(const std::vector<Tensor>& parts, DType dtype) {
  const profile::Timer timer("unpack frozen weight");
  int64_t rows = 0;
  for (const auto& p : parts) rows += p.shape()[0];
  const int64_t K = parts[0].shape()[1];
  Tensor out = empty({rows, K}, dtype);
  int64_t row = 0;
  for (const auto& p : parts) {
    const int64_t n = p.shape()[0];
    if (p.packing())
      quant::unpack_rows(
          p, 0, n, dtype,
          static_cast<char*>(out.raw_data()) + row * K * static_cast<int64_t>(dtype_size(dtype)));
    else
      copy_(out.narrow(0, row, n), dtype == DType::BFloat16 ? to_bfloat16(p.detach()) : p.detach());
    row += n;
  }
  return out;
}

// A packed matrix too large to unpack at once (quant::kUnpackTileWeights), one weight, no
// activation: the forward h [M, N] = x2 W^T + b a tile of W's rows at a time (each tile's
// columns of h), and backward's dx = d W as the sum of the tiles' products, in tile order
// (its bits whatever the thread count; not the untiled GEMM's sums).
struct PackedTiles {
  Tensor packed;
  DType w_type;
  int64_t rows;  // W's rows a tile

  PackedTiles(const Tensor& p, DType type)
      : packed(p.detach()),
        w_type(type),
        rows(std::max<int64_t>(
            1, quant::unpack_tile_weights() / std::max<int64_t>(1, p.shape()[1]))) {}

  Tensor tile(int64_t r0, int64_t n) const {
    Tensor wt = empty({n, packed.shape()[1]}, w_type);
    quant::unpack_rows(packed, r0, r0 + n, w_type, wt.raw_data());
    return wt;
  }
  void forward(const Tensor& x2, const Tensor& b, Tensor& h) const {
    const int64_t N = packed.shape()[0], M = x2.shape()[0];
    for (int64_t r0 = 0; r0 < N; r0 += rows) {
      const int64_t n = std::min(rows, N - r0);
      Tensor ht = empty({M, n}, h.dtype());
      linear_forward(x2, tile(r0, n), b.defined() ? b.narrow(0, r0, n) : Tensor(), ht);
      copy_(h.narrow(1, r0, n), ht);
    }
  }
  Tensor input_grad(const Tensor& d) const {
    Tensor dx;
    for (int64_t r0 = 0, N = packed.shape()[0]; r0 < N; r0 += rows) {
      const int64_t n = std::min(rows, N - r0);
      Tensor part = matmul_forward(d.narrow(1, r0, n), tile(r0, n));
      if (dx.defined())
        add_(dx, part);
      else
        dx = part;
    }
    return dx;
  }
};

std::vector<Tensor> detached(const std::vector<Tensor>& parts) {
  std::vector<Tensor> out;
  for (const auto& t : parts) out.push_back(t.detach());
  return out;
}

// The parts stacked along dim 0 (one part: itself), detached; undefined for none.
Tensor stacked(const std::vector<Tensor>& parts) {
  if (parts.empty() || !parts[0].defined()) return Tensor();
  if (parts.size() == 1) return parts[0].detach();
  return cat(detached(parts), 0);
}

// The stacked weight the GEMMs read: unpacked when a part is packed, autocast's bfloat16
// copy, or the float parts themselves.
Tensor gemm_weight(const std::vector<Tensor>& weights, bool bf16, DType w_type) {
  if (any_packed(weights)) return unpacked_stack(weights, w_type);
  return bf16 ? detail::autocast_stacked(weights) : stacked(weights);
}

// x W^T + b over a packed W tile by tile (PackedTiles), recorded with x's and b's gradients.
Tensor tiled_linear(const Tensor& x, const PackedTiles& tiles, const Tensor& bias, bool bf16,
                    int64_t M, int64_t N, int64_t K) {
  Shape out_shape = x.shape();
  out_shape.back() = N;
  Tensor x2 = x.detach().contiguous().view({M, K});
  if (bf16) x2 = detail::bf16_operand(x2);
  const Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor h = empty({M, N}, gemm_result_type(x2.dtype()));
  tiles.forward(x2, b, h);
  Tensor y = h.view(out_shape);
  if (!needs_recording({x, bias})) return y;
  attach_backward(
      y, "PackedLinearBackward", {x, bias},
      [tiles, M, N, bf16, in_shape = x.shape(), gx = x.requires_grad(),
       gb = bias.defined() && bias.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
        const Tensor dh = g.contiguous().view({M, N});
        Tensor dx, db;
        if (gx) dx = tiles.input_grad(bf16 ? detail::bf16_operand(dh) : dh).view(in_shape);
        if (gb) db = sum(dh, {0});
        return {dx, db};
      });
  return y;
}

// y = act(x W^T + b) as one node whose inputs are x, the weights, then the biases; W and b
// are the weights and the biases stacked along the outputs (one part: the part itself).
// biases is empty or one per weight, undefined for none.
Tensor stacked_linear(const Tensor& x, const std::vector<Tensor>& weights,
                      const std::vector<Tensor>& biases, Activation activation) {
  const profile::Timer timer("linear (stacked)");
  const int64_t K = weights[0].shape()[1];
  int64_t N = 0;
  for (const auto& part : weights) N += part.shape()[0];
  const int64_t M = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  // autocast: x and the weights as bfloat16 (the weights' copy made once per scope) where
  // bfloat16 pays for this shape on this CPU; elsewhere forward and backward run as in fp32
  const bool bf16 = detail::autocast_to_bf16(x.dtype()) && detail::bf16_pays(false, true, M, N, K);
  // a frozen weight held packed is unpacked for the forward's GEMM and again for backward's
  // (none kept between them): the same GEMMs over the same values as its float weight's
  const bool packed = any_packed(weights);
  const DType w_type = bf16 ? DType::BFloat16 : x.dtype();
  if (packed && weights.size() == 1 && activation == Activation::None &&
      static_cast<double>(N) * K > static_cast<double>(quant::unpack_tile_weights()))
    return tiled_linear(x, PackedTiles(weights[0], w_type), stacked(biases), bf16, M, N, K);
  Tensor w = gemm_weight(weights, bf16, w_type), b = stacked(biases);
  Shape out_shape = x.shape();
  out_shape.back() = N;
  Tensor x2 = x.detach().contiguous().view({M, K});
  if (bf16) x2 = detail::bf16_operand(x2);
  std::vector<Tensor> inputs{x};
  inputs.insert(inputs.end(), weights.begin(), weights.end());
  inputs.insert(inputs.end(), biases.begin(), biases.end());
  const bool record = needs_recording(inputs);
  Tensor h = empty({M, N}, gemm_result_type(x2.dtype()));
  const bool gelu = activation == Activation::Gelu;
  std::optional<GeluAfterLinear> act;
  if (gelu) act.emplace(h, bf16, record);
  linear_forward(x2, w, b, h, gelu ? act->rows_done(h) : RowsDone());
  Tensor y = (gelu ? act->y : h).view(out_shape);
  if (!record) return y;
  std::vector<int64_t> sizes;
  bool gw = false, gb = false;
  for (const auto& t : weights) sizes.push_back(t.shape()[0]), gw |= t.requires_grad();
  for (const auto& t : biases) gb |= t.defined() && t.requires_grad();
  const std::vector<Tensor> packed_parts = packed ? detached(weights) : std::vector<Tensor>{};
  if (packed) w = Tensor();  // unpacked again by backward, not kept
  attach_backward(y, gelu ? "LinearGeluBackward" : "LinearBackward", inputs,
                  [x2, w, packed_parts, w_type, gelu_saved = gelu ? act->saved : Tensor(), M, N,
                   sizes, stacked_biases = biases.size(), in_shape = x.shape(),
                   gx = x.requires_grad(), gw, gb, bf16](const Tensor& g) -> std::vector<Tensor> {
                    GeluGradient dh{g.contiguous().view({M, N}), Tensor()};
                    if (gelu_saved.defined()) dh = gelu_backward(dh.dh, gelu_saved);
                    const Tensor wb = w.defined() || !gx ? w : unpacked_stack(packed_parts, w_type);
                    std::vector<Tensor> d =
                        linear_backward(dh.dh, x2, wb, gx, gw, gb, bf16, dh.dh16);
                    std::vector<Tensor> grads{gx ? d[0].view(in_shape) : Tensor()};
                    for (auto& part : unstack(d[1], sizes)) grads.push_back(part);
                    if (stacked_biases > 0)
                      for (auto& part : unstack(d[2], sizes)) grads.push_back(part);
                    return grads;
                  });
  return y;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation activation) {
  const profile::Timer timer("linear");
  check_linear(x, weight, bias);
  return stacked_linear(x, {weight}, {bias}, activation);
}

Tensor linear(const Tensor& x, const std::vector<Tensor>& weights,
              const std::vector<Tensor>& biases) {
  if (weights.empty()) throw std::invalid_argument("linear: no weights given");
  if (!biases.empty() && biases.size() != weights.size())
    throw std::invalid_argument(
        fmt::format("linear: {} biases for {} weights (give one per weight, or none)",
                    biases.size(), weights.size()));
  for (size_t i = 0; i < weights.size(); ++i)
    check_linear(x, weights[i], biases.empty() ? Tensor() : biases[i]);
  for (const auto& b : biases)
    if (!b.defined())
      throw std::invalid_argument("linear: an undefined bias among the stacked ones");
  return stacked_linear(x, weights, biases, Activation::None);
}

}  // namespace ag
