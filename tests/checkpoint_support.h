#pragma once
// Helpers of the tests that start runs from checkpoints or compare what runs saved.
#include "io/checkpoint.h"
#include "nn/gpt.h"
#include "train/config.h"

namespace ag_test {

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
