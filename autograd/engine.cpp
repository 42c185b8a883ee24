#include "autograd/engine.h"

#include <fmt/format.h>

#include <stdexcept>
#include <unordered_map>

#include "autograd/anomaly.h"
#include "autograd/ops.h"
#include "autograd/profile.h"

namespace ag {

namespace {
thread_local bool g_grad_enabled = true;
thread_local LeafGradReadyHook::Fn* g_leaf_ready = nullptr;
// While gradients() runs: where each of its leaves' gradient is summed instead of .grad
thread_local std::unordered_map<const TensorImpl*, Tensor>* g_captured = nullptr;
}  // namespace

LeafGradReadyHook::LeafGradReadyHook(Fn fn) {
  if (g_leaf_ready) throw std::logic_error("LeafGradReadyHook: hooks do not nest");
  g_leaf_ready = new Fn(std::move(fn));
}
LeafGradReadyHook::~LeafGradReadyHook() {
  delete g_leaf_ready;
  g_leaf_ready = nullptr;
}

bool grad_enabled() {
  return g_grad_enabled;
}
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) {
  g_grad_enabled = false;
}
NoGradGuard::~NoGradGuard() {
  g_grad_enabled = prev_;
}

EnableGradGuard::EnableGradGuard() : prev_(g_grad_enabled) {
  g_grad_enabled = true;
}
EnableGradGuard::~EnableGradGuard() {
  g_grad_enabled = prev_;
}

Node::~Node() {
  std::vector<std::shared_ptr<Node>> pending;
  auto take_children = [&pending](Node& n) {
    for (auto& e : n.next)
      if (e.fn && e.fn.use_count() == 1) pending.push_back(std::move(e.fn));
    n.next.clear();
  };
  take_children(*this);
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
    take_children(*n);
  }  // n dies here with no children left to recurse into
}

bool needs_recording(const std::vector<Tensor>& inputs) {
  if (!g_grad_enabled) return false;
  for (const auto& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void attach_backward(Tensor& out, const char* name, const std::vector<Tensor>& inputs,
                     BackwardFn fn) {
  auto node = std::make_shared<Node>();
  node->name = name;
  node->backward = std::move(fn);
  for (const auto& t : inputs) {
    Edge e;
    if (t.defined() && t.requires_grad()) {
      if (t.grad_fn())
        e.fn = t.grad_fn();
      else
        e.leaf = t.impl_ptr();
    }
    node->next.push_back(std::move(e));
    node->input_shapes.push_back(t.defined() ? t.shape() : Shape{});
    node->input_dtypes.push_back(t.defined() ? t.dtype() : DType::Float32);
  }
  if (tracking_modules()) {
    node->where = current_module_path();
    inject_fault(false, node->where, out, inputs);
    if (detect_anomaly()) check_forward(name, out, inputs);
  }
  out.impl()->requires_grad = true;
  out.impl()->grad_fn = std::move(node);
}

namespace {

// A gradient nothing else refers to (its handle and its storage are held only here, it
// is a plain contiguous tensor) can be kept or added into without a copy.
bool exclusively_owned(const Tensor& g) {
  return g.impl_ptr().use_count() == 1 && g.impl()->storage.use_count() == 1 && g.is_contiguous() &&
         g.offset() == 0 && !g.impl()->grad_fn;
}

// Sums g into the gradient gradients() collects for leaf.
void capture_leaf(const TensorImpl& leaf, Tensor g, const char* node) {
  auto it = g_captured->find(&leaf);
  if (it == g_captured->end())
    throw std::logic_error(
        fmt::format("gradients(): {} reaches a tensor that requires grad and is not among the "
                    "leaves asked for",
                    node));
  if (!it->second.defined())
    it->second = exclusively_owned(g) ? std::move(g) : g.clone();
  else
    add_(it->second, g);
}

void accumulate_leaf(TensorImpl& leaf, Tensor g) {
  if (!leaf.grad) {
    // g may alias another gradient or a saved tensor: keep it only when it is ours alone
    leaf.grad = exclusively_owned(g) ? g.impl_ptr() : g.clone().impl_ptr();
    leaf.grad->requires_grad = false;
    return;
  }
  Tensor acc(leaf.grad);
  add_(acc, g);
}

void check_gradient(const Node& node, size_t i, const Tensor& g) {
  if (g.shape() != node.input_shapes[i])
    throw std::logic_error(
        fmt::format("{} returned a gradient of shape {} for input {} of shape {} (a missing "
                    "broadcast reduction?)",
                    node.name, shape_str(g.shape()), i, shape_str(node.input_shapes[i])));
  if (g.dtype() != node.input_dtypes[i])
    throw std::logic_error(fmt::format("{} returned a {} gradient for {} input {}", node.name,
                                       dtype_name(g.dtype()), dtype_name(node.input_dtypes[i]), i));
}

// Kahn's algorithm: count how many consumers each reachable node has, then release a
// node to run once all of its consumers have delivered their gradient.
std::vector<Node*> topological_order(Node* root) {
  std::unordered_map<Node*, int> pending_consumers;
  std::vector<Node*> stack{root};
  pending_consumers[root] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& e : n->next) {
      if (!e.fn) continue;
      auto [it, inserted] = pending_consumers.try_emplace(e.fn.get(), 0);
      ++it->second;
      if (inserted) stack.push_back(e.fn.get());
    }
  }
  std::vector<Node*> order;
  std::vector<Node*> ready{root};
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    order.push_back(n);
    for (auto& e : n->next)
      if (e.fn && --pending_consumers[e.fn.get()] == 0) ready.push_back(e.fn.get());
  }
  return order;
}

