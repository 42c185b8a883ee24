#pragma once
// The memory side of `attograd bench`: what a step may hold by the memory plan (the
// state, 16 bytes per parameter under AdamW, and the activations the layers declare), and
// what a checkpoint save adds to the process's resident memory (--save-checkpoint).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "autograd/autocast.h"
#include "nn/gpt.h"
#include "optim/optimizer.h"
#include "train/config.h"

namespace bench {

// The memory plan (train/memory_plan.h) of a step of `run`'s model (and frozen base) on
// batches of `batch` sequences of `tokens` tokens, AdamW over `trainable` of its
// `parameters`, in MB: {"plan_state_mb": parameters + gradients + optimizer state (+ the
// bf16 weight copies under precision bf16), "plan_activations_mb", "plan_activation_terms"
// (the activations by term, MB), "plan_base_scratch_mb" (a packed base's unpacking scratch),
// "plan_tensor_bytes" (all its tensor storage, MemoryPlan::tensor_bytes: the allocator's
// cache budget)}.
nlohmann::json step_budget(const train::RunConfig& run, int64_t batch, int64_t tokens,
                           int64_t parameters, int64_t trainable, ag::Precision precision);

// Saves `model` and `opt` to `path` as a training run saves them (io::save_checkpoint: the
// weights, the optimizer's state, a byte tokenizer, the generators) and measures the
// resident memory around it from /proc/self/status: {"save_ms", "rss_before_save_mb" (at
// its start), "peak_rss_before_save_mb" (the process's peak so far: the steps'),
// "save_peak_rss_mb" (the highest during the save: VmHWM, reset before it through
// /proc/self/clear_refs), "save_added_mb" (that peak over the RSS at its start),
// "state_mb" (the weights and optimizer state written), "save_added_of_state"}.
nlohmann::json measure_save(const std::string& path, nn::GPT& model, const optim::Optimizer& opt,
                            const nlohmann::json& config);

// measure_save's figures, one JSON line ({"impl": "attograd", "measure": "save", ...}) or a
// sentence.
void print_save(const nlohmann::json& save, const std::string& path, bool json);

}  // namespace bench
