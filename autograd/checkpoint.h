#pragma once
// Activation checkpointing (torch.utils.checkpoint's trade): a function's forward is run
// and its graph dropped at once, so none of the tensors its ops save for backward stay
// alive; only its input is kept. Its backward runs the function again on that input, with
// recording on, and backpropagates the incoming gradient through the recomputed graph.
// Activation memory of the function for a second forward.
//
//   ag::Tensor h = ag::checkpoint([&](const ag::Tensor& x) { return block->forward(x); }, h,
//                                 block->trainable_parameters(), {&dropout_generator});
//
// Exact: the recomputation runs the same ops on the same values, with every generator in
// `generators` set back to its state before the first run (dropout draws the same masks;
// the generators are left as the first run left them), so the output and every gradient
// are those of calling f directly, bit for bit (tests/test_activation_checkpointing.cpp).
// Requirements: f is deterministic given its input, those generators and the autocast scope, which
// must still be open when backward runs (StepEngine's is); every tensor f reads that requires grad
// is x or among `params` (backward names the op otherwise).
#include <functional>
#include <vector>

#include "autograd/generator.h"
#include "autograd/tensor.h"

namespace ag {

using CheckpointedFn = std::function<Tensor(const Tensor&)>;

// f(x), recorded as one node whose inputs are x and params. Without recording (no grad
// mode, or nothing requiring grad among x and params) it is f(x) as it is.
Tensor checkpoint(const CheckpointedFn& f, const Tensor& x, const std::vector<Tensor>& params,
                  const std::vector<Generator*>& generators = {});

}  // namespace ag
