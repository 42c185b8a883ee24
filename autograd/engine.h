#pragma once
// The reverse-mode engine. Every differentiable op builds its output and attaches a Node:
// the edges to its inputs' Nodes (or leaves) and one backward closure that maps the
// output's gradient to each input's gradient. backward() is a topological sort of the
// Nodes reachable from the root, walked in reverse with gradients summed per Node.
//
// Closures capture only what backward needs, as detached tensors (no grad_fn), so a graph
// never holds a reference cycle; after backward the closures are freed unless
// retain_graph is set.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace ag {

// Returns one gradient per input, in the order the inputs were given to attach_backward;
// an undefined Tensor for an input that needs none.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

struct Edge {
  std::shared_ptr<Node> fn;          // the input's producer, or
  std::shared_ptr<TensorImpl> leaf;  // the leaf that accumulates the gradient
  bool defined() const { return fn || leaf; }
};

struct Node {
  const char* name = "";            // "MulBackward", shown in errors and printing
  std::vector<Edge> next;           // one per input; undefined where no grad flows
  std::vector<Shape> input_shapes;  // what each returned gradient must look like
  std::vector<DType> input_dtypes;
  BackwardFn backward;
  bool released = false;
  std::string where;  // the module path it ran in, kept only while anomaly detection is on

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  // Tears the graph down with an explicit stack: a chain of 10,000 ops would otherwise
  // recurse through 10,000 destructors.
  ~Node();
};

// Grad mode is per thread; NoGradGuard switches recording off in its scope.
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};
// Switches recording back on in its scope: what a node that recomputes its forward during
// backward (ag::checkpoint) needs, since backward itself runs without recording.
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

// Records `out` as produced by `name` from `inputs`. Call it only when
// needs_recording(inputs) is true, so no closure is built for inference.
void attach_backward(Tensor& out, const char* name, const std::vector<Tensor>& inputs,
                     BackwardFn fn);

// grad_enabled() && any input requires grad.
bool needs_recording(const std::vector<Tensor>& inputs);

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

// The gradients of root (seeded with `gradient`) with respect to `leaves`, one per leaf
// (undefined where none reaches it), as torch.autograd.grad gives them: nothing is added
// into any leaf's .grad and no LeafGradReadyHook is told. The graph is released. Every
// leaf the graph reaches that requires grad must be among `leaves` (a logic_error names
// the node otherwise): a recomputing node returns them as its own inputs' gradients.
std::vector<Tensor> gradients(const Tensor& root, const Tensor& gradient,
                              const std::vector<Tensor>& leaves);

// While one is alive on this thread, backward calls it for each leaf as soon as the leaf's
// gradient is final (every node with an edge to it has run), with the leaf's TensorImpl:
// what data-parallel training needs to send a bucket of gradients while the rest of
// backward runs. Hooks do not nest.
class LeafGradReadyHook {
 public:
  using Fn = std::function<void(const TensorImpl* leaf)>;
  explicit LeafGradReadyHook(Fn fn);
  ~LeafGradReadyHook();
  LeafGradReadyHook(const LeafGradReadyHook&) = delete;
  LeafGradReadyHook& operator=(const LeafGradReadyHook&) = delete;
};

}  // namespace ag
