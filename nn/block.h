#pragma once
// The transformer block, described once: its sub-layers (the constructor), its training
// forward, its inference step on the KV-cached decoder, and its footprint. GPT::forward,
// the decoder and the attention maps (a forward with an observer) all run this one
// description; nothing else in nn/ names its sub-layers.
//
//   h = h + drop_resid(attn(ln1(h)));  h = h + drop_resid(mlp(ln2(h)))
//
// attn.out_proj and the MLP's output projection write into the residual stream, and are marked so
// (Linear::residual_projection) for GPT-2's initialisation.
#include <memory>
#include <string>
#include <vector>

#include "nn/attention.h"
#include "nn/config.h"

namespace nn {

class TransformerBlock : public Module {
 public:
  // rope: the model's RoPE tables (nn/rope.h), null with learned positions
  TransformerBlock(const GPTConfig& cfg, ag::Generator& gen,
                   std::shared_ptr<ag::Generator> dropout_gen,
                   std::shared_ptr<const RopeTables> rope = nullptr);
  ag::Tensor forward(const ag::Tensor& h) const;
  // Inference: the block on the rows of c.x, in place, as layer `layer` of the cache.
  void infer(InferenceContext& c, int64_t layer, const InferencePass& pass, int tid,
             int threads) const;
  void footprint(Footprint& f) const override;
  // The Linears a LoRA target names (nn::lora_target_names), in the block's order.
  std::vector<Linear*> lora_linears(const std::string& target) const;

  std::shared_ptr<Norm> ln1, ln2;
  std::shared_ptr<MultiHeadAttention> attn;
  std::shared_ptr<FeedForward> mlp;     // MLP (fc1, fc2) or SwiGLU (gate_proj, up_proj, down_proj)
  std::shared_ptr<Dropout> drop_resid;  // on each branch, before it joins the residual stream
};

}  // namespace nn
