#pragma once
// Optimizers update parameters in place from their .grad(); the elementwise ones (SGD,
// Adam, AdamW) in one fused pass over all parameters, with no allocation after the first
// step. Their state (moments, step count, hyperparameters) goes into checkpoints as named
// tensors and scalars.
#include <string>
#include <utility>
#include <vector>

#include "autograd/autocast.h"
#include "nn/module.h"

namespace optim {

// Parameters sharing a weight decay; names are kept for checkpoints.
struct ParamGroup {
  nn::StateDict params;
  double weight_decay = 0;
};

// GPT-2's rule (docs/model.md): parameters with two or more dims (Linear weights, embeddings)
// are decayed, the rest (biases, LayerNorm) are not. Returns {decayed, not decayed}.
std::vector<ParamGroup> decay_groups(const nn::StateDict& named, double weight_decay);

// What a checkpoint's /optimizer group stores (io::Checkpoint holds it as it is):
// tensors named "<buffer>/<parameter name>" and scalars.
struct OptimizerState {
  std::string type;
  std::vector<std::pair<std::string, double>> scalars;
  nn::StateDict tensors;
};

// A state's values as an optimiser of its type may take them (a checkpoint is data from
// elsewhere: io checks a file's on load, and load_state checks again): the step count a
// whole number in [0, 2^53], lr finite and >= 0, every other setting finite, every buffer
// value finite, and Adam's and AdamW's second moments ("v/<parameter>", running means of
// squared gradients) never negative. Throws std::invalid_argument naming the setting, or
// the tensor with the count of values out of range and the first position.
void check_state_values(const OptimizerState& state);
// "" when setting `key` of a state holds a value an optimiser may take (above), else why not.
std::string state_scalar_problem(const std::string& key, double value);
// "" when state tensor `name` ("<buffer>/<parameter>") of an optimiser of `type` is in its
// buffer's range (a second moment: no negative value; finiteness is checked apart), else
// why not: "holds 3 negative values (first at [0, 5]: -0.25); ...".
std::string state_tensor_problem(const std::string& type, const std::string& name,
                                 const ag::Tensor& t);

// What an optimiser is to the trainer and the checkpoint: the trainer holds one through
// this interface (registry.h makes it from a name), and io/ stores its state() as the
// /optimizer group. An update rule that is not elementwise (factored moments, matrix
// orthogonalisation) implements it directly.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Its name in the registry, and the type its state() records.
  virtual std::string type() const = 0;
  // One update; skips parameters whose grad is undefined. Each gradient enters the update
  // multiplied by grad_scale (rounded to the parameter's type) exactly as if
  // clip_grad_norm had scaled it in place, but the gradients are left as they are: the
  // clipping's scaling rides the update's one pass over memory instead of a pass of its own.
  virtual void step(double grad_scale = 1) = 0;
  virtual void zero_grad() = 0;
  // Whether each step from now on rounds every parameter it updates into its bfloat16
  // copies in `copies` (ag::Bf16WeightCopies; nullptr: stop), so that a trainer may give
  // its autocast scopes the copies. One that cannot says false, and the trainer's scopes
  // round the weights themselves.
  virtual bool keep_bf16_copies(ag::Bf16WeightCopies* copies) {
    (void)copies;
    return false;
  }
  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;
  virtual int64_t steps() const = 0;
  // Its settings besides the learning rate, as its state() records them.
  virtual std::vector<std::pair<std::string, double>> hyperparameters() const = 0;
  // Bytes of state it keeps per element of a float32 parameter (AdamW: two moments, 8).
  virtual int64_t state_bytes_per_parameter() const = 0;
  // Its state tensors by name, its hyperparameters, lr and step count: all a resumed run
  // needs to take the next step with the same bits.
  virtual OptimizerState state() const = 0;
  // Validates type, every name and shape and the values (check_state_values) first;
  // modifies nothing when anything is off.
  virtual void load_state(const OptimizerState& state) = 0;
};

