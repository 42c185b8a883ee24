// linear_cross_entropy: cross_entropy(linear(x, W), targets) without the logits. The rows
// of x are taken a chunk at a time: the chunk's logits (the GEMM linear runs, over W's
// tiles as linear reads a packed W), each row's log-sum-exp and loss term, and, when the op
// is recorded, the logits turned in place into their gradient, which the chunk's rows of dx
// (= dlogits W) and its share of dW (= dlogits^T x, a trainable W's) are computed from at
// once. So the [rows, V] logits and their gradient exist a chunk at a time, and backward
// only scales what forward computed by the loss's gradient: no W is unpacked again, no
// logits recomputed. Each row goes through the same row kernels as cross_entropy
// (ops/cross_entropy_rows.h) and the loss terms are summed in cross_entropy's blocks, so
// with one chunk (chunk_rows >= the rows) every result is the unfused ops' to the bit.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/ops/cross_entropy_rows.h"
#include "autograd/ops/gemm.h"
#include "autograd/parallel.h"
#include "autograd/profile.h"
#include "autograd/quant/packed_weight.h"

namespace ag {

namespace {

// The weight as the GEMMs read it, a tile of its rows at a time. As linear reads it: a
// packed matrix of more than quant::unpack_tile_weights() weights unpacked a tile at a time,
// each time it is read; a smaller one unpacked once, whole; a float one as it is, or as
// autocast's bfloat16 copy.
class HeadWeight {
 public:
  HeadWeight(const Tensor& w, bool bf16, DType x_type)
      : type_(bf16 ? DType::BFloat16 : x_type), V_(w.shape()[0]), K_(w.shape()[1]) {
    rows_ = V_;
    if (!w.packing())
      whole_ = bf16 ? detail::autocast_stacked({w}) : w.detach();
    else if (static_cast<double>(V_) * K_ <= static_cast<double>(quant::unpack_tile_weights()))
      whole_ = quant::unpacked(w, type_);
    else
      packed_ = w.detach(), rows_ = std::max<int64_t>(1, quant::unpack_tile_weights() / K_);
  }
  int64_t tile_rows() const { return rows_; }
  int64_t V() const { return V_; }
  // W's rows [r0, r0 + n), n <= tile_rows()
  Tensor tile(int64_t r0, int64_t n) const {
    if (whole_.defined()) return whole_.narrow(0, r0, n);
    const profile::Timer timer("unpack frozen weight");
    Tensor t = empty({n, K_}, type_);
    quant::unpack_rows(packed_, r0, r0 + n, type_, t.raw_data());
    return t;
  }

 private:
  Tensor whole_, packed_;
  DType type_;
  int64_t V_, K_, rows_;
};

// logits [n, V] = xc W^T, each tile of W's rows giving its columns
Tensor chunk_logits(const Tensor& xc, const HeadWeight& w) {
  if (w.tile_rows() >= w.V()) return detail::matmul_forward(xc, w.tile(0, w.V()).t());
  const DType out_type = xc.dtype() == DType::BFloat16 ? DType::Float32 : xc.dtype();
  Tensor out = empty({xc.shape()[0], w.V()}, out_type);
  for (int64_t r0 = 0; r0 < w.V(); r0 += w.tile_rows()) {
    const int64_t n = std::min(w.tile_rows(), w.V() - r0);
    copy_(out.narrow(1, r0, n), detail::matmul_forward(xc, w.tile(r0, n).t()));
  }
  return out;
}

// dlogits W, a tile at a time summed in tile order (as linear's backward over tiles)
Tensor chunk_input_grad(const Tensor& d, const HeadWeight& w) {
  if (w.tile_rows() >= w.V()) return detail::matmul_forward(d, w.tile(0, w.V()));
  Tensor dx;
  for (int64_t r0 = 0; r0 < w.V(); r0 += w.tile_rows()) {
    const int64_t n = std::min(w.tile_rows(), w.V() - r0);
    Tensor part = detail::matmul_forward(d.narrow(1, r0, n), w.tile(r0, n));
    if (dx.defined())
      add_(dx, part);
    else
      dx = part;
  }
  return dx;
}

// Each row of a chunk's logits x [rows, V]: its loss term into terms, and with grad the row
// turned into its gradient, (softmax - onehot(target)) * scale, zero where ignored.
template <typename T>
void rows_to_gradient(T* x, const int64_t* t, int64_t rows, int64_t V, int64_t ignore_index,
                      bool grad, T scale, double* terms) {
  detail::parallel_for_items(rows, detail::kCrossEntropyRowGrain, V, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const bool counted = t[r] != ignore_index;
      T* row = x + r * V;
      const auto ce = detail::cross_entropy_row(row, V, t[r], counted);
      terms[r] = ce.term;
      if (!grad) continue;
      if (counted)
        detail::cross_entropy_row_gradient(row, row, V, t[r], ce.lse, scale);
      else
        std::fill(row, row + V, T(0));
    }
  });
}

