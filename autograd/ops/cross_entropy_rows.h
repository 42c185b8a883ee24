#pragma once
// Internal: one row of the cross-entropy, forward and gradient, shared by cross_entropy
// (ops/softmax.cpp) and linear_cross_entropy (ops/linear_cross_entropy.cpp) so that both
// compute each row with the same instructions in the same order: the fused op's rows are
// bit for bit the unfused op's when its logits are.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "autograd/dtype.h"
#include "autograd/vec_math.h"

namespace ag::detail {

// Rows a parallel chunk of the cross-entropy, and the rows whose loss terms are summed
// together before the chunks' sums are added (parallel_sum's grain): the fused op sums
// its rows' terms in the same blocks.
inline constexpr int64_t kCrossEntropyRowGrain = 64;

// A row's log-sum-exp (as the op keeps it for backward) and its loss term,
// log-sum-exp - row[target] (added in double), 0 for an ignored target.
template <typename T>
struct CrossEntropyRow {
  T lse;
  double term;
};

template <typename T>
CrossEntropyRow<T> cross_entropy_row(const T* row, int64_t C, int64_t target, bool counted) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < C; ++i) m = std::max(m, row[i]);
  double s = 0;  // lane-wise partial sums: a fixed order, vectorised
  AG_SIMD_SUM(s)
  for (int64_t i = 0; i < C; ++i) s += exp_fast(row[i] - m);
  const double log_s = std::log(s);
  return {static_cast<T>(m + log_s), counted ? static_cast<double>(m - row[target]) + log_s : 0.0};
}

// dx = (softmax(x) - onehot(target)) * scale over one counted row; dx may be x itself.
template <typename T>
void cross_entropy_row_gradient(T* dx, const T* x, int64_t C, int64_t target, T lse, T scale) {
  AG_SIMD
  for (int64_t i = 0; i < C; ++i) dx[i] = exp_fast(x[i] - lse) * scale;
  dx[target] -= scale;
}

}  // namespace ag::detail
