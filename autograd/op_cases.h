#pragma once
// The op table: every differentiable op's test cases, written once, read by three checks.
// It is in the autograd_testing library (attograd::testing), not in attograd::core.
//
//   for (const ag::OpCase& c : ag::op_cases())
//     if (c.gradcheck()) {
//       ag::GradcheckResult r = ag::gradcheck_case(c);  // float64, c.tolerance's eps/atol/rtol
//       fmt::print("{} {}\n", c.name, r.ok ? "ok" : "FAIL");
//     }
//
// The readers:
//   train/gradcheck_table.cpp          `attograd gradcheck`: every gradcheck case, as a table
//   tests/test_gradcheck_ops.cpp       Catch2: one TEST_CASE per family, a section per case
//   tests/reference/op_driver.cpp      runs every torch case (forward, then backward of
//     + compare_with_torch.py          sum(outputs * upstream)) in float64 and float32; the
//                                      script evaluates each case's `torch` expression on
//                                      the same inputs and compares, with no code per op
//
// A row of the table (op_cases.cpp) is one op with its arguments, its PyTorch twin and a
// sweep of inputs: shapes (broadcasting, 0-d, size-1 dims, odd sizes past the SIMD width),
// layouts (transposed and sliced views), values (kept away from kinks and poles), integer
// targets and ids, and boolean masks. Each entry of the sweep becomes one OpCase, named by
// the row and its inputs. A new op is one row.
#include <functional>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/gradcheck.h"
#include "autograd/tensor.h"

namespace ag {

// The view an op sees of a float input. transposed: the transpose of a contiguous buffer
// with the last two dims swapped (rank >= 2); sliced: a narrow view into a buffer padded
// by one on each side of every dim (an offset, and strides wider than the sizes).
enum class Layout { contiguous, transposed, sliced };

enum class InputKind { floating, int64, boolean, none };

// Row-major values for a tensor of `shape`, drawn from the case's own generator.
using Fill = std::function<std::vector<double>(const Shape&, Generator&)>;

struct CaseInput {
  InputKind kind = InputKind::floating;
  Shape shape;
  Fill fill;
  Layout layout = Layout::contiguous;
};

// Every tolerance the table's readers use, stated once. Rows keep these unless their op
// needs otherwise (and then say why beside the row).
struct Tolerance {
  // gradcheck, float64 central differences (f(x + eps) - f(x - eps)) / 2 eps: truncation
  // error ~eps^2 |f'''| ~ 1e-12 and rounding error ~1e-16 |f| / eps ~ 1e-10, so atol 1e-8
  // and rtol 1e-6 leave two orders of margin, while a backward that is 1% wrong misses
  // them by four orders.
  double eps = 1e-6;
  double atol = 1e-8;
  double rtol = 1e-6;
  // attograd float64 vs PyTorch float64: the same formulas in double, so only rounding
  // differs: |got - want| <= torch_atol + torch_rtol |want|.
  double torch_atol = 1e-10;
  double torch_rtol = 1e-9;
  // attograd float32 vs attograd float64: rounding the inputs alone moves each element by
  // ~6e-8 relative, and cancellation (sub, sums, layer_norm's centring) turns that into
  // error on the scale of the whole tensor, hence a term scaled by the tensor's largest
  // finite |value| (at least 1): |got - want| <= f32_rtol |want| + f32_atol scale.
  double f32_atol = 1e-5;
  double f32_rtol = 1e-5;

  GradcheckOptions gradcheck_options() const;
};

// Which readers run a case. Every row that is not `both` says why beside it.
enum class Checks { both, gradcheck_only, torch_only };

using CaseFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct OpCase {
  std::string family;  // Catch2 checks each family in its own TEST_CASE
  std::string row;     // the op and its arguments: "softmax dim -1"
  std::string name;    // row and inputs, unique in the table: "softmax dim -1 2x3x4.T"
  std::vector<CaseInput> inputs;
  CaseFn fn;          // the op on the inputs as case_inputs() makes them
  std::string torch;  // the same in Python over x[0], x[1], ... (torch, F, math, inf)
  Checks checks = Checks::both;
  Tolerance tolerance;

  bool gradcheck() const { return checks != Checks::torch_only; }
  bool torch_check() const { return checks != Checks::gradcheck_only; }
};

// The table, built on first use. Throws std::logic_error if two cases share a name.
const std::vector<OpCase>& op_cases();

// The families, in table order.
std::vector<std::string> op_case_families();

// The case's inputs: values from a generator seeded by the case's name (so a case does
// not change when rows are added), float inputs in `float_dtype` and their layout and
// requiring grad, int64 ids and targets, bool masks, undefined tensors for `none`.
std::vector<Tensor> case_inputs(const OpCase& c, DType float_dtype);
// The same values, row-major, as the PyTorch side receives them (empty for `none`).
std::vector<std::vector<double>> case_input_values(const OpCase& c);

// A float64 gradcheck of the case with its own tolerances (or `options` when given); a
// case with several outputs is checked on their flattened concatenation.
GradcheckResult gradcheck_case(const OpCase& c, const GradcheckOptions* options = nullptr);

// The generator a case draws from (its name, hashed), and for its upstream gradients.
uint64_t case_seed(const std::string& name);

}  // namespace ag
