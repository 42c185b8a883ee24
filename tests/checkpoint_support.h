#pragma once
// Helpers of the tests that start runs from checkpoints or compare what runs saved.
#include "io/checkpoint.h"
#include "nn/gpt.h"
#include "train/config.h"

namespace ag_test {

// Every tensor of a and b of the same name and bits, in the same order.
inline bool same_state(const nn::StateDict& a, const nn::StateDict& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].first != b[i].first || a[i].second.to_vector() != b[i].second.to_vector())
      return false;
  return true;
}

// A model's weights and config as the checkpoint an --init-from would read ("lm.h5").
inline io::Checkpoint init_checkpoint(const nn::GPT& model) {
  train::RunConfig cfg;
  cfg.model = model.config();
  io::Checkpoint init;
  init.config = cfg.to_json();
  init.model = model.named_parameters();
  init.source = "lm.h5";
  return init;
}

}  // namespace ag_test
