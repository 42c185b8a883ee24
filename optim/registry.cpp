#include "optim/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace optim {

namespace {

struct Registered {
  const char* name;
  const char* title;
  std::vector<std::string> reads;  // its keys in hyperparameter_table()
  std::unique_ptr<Optimizer> (*make)(std::vector<ParamGroup> groups, double lr,
                                     const OptimizerConfig& c);
};

template <typename AdamRule>
std::unique_ptr<Optimizer> make_adam(std::vector<ParamGroup> groups, double lr,
                                     const OptimizerConfig& c) {
  return std::make_unique<AdamRule>(std::move(groups), lr, c.beta1, c.beta2, c.eps);
}

std::unique_ptr<Optimizer> make_sgd(std::vector<ParamGroup> groups, double lr,
                                    const OptimizerConfig& c) {
  return std::make_unique<SGD>(std::move(groups), lr, c.momentum);
}

const std::vector<Registered>& registry() {
  static const std::vector<Registered> rows = {
      {"adamw", "AdamW", {"weight_decay", "beta1", "beta2", "eps"}, make_adam<AdamW>},
      {"adam", "Adam", {"weight_decay", "beta1", "beta2", "eps"}, make_adam<Adam>},
      {"sgd", "SGD", {"weight_decay", "momentum"}, make_sgd},
  };
  return rows;
}

const Registered& find(const std::string& name) {
  for (const Registered& r : registry())
    if (name == r.name) return r;
  throw std::invalid_argument(fmt::format("optimizer must be one of {}, got '{}'",
                                          fmt::join(optimizer_names(), ", "), name));
}

}  // namespace

const std::vector<Hyperparameter>& hyperparameter_table() {
  static const std::vector<Hyperparameter> table = {
      {"weight_decay", &OptimizerConfig::weight_decay,
       "decay of 2-D+ parameters (AdamW: decoupled; Adam, SGD: added to the gradient)"},
      {"beta1", &OptimizerConfig::beta1, "Adam(W) beta1"},
      {"beta2", &OptimizerConfig::beta2, "Adam(W) beta2"},
      {"eps", &OptimizerConfig::eps, "Adam(W) epsilon"},
      {"momentum", &OptimizerConfig::momentum, "SGD momentum (0: none)"},
  };
  return table;
}

void OptimizerConfig::validate() const {
  auto fail = [](const std::string& msg) { throw std::invalid_argument(msg); };
  find(name);
  if (!(weight_decay >= 0 && std::isfinite(weight_decay)))
    fail(fmt::format("weight_decay must be >= 0 and finite, got {}", weight_decay));
  if (!(beta1 >= 0 && beta1 < 1)) fail(fmt::format("beta1 must be in [0, 1), got {}", beta1));
  if (!(beta2 >= 0 && beta2 < 1)) fail(fmt::format("beta2 must be in [0, 1), got {}", beta2));
  if (!(eps > 0 && std::isfinite(eps)))
    fail(fmt::format("eps must be positive and finite, got {}", eps));
  if (!(momentum >= 0 && momentum < 1))
    fail(fmt::format("momentum must be in [0, 1), got {}", momentum));
}

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names;
  for (const Registered& r : registry()) names.emplace_back(r.name);
  return names;
}

std::string optimizer_title(const std::string& name) {
  return find(name).title;
}

std::vector<std::string> hyperparameters_of(const std::string& name) {
  return find(name).reads;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, const nn::StateDict& named,
                                          double lr) {
  c.validate();
  return find(c.name).make(decay_groups(named, c.weight_decay), lr, c);
}

int64_t state_bytes_per_parameter(const OptimizerConfig& c) {
  return make_optimizer(c, {}, 0.0)->state_bytes_per_parameter();
}

}  // namespace optim