// The checks of cross_entropy(linear(x, weight), targets): the shapes, the dtypes, every
// counted target a class. Returns the counted targets.
int64_t checked_count(const Tensor& x, const Tensor& weight, const Tensor& targets,
                      int64_t ignore_index) {
  if (x.dim() < 1 || weight.dim() != 2 || x.shape().back() != weight.shape()[1])
    throw std::invalid_argument(fmt::format(
        "linear_cross_entropy: input {} and weight {} do not fit (the weight is [classes, in], "
        "the input [..., in])",
        shape_str(x.shape()), shape_str(weight.shape())));
  if (x.dtype() != weight.dtype() && !weight.packing())
    throw std::invalid_argument(
        fmt::format("linear_cross_entropy: dtypes differ (input {}, "
                    "weight {})",
                    dtype_name(x.dtype()), dtype_name(weight.dtype())));
  const Shape rows(x.shape().begin(), x.shape().end() - 1);
  if (targets.dtype() != DType::Int64 || targets.shape() != rows)
    throw std::invalid_argument(fmt::format(
        "linear_cross_entropy: an input of shape {} needs int64 targets of shape {}, got {} {}",
        shape_str(x.shape()), shape_str(rows), dtype_name(targets.dtype()),
        shape_str(targets.shape())));
  const Tensor t = targets.contiguous();
  const int64_t* tp = t.const_data<int64_t>();
  int64_t count = 0;
  for (int64_t r = 0; r < t.numel(); ++r) {
    if (tp[r] == ignore_index) continue;
    if (tp[r] < 0 || tp[r] >= weight.shape()[0])
      throw std::out_of_range(fmt::format(
          "linear_cross_entropy: target {} at position {} is out of range for {} classes", tp[r], r,
          weight.shape()[0]));
    ++count;
  }
  return count;
}

// What the chunks leave: the sum of the loss terms, and with gradients dx [M, K] and dW
// [V, K] (each only where asked for) for a loss gradient of 1.
struct Pass {
  double total = 0;
  Tensor dx, dw;
};

// The loss terms summed in cross_entropy's blocks of rows (parallel_sum's order)
double blocked_sum(const std::vector<double>& terms, const int64_t* t, int64_t ignore_index) {
  double total = 0;
  const auto M = static_cast<int64_t>(terms.size());
  for (int64_t b0 = 0; b0 < M; b0 += detail::kCrossEntropyRowGrain) {
    double part = 0;
    for (int64_t r = b0; r < std::min(M, b0 + detail::kCrossEntropyRowGrain); ++r)
      if (t[r] != ignore_index) part += terms[static_cast<size_t>(r)];
    total += part;
  }
  return total;
}

struct ChunkPlan {
  int64_t rows, ignore_index, count;
  bool gx, gw;
};

