#include "autograd/checkpoint.h"

#include "autograd/engine.h"

namespace ag {

namespace {

std::vector<Generator> states_of(const std::vector<Generator*>& generators) {
  std::vector<Generator> states;
  for (const Generator* g : generators) states.push_back(*g);
  return states;
}

void set_states(const std::vector<Generator*>& generators, const std::vector<Generator>& states) {
  for (size_t i = 0; i < generators.size(); ++i) *generators[i] = states[i];
}

// x as a leaf of a graph of its own: the same storage, requiring grad as x does
Tensor fresh_leaf(const Tensor& x, bool requires_grad) {
  Tensor leaf = x.detach();
  if (requires_grad) leaf.requires_grad_();
  return leaf;
}

}  // namespace

Tensor checkpoint(const CheckpointedFn& f, const Tensor& x, const std::vector<Tensor>& params,
                  const std::vector<Generator*>& generators) {
  std::vector<Tensor> inputs{x};
  inputs.insert(inputs.end(), params.begin(), params.end());
  if (!needs_recording(inputs)) return f(x);
  const std::vector<Generator> before = states_of(generators);
  // recorded as the direct call would be (some ops save or choose otherwise when nothing
  // records), then the graph is dropped with everything it saved
  Tensor out = f(fresh_leaf(x, x.requires_grad())).detach();
  const Tensor kept = x.detach();
  attach_backward(out, "CheckpointBackward", inputs,
                  [f, kept, params, generators, before,
                   x_grad = x.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                    const std::vector<Generator> after = states_of(generators);
                    set_states(generators, before);
                    std::vector<Tensor> leaves{fresh_leaf(kept, x_grad)};
                    leaves.insert(leaves.end(), params.begin(), params.end());
                    Tensor again;
                    {
                      const EnableGradGuard recording;
                      again = f(leaves[0]);
                    }
                    set_states(generators, after);
                    return gradients(again, g, leaves);
                  });
  return out;
}

}  // namespace ag
