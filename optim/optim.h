#pragma once
// Optimisers, gradient clipping and learning-rate schedules: the map of optim/.
//
//   auto groups = optim::decay_groups(model.named_parameters(), 0.1);
//   optim::AdamW opt(groups, 1e-3, 0.9, 0.95, 1e-8);
//   optim::WarmupCosineLR schedule(1e-3, 1e-4, /*warmup=*/100, /*total=*/5000);
//   opt.set_lr(schedule.lr_at(step));
//   optim::clip_grad_norm(model.parameters(), 1.0);
//   opt.step();
//
//   optimizer.h  the Optimizer interface; SGD, Adam, AdamW; clipping; the checks a loaded
//                state passes (check_state_values: no negative second moment)
//   registry.h   optimisers by name (--optimizer): the one place a name becomes one
//   schedule.h   learning-rate schedules
#include "optim/optimizer.h"
#include "optim/registry.h"
#include "optim/schedule.h"