// The gradient backward starts from: the given one, checked against the root, or ones
// for a one-element root
Tensor seed_gradient(const Tensor& root, const Tensor& gradient) {
  if (!root.requires_grad())
    throw std::logic_error(
        "backward(): the tensor does not require grad and has no grad_fn (did you forget "
        "requires_grad_() on a parameter, or call it under NoGradGuard?)");
  if (!gradient.defined()) {
    if (root.numel() != 1)
      throw std::invalid_argument(fmt::format(
          "backward(): a gradient can be implied only for a one-element tensor; this one "
          "has shape {}, pass the upstream gradient explicitly",
          shape_str(root.shape())));
    return ones(root.shape(), root.dtype());
  }
  if (gradient.shape() != root.shape() || gradient.dtype() != root.dtype())
    throw std::invalid_argument(
        fmt::format("backward(): gradient of shape {} ({}) given for a tensor of shape {} ({})",
                    shape_str(gradient.shape()), dtype_name(gradient.dtype()),
                    shape_str(root.shape()), dtype_name(root.dtype())));
  return gradient;
}

// Runs node n's backward on its gradient g and hands each input its share: leaves
// accumulate it, producers collect it in `grads` (summed with what they already have)
void run_node(Node& n, const Tensor& g, std::unordered_map<Node*, Tensor>& grads) {
  if (n.released)
    throw std::logic_error(fmt::format(
        "backward(): trying to backward through {} a second time; its saved tensors were "
        "freed after the first backward. Pass retain_graph=true to the first call",
        n.name));
  std::vector<Tensor> in_grads;
  {
    const profile::Timer timer(n.name);
    in_grads = n.backward(g);
  }
  if (in_grads.size() != n.next.size())
    throw std::logic_error(fmt::format("{} returned {} gradients for {} inputs", n.name,
                                       in_grads.size(), n.next.size()));
  if (tracking_modules()) {
    for (auto& gi : in_grads)
      if (inject_fault(true, n.where, gi)) break;
    if (detect_anomaly()) check_backward(n.name, n.where, g, in_grads);
  }
  for (size_t i = 0; i < in_grads.size(); ++i) {
    const Edge& e = n.next[i];
    if (!e.defined() || !in_grads[i].defined()) continue;
    check_gradient(n, i, in_grads[i]);
    if (e.leaf) {
      if (g_captured)
        capture_leaf(*e.leaf, std::move(in_grads[i]), n.name);
      else
        accumulate_leaf(*e.leaf, std::move(in_grads[i]));
      continue;
    }
    auto [slot, fresh] = grads.try_emplace(e.fn.get(), std::move(in_grads[i]));
    if (fresh) continue;
    if (exclusively_owned(slot->second))
      add_(slot->second, in_grads[i]);  // in place: same shape, checked above
    else
      slot->second = add(slot->second, in_grads[i]);
  }
}

