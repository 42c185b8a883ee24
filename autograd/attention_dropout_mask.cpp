// The fused attention's dropout mask replayed for tests (test_hooks.h), from the row
// streams the op itself draws (ops/attention_rows.h); in the autograd_testing library,
// since no training or inference path needs the mask as a tensor.
#include "autograd/ops/attention_rows.h"
#include "autograd/test_hooks.h"

namespace ag {

Tensor attention_dropout_mask(int64_t rows, int64_t T, int64_t S, bool causal, double p,
                              uint64_t draw, DType dtype) {
  Tensor mask = zeros({rows, T, S}, dtype);
  const detail::attention::Spec s{rows, T, S, 0, 0, causal, p, draw, 0.0};
  AG_DISPATCH_FLOAT(dtype, "attention_dropout_mask", [&] {
    scalar_t* m = mask.data<scalar_t>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < T; ++i) detail::attention::row_mask(s, r, i, m + (r * T + i) * S);
  });
  return mask;
}

}  // namespace ag
