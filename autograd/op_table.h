#pragma once
// The words the op table's rows are written in (op_table.cpp); op_cases.h is the table's
// public face. A row:
//
//   {"elementwise", "div", "x[0] / x[1]", one([](In x) { return x[0] / x[1]; }),
//    binary_sweep(normal(), away_from_zero(0.5))}
//
// family, the op and its arguments, the PyTorch expression, the attograd function, and
// the sweep of inputs; optionally which checks run it and its own tolerances.
#include <string>
#include <vector>

#include "autograd/op_cases.h"
#include "autograd/ops.h"

namespace ag::op_table {

using In = const std::vector<Tensor>&;
using Outs = std::vector<Tensor>;
using Inputs = std::vector<CaseInput>;
using Sweep = std::vector<Inputs>;

struct Row {
  std::string family, op, torch;
  CaseFn fn;
  Sweep sweep;
  Checks checks = Checks::both;
  Tolerance tolerance = {};
};

// An op with one output, as a CaseFn.
template <typename F>
CaseFn one(F f) {
  return [f](In x) { return Outs{f(x)}; };
}

// ---- values
Fill normal(double scale = 1, double shift = 0);
Fill uniform(double low, double high);
Fill positive();                        // [0.3, 3]: log, sqrt, pow bases
Fill away_from_zero(double low = 0.2);  // |x| in [low, 2], either sign: relu's kink, poles
Fill distinct();                        // at least 0.2 apart: no ties in max
Fill near_100();                        // 100 + N(0, 2) on a 1/64 grid: exact in float32
Fill constant(std::vector<double> values);
Fill random_mask(double p);                           // each position masked with probability p
Fill causal();                                        // key j > query i over the last two dims
Fill open_mask(int64_t dim);                          // random, but every slice along dim keeps one
Fill targets(int64_t classes, int64_t ignore_index);  // a quarter ignored, never all
Fill ids(int64_t vocab);                              // the last id repeats the first

// ---- inputs
CaseInput f(Shape shape, Fill fill = normal(), Layout layout = Layout::contiguous);
CaseInput ft(Shape shape, Fill fill = normal());  // transposed
CaseInput fs(Shape shape, Fill fill = normal());  // sliced
CaseInput ints(Shape shape, Fill fill);
CaseInput mask(Shape shape, Fill fill);
CaseInput none();

// The same inputs with every float input contiguous, then transposed, then sliced
// (a layout that would change none of them is left out).
Sweep in_layouts(const Inputs& inputs);
Sweep operator+(Sweep a, const Sweep& b);

// ---- writing arguments into labels ("0 2") and into Python ("(0, 2)", "True")
std::string words(const std::vector<int64_t>& v);
std::string py_tuple(const std::vector<int64_t>& v);
std::string py_bool(bool b);
std::string py_num(double v);  // shortest round trip; "inf", "-inf"

// ---- the rows, by family (op_table.cpp)
std::vector<Row> elementwise_rows();
std::vector<Row> reduce_rows();
std::vector<Row> matmul_rows();
std::vector<Row> view_rows();
std::vector<Row> join_rows();
std::vector<Row> softmax_rows();
std::vector<Row> layer_rows();
std::vector<Row> attention_rows();

}  // namespace ag::op_table
