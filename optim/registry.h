#pragma once
// The optimisers a run can name, in one table (registry.cpp): the one place where a name
// becomes an optimiser. `train --optimizer NAME`, a config's "optimizer" key, the memory
// plan's optimizer term and the settings a run records all come from it. Adding an
// optimiser is its class (an optim::Optimizer) and one row there; a new setting is a
// field of OptimizerConfig, a row of hyperparameter_table() and its check in validate().
//
//   optim::OptimizerConfig c;  c.name = "sgd";  c.momentum = 0.9;
//   c.validate();
//   auto opt = optim::make_optimizer(c, model.named_parameters(), /*lr=*/0.1);
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace optim {

// An optimiser by name and every setting any of them takes (each reads its own).
struct OptimizerConfig {
  std::string name = "adamw";
  double weight_decay = 0.1;  // of parameters with 2+ dims (decay_groups)
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double momentum = 0;
  // Throws std::invalid_argument naming the first unknown name or out-of-range setting.
  void validate() const;
};

// A setting of OptimizerConfig by its config key (the option is the key with '-' for '_').
struct Hyperparameter {
  const char* key;
  double OptimizerConfig::*field;
  const char* help;
};
const std::vector<Hyperparameter>& hyperparameter_table();

std::vector<std::string> optimizer_names();
// "AdamW" for "adamw": as messages and the memory plan name it.
std::string optimizer_title(const std::string& name);
// The keys of hyperparameter_table() that the named optimiser reads.
std::vector<std::string> hyperparameters_of(const std::string& name);

// The optimiser c names, over `named` in decay_groups(named, c.weight_decay); c is
// validated first.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, const nn::StateDict& named,
                                          double lr);
// What it keeps per float32 parameter element (Optimizer::state_bytes_per_parameter),
// without any parameters: for plans made before the model is.
int64_t state_bytes_per_parameter(const OptimizerConfig& c);

}  // namespace optim
