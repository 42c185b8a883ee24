#include "autograd/ops/linear_gradient.h"

#include <optional>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops/column_sums.h"
#include "autograd/profile.h"
#include "autograd/vec_math.h"

namespace ag::detail {

namespace {

// The column sums when asked for; db from them once every row is in
struct BiasSums {
  std::optional<ColumnSums> sums;
  BiasSums(bool with_bias, int64_t M, int64_t N) {
    if (with_bias) sums.emplace(M, N);
  }
  void add_row(int64_t r, const float* row) {
    if (sums) sums->add_row(r, row);
  }
  Tensor total(int64_t N) const {
    if (!sums) return Tensor();
    Tensor db = empty({N}, DType::Float32);
    sums->total(db.data<float>());
    return db;
  }
};

// g [M, N] float32 rounded to bfloat16, with its column sums
LinearGradient rounded_with_sums(const Tensor& g) {
  const profile::Timer timer("round to bfloat16 with the bias sum");
  const int64_t M = g.shape()[0], N = g.shape()[1];
  Tensor g16 = empty(g.shape(), DType::BFloat16);
  BiasSums bias(true, M, N);
  const float* gp = g.const_data<float>();
  bfloat16* hp = g16.data<bfloat16>();
  ColumnSums::for_chunks(M, N, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      to_bfloat16(gp + r * N, hp + r * N, N);
      bias.add_row(r, gp + r * N);
    }
  });
  return {g, g16, bias.total(N)};
}

}  // namespace

LinearGradient linear_output_gradient(const Tensor& g, bool bf16, bool with_bias) {
  if (!bf16) return {g, Tensor(), Tensor()};
  Tensor copy = attached_bf16_copy(g);
  if (copy.defined()) return {g, copy, Tensor()};
  if (with_bias && g.dtype() == DType::Float32 && g.is_contiguous()) return rounded_with_sums(g);
  return {g, bf16_operand(g), Tensor()};
}

LinearGradient gelu_output_gradient(const Tensor& g, const Tensor& saved, bool with_bias) {
  const int64_t M = g.shape()[0], N = g.shape()[1];
  if (g.dtype() == DType::Float64) {  // gradient checks: no fusion, ag::sum takes db
    Tensor d = empty(g.shape(), g.dtype());
    const double *gp = g.const_data<double>(), *sp = saved.const_data<double>();
    double* dp = d.data<double>();
    parallel_for(g.numel(), kElementwiseGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) dp[i] = gp[i] * sp[i];
    });
    return {d, Tensor(), Tensor()};
  }
  const bool bf16 = saved.dtype() == DType::BFloat16;
  Tensor d = bf16 ? Tensor() : empty(g.shape(), DType::Float32);
  Tensor d16 = bf16 ? empty(g.shape(), DType::BFloat16) : Tensor();
  BiasSums bias(with_bias, M, N);
  const float* gp = g.const_data<float>();
  float* dp = bf16 ? nullptr : d.data<float>();
  bfloat16* d16p = bf16 ? d16.data<bfloat16>() : nullptr;
  ColumnSums::for_chunks(M, N, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(bf16 ? N : 0);  // a row of dh, rounded into dh16 at once
    for (int64_t r = r0; r < r1; ++r) {
      const float* gr = gp + r * N;
      float* dr = bf16 ? row.data() : dp + r * N;
      if (bf16) {
        const bfloat16* hr = saved.const_data<bfloat16>() + r * N;
        AG_SIMD
        for (int64_t j = 0; j < N; ++j) dr[j] = gr[j] * gelu_derivative(float(hr[j]));
        to_bfloat16(dr, d16p + r * N, N);
      } else {
        const float* sr = saved.const_data<float>() + r * N;
        AG_SIMD
        for (int64_t j = 0; j < N; ++j) dr[j] = gr[j] * sr[j];
      }
      bias.add_row(r, dr);
    }
  });
  return {d, d16, bias.total(N)};
}

}  // namespace ag::detail
