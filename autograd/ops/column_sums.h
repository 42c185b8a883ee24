#pragma once
// Internal: the column sums of a [R, N] float32 matrix as every bias gradient takes them
// (ag::sum over the leading dims): the rows cut into chunks of kRowsAChunk, each chunk
// summed in double row by row, the chunks' sums added in chunk order, so the bits depend
// on R and N alone, never on the threads. ag::sum runs it over a tensor; the producers of
// a linear's output gradient (GELU's backward, the rounding of that gradient to bfloat16)
// add each row as they write it, while it is in cache, and give the bias gradient with
// ag::sum's bits without a pass of their own.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/parallel.h"

namespace ag::detail {

class ColumnSums {
 public:
  static constexpr int64_t kRowsAChunk = 64;

  ColumnSums(int64_t rows, int64_t cols)
      : cols_(cols), partial_(std::max<int64_t>(chunks(rows), 1) * cols, 0.0) {}

  static int64_t chunks(int64_t rows) { return (rows + kRowsAChunk - 1) / kRowsAChunk; }

  // fn(r0, r1) over the chunks of [0, rows), on a team of threads when one pays; fn adds
  // the rows it covers with add_row
  template <typename F>
  static void for_chunks(int64_t rows, int64_t cols, F&& fn) {
    parallel_for_items(rows, kRowsAChunk, static_cast<double>(cols), fn);
  }

  // row r's values added to its chunk's sums (rows in order within a chunk)
  void add_row(int64_t r, const float* row) {
    double* acc = partial_.data() + (r / kRowsAChunk) * cols_;
    AG_SIMD
    for (int64_t j = 0; j < cols_; ++j) acc[j] += row[j];
  }

  // out[j] = the chunks' sums of column j added in chunk order, rounded to float32
  void total(float* out) const {
    const int64_t n = static_cast<int64_t>(partial_.size()) / std::max<int64_t>(cols_, 1);
    for (int64_t j = 0; j < cols_; ++j) {
      double sum = 0;
      for (int64_t c = 0; c < n; ++c) sum += partial_[c * cols_ + j];
      out[j] = static_cast<float>(sum);
    }
  }

 private:
  int64_t cols_;
  std::vector<double> partial_;
};

}  // namespace ag::detail