// With a LeafGradReadyHook: the edges still to run into each leaf; a leaf is announced when
// its count reaches zero. Without one it does nothing.
class LeafCountdown {
 public:
  explicit LeafCountdown(const std::vector<Node*>& order) {
    if (!g_leaf_ready) return;
    for (const Node* n : order)
      for (const Edge& e : n->next)
        if (e.leaf) ++pending_[e.leaf.get()];
  }
  void ran(const Node& n) {
    if (!g_leaf_ready) return;
    for (const Edge& e : n.next)
      if (e.leaf && --pending_[e.leaf.get()] == 0) (*g_leaf_ready)(e.leaf.get());
  }

 private:
  std::unordered_map<const TensorImpl*, int> pending_;
};

}  // namespace

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  Tensor seed = seed_gradient(root, gradient);
  NoGradGuard no_grad;
  if (root.is_leaf()) {
    accumulate_leaf(*root.impl(), seed);
    return;
  }
  std::unordered_map<Node*, Tensor> grads;
  grads[root.grad_fn().get()] = seed;
  const std::vector<Node*> order = topological_order(root.grad_fn().get());
  LeafCountdown countdown(order);
  for (Node* n : order) {
    auto it = grads.find(n);
    if (it != grads.end()) {  // else no gradient reached it
      Tensor g = std::move(it->second);
      grads.erase(it);
      run_node(*n, g, grads);
      if (!retain_graph) {
        n->backward = nullptr;
        n->released = true;
      }
    }
    countdown.ran(*n);
  }
}

namespace {

// Sets the capture map and suspends the leaf hook for one gradients() call; restores both
// (gradients() runs inside an outer backward, whose hook and capture are its own).
class CaptureScope {
 public:
  explicit CaptureScope(std::unordered_map<const TensorImpl*, Tensor>* map)
      : prev_captured_(g_captured), prev_hook_(g_leaf_ready) {
    g_captured = map;
    g_leaf_ready = nullptr;
  }
  ~CaptureScope() {
    g_captured = prev_captured_;
    g_leaf_ready = prev_hook_;
  }
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  std::unordered_map<const TensorImpl*, Tensor>* prev_captured_;
  LeafGradReadyHook::Fn* prev_hook_;
};

}  // namespace

std::vector<Tensor> gradients(const Tensor& root, const Tensor& gradient,
                              const std::vector<Tensor>& leaves) {
  std::unordered_map<const TensorImpl*, Tensor> captured;
  for (const Tensor& leaf : leaves)
    if (leaf.defined() && leaf.requires_grad()) captured.try_emplace(leaf.impl_ptr().get());
  {
    const CaptureScope scope(&captured);
    if (root.is_leaf()) {
      capture_leaf(*root.impl(), seed_gradient(root, gradient), "the root");
    } else {
      run_backward(root, gradient, /*retain_graph=*/false);
    }
  }
  std::vector<Tensor> out;
  for (const Tensor& leaf : leaves) {
    const auto it = leaf.defined() ? captured.find(leaf.impl_ptr().get()) : captured.end();
    out.push_back(it == captured.end() ? Tensor() : it->second);
  }
  return out;
}

}  // namespace ag
