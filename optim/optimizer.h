#pragma once
// Optimizers update parameters in place from their .grad(), in one fused pass over all
// parameters, with no allocation after the first step. Their state (moments, step count,
// hyperparameters) goes into checkpoints as named tensors and scalars.
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace optim {

// Parameters sharing a weight decay; names are kept for checkpoints.
struct ParamGroup {
  nn::StateDict params;
  double weight_decay = 0;
};

// The spec's rule: parameters with two or more dims (Linear weights, embedding tables)
// are decayed, the rest (biases, LayerNorm) are not. Returns {decayed, not decayed}.
std::vector<ParamGroup> decay_groups(const nn::StateDict& named, double weight_decay);

// What a checkpoint's /optimizer group stores (io::Checkpoint holds it as it is):
// tensors named "<buffer>/<parameter name>" and scalars.
struct OptimizerState {
  std::string type;
  std::vector<std::pair<std::string, double>> scalars;
  nn::StateDict tensors;
};

class Optimizer {
 public:
  Optimizer(std::vector<ParamGroup> groups, double lr);
  virtual ~Optimizer() = default;
  void step();  // skips parameters whose grad is undefined
  void zero_grad();
  double lr() const { return lr_; }
  void set_lr(double lr);
  int64_t steps() const { return steps_; }
  OptimizerState state() const;
  // Validates type, every name and shape first; modifies nothing when anything is off.
  void load_state(const OptimizerState& state);

 protected:
  struct Slot {
    std::string name;
    ag::Tensor param;
    double weight_decay;
    std::vector<ag::Tensor> buffers;  // per optimizer: momentum, or m and v
  };
  virtual std::string type() const = 0;
  virtual std::vector<std::string> buffer_names() const = 0;
  virtual std::vector<std::pair<std::string, double>> hyperparameters() const = 0;
  // Updates elements [begin, end) of one parameter; steps_ already counts this step.
  // Called concurrently for disjoint ranges.
  virtual void update(Slot& slot, const ag::Tensor& grad, int64_t begin, int64_t end) = 0;

  std::vector<Slot> slots_;
  double lr_;
  int64_t steps_ = 0;
};

// torch.optim.SGD: weight decay added to the gradient, optional (Nesterov) momentum.
class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, double lr, double momentum = 0, bool nesterov = false);

 private:
  std::string type() const override { return "sgd"; }
  std::vector<std::string> buffer_names() const override;
  std::vector<std::pair<std::string, double>> hyperparameters() const override;
  void update(Slot& slot, const ag::Tensor& grad, int64_t begin, int64_t end) override;
  double momentum_;
  bool nesterov_;
};

// torch.optim.Adam (decoupled = false: L2 decay added to the gradient) and
// torch.optim.AdamW (decoupled = true: p -= lr * wd * p before the Adam update).
class Adam : public Optimizer {
 public:
  Adam(std::vector<ParamGroup> groups, double lr, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8);

 protected:
  Adam(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps,
       bool decoupled);
  std::string type() const override { return decoupled_ ? "adamw" : "adam"; }
  std::vector<std::string> buffer_names() const override { return {"m", "v"}; }
  std::vector<std::pair<std::string, double>> hyperparameters() const override;
  void update(Slot& slot, const ag::Tensor& grad, int64_t begin, int64_t end) override;
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

}  // namespace optim
