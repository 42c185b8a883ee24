#pragma once
// Module: the base of every layer. Parameters and submodules are registered by name, so
// named_parameters() yields PyTorch-style hierarchical names in registration order
// ("blocks.0.attn.W_query.weight") and a state_dict loads into an equivalent PyTorch
// module by name.
//
//   class Affine : public nn::Module {
//    public:
//     Affine(int64_t n, ag::Generator& gen) {
//       scale = register_parameter("scale", ag::ones({n}));
//       shift = register_parameter("shift", ag::zeros({n}));
//     }
//     ag::Tensor forward(const ag::Tensor& x) { return x * scale + shift; }
//     ag::Tensor scale, shift;
//   };
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autograd.h"
#include "nn/footprint.h"

namespace nn {

struct InferenceContext;

// Name to tensor, in registration order (the order PyTorch's state_dict() keeps).
using StateDict = std::vector<std::pair<std::string, ag::Tensor>>;
using ShapeList = std::vector<std::pair<std::string, ag::Shape>>;

namespace detail {
// A flag of this thread, raised while a Scope is alive (a nested one restores it).
template <typename Scope>
class ThreadFlagScope {
 public:
  ThreadFlagScope() : previous_(flag()) { flag() = true; }
  ~ThreadFlagScope() { flag() = previous_; }
  ThreadFlagScope(const ThreadFlagScope&) = delete;
  ThreadFlagScope& operator=(const ThreadFlagScope&) = delete;
  static bool active() { return flag(); }

 private:
  static bool& flag() {
    thread_local bool raised = false;
    return raised;
  }
  bool previous_;
};
}  // namespace detail

// While one is alive on this thread, modules are built as descriptions only: parameters are
// declared with their names and shapes, nothing is allocated and no generator is drawn
// from. Parameter lists, counts, FLOPs and memory plans are read off such a description
// (GPTConfig::parameter_shapes, GPT::footprint) before a model is built, so a config that
// lies about its sizes cannot make us allocate them.
class ShapeOnlyScope : public detail::ThreadFlagScope<ShapeOnlyScope> {};

// While one is alive on this thread, parameters are allocated but not initialised: no
// generator is drawn from and no page of them is written, for values that come next from
// elsewhere (Module::adopt_state_dict: a checkpoint's weights, which then cost one copy).
class UninitializedScope : public detail::ThreadFlagScope<UninitializedScope> {};

// While one is alive on this thread, a parameter registered as `redrawn` (a matrix GPT's
// initialisation draws again: Linear, Embedding, LMHead weights) is still drawn, so that
// the generator advances as it always does, but its value is dropped and the parameter
// given no storage until the initialisation's redraw places its values
// (nn::place_initial_draws): a model whose frozen base is drawn into packed blocks
// (frozen_base.h) never holds its float32 matrices.
class RedrawnScope : public detail::ThreadFlagScope<RedrawnScope> {};

// While one is alive on this thread, every module runs as in eval(): an observed forward
// (attention maps) is an inference whatever mode the model was left in.
class InferenceScope : public detail::ThreadFlagScope<InferenceScope> {};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Every parameter of this module and its descendants, with dotted hierarchical names.
  StateDict named_parameters() const;
  std::vector<ag::Tensor> parameters() const;
  // Every parameter's name and shape, also of a shape-only description.
  ShapeList named_parameter_shapes() const;
  int64_t num_parameters() const;
  void zero_grad();

  // Freezing: a frozen parameter takes no gradient and is left out of
  // trainable_parameters(), what an optimiser is given (fine-tuning an adapter or a head
  // over frozen weights).
  void requires_grad_(bool on);
  void freeze() { requires_grad_(false); }
  std::vector<ag::Tensor> trainable_parameters() const;

  // Training mode reaches every descendant (dropout reads it); an InferenceScope turns it
  // off for the forwards run inside it.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_ && !InferenceScope::active(); }

