#pragma once
// Which parameters a run trains, decided once from its RunConfig: with LoRA
// (model.lora_rank > 0) every parameter that is not an adapter's is frozen, except a
// classification head's ("classifier."); `freeze` patterns freeze more by name. A frozen
// parameter gets no gradient, no weight-gradient GEMM and no optimiser state: the
// optimiser, clip_grad_norm, the gradient accumulator and the reducer are given the
// trainable parameters only. Decided from names alone, so that `inspect` counts what a
// checkpoint's run trains without building it.
//
//   train::freeze_parameters(cfg, model);              // after the weights are loaded
//   auto opt = optim::make_optimizer(cfg.optimizer, train::trainable_named_parameters(model), lr);
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "nn/frozen_base.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "train/config.h"

namespace train {

// A LoRA adapter's parameter ("blocks.0.attn.W_query.lora_A.weight").
bool is_adapter_parameter(const std::string& name);

// For each name, whether cfg freezes it. A `freeze` pattern that matches none of the names
// is a std::invalid_argument naming it; so is freezing every parameter.
std::vector<bool> frozen_parameters(const RunConfig& cfg, const std::vector<std::string>& names);

// Freezes (requires_grad off) what frozen_parameters says, and nothing else.
void freeze_parameters(const RunConfig& cfg, nn::Module& model);

// The frozen base a run of cfg holds packed (nn/frozen_base.h): cfg.base_precision's
// format over the names frozen_parameters freezes (read off a shape-only description).
nn::FrozenBase frozen_base(const RunConfig& cfg);

// The parameters that take gradients, named, in the model's order.
// (Their tensors alone: Module::trainable_parameters.)
nn::StateDict trainable_named_parameters(const nn::Module& model);
// The bfloat16 weight copies a run's autocast scopes may use (ag::Bf16WeightCopies):
// `copies`, with the frozen parameters registered (kept for the whole run), when the
// precision is bf16 and `opt` keeps the trainable ones' refreshed; else null, and each
// scope rounds the weights itself. The trainer and bench both take their copies here.
ag::Bf16WeightCopies* kept_bf16_copies(ag::Precision precision, optim::Optimizer& opt,
                                       const nn::Module& model, ag::Bf16WeightCopies& copies);

struct ParameterCounts {
  int64_t trainable = 0, frozen = 0;
};
// Elements trained and frozen by a run of cfg over these parameters (a checkpoint's), or
// over those of its model, read off a shape-only description.
ParameterCounts count_parameters(const RunConfig& cfg, const nn::ShapeList& parameters);
ParameterCounts count_parameters(const RunConfig& cfg);

}  // namespace train
