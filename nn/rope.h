#pragma once
// RoPE's tables (GPTConfig::position = rope): each position's cosines and sines, computed
// once per model and shared by its blocks' attention (the op ag::rope turns the heads).
// The angles follow Hugging Face's Llama code: the inverse frequencies theta^(-2i / D)
// (Llama 3's scaling applied when rope_scaling is llama3) rounded to float32, the angle
// the float32 product of position and frequency, then its cosine and sine rounded to
// float32, so a model's logits agree with the code it was trained with.
//
//   auto tables = nn::rope_tables(cfg);  // cos, sin [context_length, head_dim / 2]
#include <memory>
#include <vector>

#include "autograd/autograd.h"
#include "nn/config.h"

namespace nn {

struct RopeTables {
  ag::Tensor cos, sin;  // float32 [positions, head_dim / 2]
};

// The inverse frequency of each rotated pair i < head_dim / 2, scaled as cfg says.
std::vector<float> rope_inverse_frequencies(const GPTConfig& cfg);

// The tables for cfg.context_length positions; null when cfg.position is learned.
std::shared_ptr<const RopeTables> rope_tables(const GPTConfig& cfg);

}  // namespace nn
