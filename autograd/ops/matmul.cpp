// matmul: GEMM through CBLAS. Each operand's last two dims are handed to BLAS as they lie
// in memory: row-major as NoTrans, a transposed view as Trans with its leading dimension,
// so q @ k^T and the backward's g @ W^T copy nothing. Only layouts BLAS cannot describe
// (e.g. expanded or doubly strided) are copied first.
#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include "autograd/engine.h"
#include "autograd/ops.h"

namespace ag {

namespace {

// Multiply-adds below which the two GEMMs of a backward run side by side on one thread
// each rather than one after the other on all threads.
constexpr double kSmallGemmWork = 1 << 26;

struct BlasOperand {
  CBLAS_TRANSPOSE trans;
  int64_t ld;
};

// How BLAS can read a rows x cols matrix with strides (sr, sc), if it can.
bool blas_layout(int64_t rows, int64_t cols, int64_t sr, int64_t sc, BlasOperand& out) {
  if ((sc == 1 || cols == 1) && (rows == 1 || sr >= std::max<int64_t>(cols, 1))) {
    out = {CblasNoTrans, rows == 1 ? std::max<int64_t>(cols, 1) : sr};
    return true;
  }
  if ((sr == 1 || rows == 1) && (cols == 1 || sc >= std::max<int64_t>(rows, 1))) {
    out = {CblasTrans, cols == 1 ? std::max<int64_t>(rows, 1) : sc};
    return true;
  }
  return false;
}

BlasOperand prepare(Tensor& x) {
  const int64_t r = x.dim();
  BlasOperand op;
  if (!blas_layout(x.shape()[r - 2], x.shape()[r - 1], x.strides()[r - 2], x.strides()[r - 1],
                   op)) {
    x = x.detach().contiguous();
    blas_layout(x.shape()[r - 2], x.shape()[r - 1], x.strides()[r - 2], x.strides()[r - 1], op);
  }
  return op;
}

void gemm(const BlasOperand& oa, const BlasOperand& ob, int64_t M, int64_t N, int64_t K,
          const float* A, const float* B, float* C) {
  cblas_sgemm(CblasRowMajor, oa.trans, ob.trans, M, N, K, 1.0f, A, oa.ld, B, ob.ld, 0.0f, C, N);
}
void gemm(const BlasOperand& oa, const BlasOperand& ob, int64_t M, int64_t N, int64_t K,
          const double* A, const double* B, double* C) {
  cblas_dgemm(CblasRowMajor, oa.trans, ob.trans, M, N, K, 1.0, A, oa.ld, B, ob.ld, 0.0, C, N);
}

// a [..., M, K] @ b [..., K, N] -> [batch..., M, N], both rank >= 2; not recorded.
Tensor matmul_forward(Tensor a, Tensor b) {
  const int64_t M = a.shape()[a.dim() - 2], K = a.shape()[a.dim() - 1];
  const int64_t N = b.shape()[b.dim() - 1];
  Shape batch_a(a.shape().begin(), a.shape().end() - 2);
  Shape batch_b(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes(batch_a, batch_b, "matmul (batch dims)");
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = empty(out_shape, a.dtype());
  if (out.numel() == 0) return out;
  if (K == 0) {
    fill_(out, 0);
    return out;
  }
  BlasOperand oa = prepare(a), ob = prepare(b);
  Shape sa = broadcast_strides(batch_a, Shape(a.strides().begin(), a.strides().end() - 2), batch);
  Shape sb = broadcast_strides(batch_b, Shape(b.strides().begin(), b.strides().end() - 2), batch);
  const int64_t batches = shape_numel(batch);
  AG_DISPATCH_FLOAT(a.dtype(), "matmul", [&] {
    const scalar_t* pa = a.data<scalar_t>();
    const scalar_t* pb = b.data<scalar_t>();
    scalar_t* pc = out.data<scalar_t>();
    std::vector<int64_t> idx(batch.size(), 0);
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

}  // namespace

// C = A B: dA = dC B^T, dB = A^T dC, each summed back over broadcast batch dims.
Tensor matmul(const Tensor& a, const Tensor& b) {
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
  Tensor out = matmul_forward(a, b);
  if (needs_recording({a, b}))
    attach_backward(out, "MatmulBackward", {a, b},
                    [a = a.detach(), b = b.detach(), ga = a.requires_grad(),
                     gb = b.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                      Tensor da, db;
                      auto grad_a = [&] { da = matmul_forward(g, b.transpose(-1, -2)); };
                      auto grad_b = [&] { db = matmul_forward(a.transpose(-1, -2), g); };
                      // Two small GEMMs keep one core each busier than one GEMM keeps two
                      // (OpenBLAS splits M and N, never K, so each C element is summed in
                      // the same order either way: the bits do not depend on this choice).
                      const double work = static_cast<double>(g.numel()) * a.shape().back();
                      if (ga && gb && work < kSmallGemmWork && omp_get_max_threads() > 1 &&
                          !omp_in_parallel()) {
#pragma omp parallel sections num_threads(2)
                        {
#pragma omp section
                          grad_a();
#pragma omp section
                          grad_b();
                        }
                      } else {
                        if (ga) grad_a();
                        if (gb) grad_b();
                      }
                      if (ga) da = sum_to(da, a.shape());
                      if (gb) db = sum_to(db, b.shape());
                      return {da, db};
                    });
  return out;
}

}  // namespace ag