Pass run_chunks(const Tensor& x2, const HeadWeight& w, const Tensor& t, const ChunkPlan& plan) {
  const int64_t M = x2.shape()[0], V = w.V();
  const bool grad = (plan.gx || plan.gw) && plan.count > 0;
  const int64_t* tp = t.const_data<int64_t>();
  std::vector<double> terms(static_cast<size_t>(M));
  Pass out;
  for (int64_t r0 = 0; r0 < M; r0 += plan.rows) {
    const int64_t n = std::min(plan.rows, M - r0);
    const Tensor xc = x2.narrow(0, r0, n);
    Tensor logits = chunk_logits(xc, w);
    AG_DISPATCH_FLOAT(logits.dtype(), "linear_cross_entropy", [&] {
      rows_to_gradient(logits.data<scalar_t>(), tp + r0, n, V, plan.ignore_index, grad,
                       static_cast<scalar_t>(1.0 / static_cast<double>(plan.count)),
                       terms.data() + r0);
    });
    if (!grad) continue;
    const Tensor d = x2.dtype() == DType::BFloat16 ? to_bfloat16(logits) : logits;
    logits = Tensor();  // the float32 gradient, once rounded, is not needed
    if (plan.gx) {
      if (!out.dx.defined())
        out.dx =
            empty({M, x2.shape()[1]}, d.dtype() == DType::BFloat16 ? DType::Float32 : d.dtype());
      copy_(out.dx.narrow(0, r0, n), chunk_input_grad(d, w));
    }
    if (plan.gw) {
      Tensor part = detail::matmul_forward(d.t(), xc);
      if (out.dw.defined())
        add_(out.dw, part);
      else
        out.dw = part;
    }
  }
  out.total = blocked_sum(terms, tp, plan.ignore_index);
  return out;
}

// g * t, t itself when g is 1 (the bits of the unfused ops' backward for a loss gradient of
// 1; another g is applied after the 1 / count, a rounding apart from theirs)
Tensor scaled(const Tensor& t, const Tensor& g) {
  if (!t.defined()) return t;
  const double s = g.item();
  return s == 1.0 ? t : mul(t, s);
}

}  // namespace

int64_t linear_cross_entropy_rows(int64_t classes) {
  return std::max<int64_t>(1, kLinearCrossEntropyChunkBytes / (4 * std::max<int64_t>(1, classes)));
}

Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets,
                            int64_t ignore_index, int64_t chunk_rows) {
  const profile::Timer timer("linear_cross_entropy");
  const int64_t count = checked_count(x, weight, targets, ignore_index);
  const int64_t V = weight.shape()[0], K = weight.shape()[1], M = targets.numel();
  // autocast as linear decides it, on the whole GEMM's shape
  const bool bf16 = detail::autocast_to_bf16(x.dtype()) && detail::bf16_pays(false, true, M, V, K);
  const HeadWeight w(weight, bf16, x.dtype());
  Tensor x2 = x.detach().contiguous().view({M, K});
  if (bf16) x2 = detail::bf16_operand(x2);
  const bool record = needs_recording({x, weight});
  const ChunkPlan plan{chunk_rows > 0 ? chunk_rows : linear_cross_entropy_rows(V), ignore_index,
                       count, record && x.requires_grad(), record && weight.requires_grad()};
  const Pass pass = run_chunks(x2, w, targets.contiguous(), plan);
  const DType loss_type = x.dtype();
  Tensor loss = empty({}, loss_type);
  AG_DISPATCH_FLOAT(loss_type, "linear_cross_entropy", [&] {
    *loss.data<scalar_t>() =
        static_cast<scalar_t>(count ? pass.total / static_cast<double>(count) : 0.0);
  });
  if (!record) return loss;
  attach_backward(
      loss, "LinearCrossEntropyBackward", {x, weight},
      [pass, plan, x_shape = x.shape(), w_shape = weight.shape(),
       type = x.dtype()](const Tensor& g) -> std::vector<Tensor> {
        if (plan.count == 0)  // no counted target: the loss is a constant 0
          return {plan.gx ? zeros(x_shape, type) : Tensor(),
                  plan.gw ? zeros(w_shape, type) : Tensor()};
        return {plan.gx ? scaled(pass.dx, g).view(x_shape) : Tensor(), scaled(pass.dw, g)};
      });
  return loss;
}

}  // namespace ag