// The optimisers whose update is an independent rule per element, with per-element
// buffers (momentum, or Adam's moments): one fused pass over all parameters, shared out
// among the threads in chunks, and their buffers checkpointed as "<buffer>/<parameter>".
class ElementwiseOptimizer : public Optimizer {
 public:
  ElementwiseOptimizer(std::vector<ParamGroup> groups, double lr);
  void step(double grad_scale = 1) override;
  void zero_grad() override;
  bool keep_bf16_copies(ag::Bf16WeightCopies* copies) override;
  double lr() const override { return lr_; }
  void set_lr(double lr) override;
  int64_t steps() const override { return steps_; }
  int64_t state_bytes_per_parameter() const override;
  OptimizerState state() const override;
  void load_state(const OptimizerState& state) override;

 protected:
  struct Slot {
    std::string name;
    ag::Tensor param;
    double weight_decay;
    std::vector<ag::Tensor> buffers;  // per optimizer: momentum, or m and v
  };
  virtual std::vector<std::string> buffer_names() const = 0;
  // Updates elements [begin, end) of one parameter from grad * grad_scale; steps_ already
  // counts this step. Called concurrently for disjoint ranges.
  virtual void update(Slot& slot, const ag::Tensor& grad, double grad_scale, int64_t begin,
                      int64_t end) = 0;

  std::vector<Slot> slots_;
  ag::Bf16WeightCopies* bf16_copies_ = nullptr;
  double lr_;
  int64_t steps_ = 0;
};

// torch.optim.SGD: weight decay added to the gradient, optional (Nesterov) momentum.
class SGD : public ElementwiseOptimizer {
 public:
  SGD(std::vector<ParamGroup> groups, double lr, double momentum = 0, bool nesterov = false);
  std::string type() const override { return "sgd"; }
  std::vector<std::pair<std::string, double>> hyperparameters() const override;

 private:
  std::vector<std::string> buffer_names() const override;
  void update(Slot& slot, const ag::Tensor& grad, double grad_scale, int64_t begin,
              int64_t end) override;
  double momentum_;
  bool nesterov_;
};

// torch.optim.Adam (decoupled = false: L2 decay added to the gradient) and
// torch.optim.AdamW (decoupled = true: p -= lr * wd * p before the Adam update).
class Adam : public ElementwiseOptimizer {
 public:
  Adam(std::vector<ParamGroup> groups, double lr, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8);
  std::string type() const override { return decoupled_ ? "adamw" : "adam"; }
  std::vector<std::pair<std::string, double>> hyperparameters() const override;

 protected:
  Adam(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps,
       bool decoupled);
  std::vector<std::string> buffer_names() const override { return {"m", "v"}; }
  void update(Slot& slot, const ag::Tensor& grad, double grad_scale, int64_t begin,
              int64_t end) override;
  double beta1_, beta2_, eps_;
  bool decoupled_;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<ParamGroup> groups, double lr, double beta1 = 0.9, double beta2 = 0.95,
        double eps = 1e-8)
      : Adam(std::move(groups), lr, beta1, beta2, eps, true) {}
};

// Scales every gradient by max_norm / (norm + 1e-6) when their global L2 norm exceeds
// max_norm (torch.nn.utils.clip_grad_norm_); returns the norm before clipping. A
// non-finite norm is returned without touching the gradients.
double clip_grad_norm(const std::vector<ag::Tensor>& params, double max_norm);

// clip_grad_norm in two halves, for a trainer that fuses the scaling into the update:
//   const double norm = optim::grad_norm(params);
//   opt.step(optim::clip_factor(norm, max_norm));  // the same bits as clip, then step()
// The gradients' global L2 norm, summed the same way on any number of threads (makes
// contiguous any gradient that is a view).
double grad_norm(const std::vector<ag::Tensor>& params);
// What clip_grad_norm scales the gradients by: max_norm / (norm + 1e-6) when norm exceeds
// max_norm, else 1 (a non-finite norm included: clip_grad_norm leaves those alone).
double clip_factor(double norm, double max_norm);

}  // namespace optim
