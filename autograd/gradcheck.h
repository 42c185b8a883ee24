#pragma once
// Finite-difference gradient checking in float64. For every input that requires grad and
// every element of it, the central difference (f(x+eps) - f(x-eps)) / 2eps is compared
// with the engine's gradient: element by element of the full Jacobian when the output is
// small, otherwise of a fixed random projection of the output (sum(out * r), r seeded).
// An element passes when |analytic - numeric| <= atol + rtol * |numeric|.
//
// Choose sample points away from kinks (relu at 0, ties in max): a finite difference
// across a kink measures neither side's derivative.
#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace ag {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  int64_t max_full_jacobian_outputs = 64;  // above this, check a random projection
  uint64_t projection_seed = 0x5eed;
};

struct GradcheckResult {
  bool ok = false;
  std::string message;  // the worst element: input, index, analytic, numeric, error
  int64_t input = -1;   // which input held the worst element
  std::vector<int64_t> index;
  int64_t output = -1;  // output element (full Jacobian), or -1 for the projection
  double analytic = 0, numeric = 0, error = 0;
  int64_t checked = 0;  // Jacobian entries compared
};

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Inputs that require grad must be float64 and are checked; the others, and undefined
// tensors (an absent optional argument), are passed to fn as they are. Never throws for a
// wrong or failing backward: the failure is reported in the result. Every op's cases, with
// the tolerances they are checked at, are in op_cases.h.
GradcheckResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});
GradcheckResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps,
                          double atol, double rtol);

}  // namespace ag