  // What a forward of this module keeps for backward and computes, per token (footprint.h):
  // by default its children's, in registration order. Layers that call ops add their own.
  virtual void footprint(Footprint& f) const;
  // Resolves, into the decoder's context, what this module's inference step reads
  // (InferenceContext::bind); by default nothing. Called once when a decoder is made.
  virtual void bind_inference(InferenceContext&) const {}

  // The parameters by name, sharing storage with the module.
  StateDict state_dict() const { return named_parameters(); }
  // Copies every entry into the parameter of that name (converting dtype if needed).
  // Every parameter must be given, with its exact shape, and no other name: the first
  // missing, unexpected or mis-shaped entry is an error naming it, and nothing is
  // modified unless every entry checks out. A packed entry (a frozen weight's blocks,
  // autograd/quant/packed_weight.h) is taken as it is: the parameter shares its blocks and
  // requires no grad (nn::pack_frozen_base then holds each as the run does).
  void load_state_dict(const StateDict& state);
  // The same checks, then each parameter shares the given tensor's storage instead of
  // copying it (float32 contiguous ones; others are copied): the module and `state` hold
  // one copy of the weights between them.
  void adopt_state_dict(const StateDict& state);

  // Converts every parameter to `dtype` in place (float64 for gradient checks).
  void to(ag::DType dtype);

  // Calls fn on this module, then on every descendant: parents before children, siblings
  // in registration order, so modules come in the order named_parameters() lists theirs.
  void for_each_module(const std::function<void(Module&)>& fn);
  // The same, read-only.
  void visit_modules(const std::function<void(const Module&)>& fn) const;

  // The dotted path from the root module ("blocks.0.attn.W_query"; "" for the root).
  const std::string& path() const;
  // The paths of every descendant, parents before children ("blocks", "blocks.0", ...).
  std::vector<std::string> module_paths() const;
  // Opened at the top of each forward: ops run inside are attributed to this module by
  // anomaly detection (autograd/anomaly.h). Free when detection is off.
  ag::AnomalyScope anomaly_scope() const { return ag::AnomalyScope(&Module::path_of, this); }

 protected:
  // Registers a leaf tensor as a parameter (it is made to require grad) and returns it.
  ag::Tensor register_parameter(const std::string& name, ag::Tensor value);
  // Declares a parameter of `shape` whose value `init` makes; under a ShapeOnlyScope init
  // is not called and the returned tensor is undefined.
  // redrawn: a matrix GPT's initialisation draws again (RedrawnScope).
  ag::Tensor register_parameter(const std::string& name, const ag::Shape& shape,
                                const std::function<ag::Tensor()>& init, bool redrawn = false);
  // Replaces the child registered as `old_name` (keeping its place) by `module`, registered
  // as `name` (a model's head, swapped for a classifier).
  void replace_module(const std::string& old_name, const std::string& name,
                      std::shared_ptr<Module> module);
  void remove_module(const std::string& name);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    children_.emplace_back(name, module);
    module->parent_ = this;
    module->name_ = name;
    return module;
  }

 private:
  static const std::string& path_of(const void* module) {
    return static_cast<const Module*>(module)->path();
  }
  const Module* parent_ = nullptr;  // set by the parent's register_module
  std::string name_;
  mutable std::string path_;  // computed on first use
  void collect(const std::string& prefix, StateDict& out) const;
  void collect_shapes(const std::string& prefix, ShapeList& out) const;

  struct Parameter {
    std::string name;
    ag::Tensor value;  // undefined in a shape-only description
    ag::Shape shape;
  };
  std::vector<Parameter> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// Holds submodules under the names "0", "1", ... like torch.nn.ModuleList.
template <typename M>
class ModuleList : public Module {
 public:
  void push_back(std::shared_ptr<M> m) {
    items_.push_back(register_module(std::to_string(items_.size()), std::move(m)));
  }
  size_t size() const { return items_.size(); }
  M& operator[](size_t i) const { return *items_.at(i); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<M>> items_;
};

}  // namespace nn
