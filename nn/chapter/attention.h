#pragma once
// The attention chapter's teaching classes, class by class, kept apart from the model's own
// attention (nn/attention.h): self-attention with raw weight matrices (v1) and with Linear
// layers (v2), causal attention with dropout, and a wrapper that stacks single heads. Each
// is composed of plain ops, as the chapter writes it; tests/test_chapter_attention.cpp
// reproduces the chapter's printed numbers with them.
//
//   ag::Generator gen(123);
//   nn::SelfAttention_v2 sa(/*d_in=*/3, /*d_out=*/2, /*qkv_bias=*/false, gen);
//   ag::Tensor context = sa.forward(inputs);  // [T, 3] -> [T, 2]
#include <memory>

#include "nn/layers.h"

namespace nn {

// x [T, d_in] -> [T, d_out]; W_* [d_in, d_out] ~ U[0, 1) as torch.rand draws them.
class SelfAttention_v1 : public Module {
 public:
  SelfAttention_v1(int64_t d_in, int64_t d_out, ag::Generator& gen);
  ag::Tensor forward(const ag::Tensor& x) const;
  ag::Tensor W_query, W_key, W_value;
};

// x [..., T, d_in] -> [..., T, d_out], projections through Linear.
class SelfAttention_v2 : public Module {
 public:
  SelfAttention_v2(int64_t d_in, int64_t d_out, bool qkv_bias, ag::Generator& gen);
  ag::Tensor forward(const ag::Tensor& x) const;
  std::shared_ptr<Linear> W_query, W_key, W_value;
};

// Single-head causal attention, composed from ops: x [B, T, d_in] -> [B, T, d_out], with
// dropout on the attention weights. T may be shorter than context_length, never longer.
class CausalAttention : public Module {
 public:
  CausalAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout,
                  bool qkv_bias, ag::Generator& gen, std::shared_ptr<ag::Generator> dropout_gen);
  ag::Tensor forward(const ag::Tensor& x) const;
  std::shared_ptr<Linear> W_query, W_key, W_value;
  std::shared_ptr<Dropout> drop_attn;  // on the attention weights
  ag::Tensor mask;  // [context_length, context_length] bool, true above the diagonal

 private:
  int64_t context_length_;
};

// num_heads CausalAttention heads side by side: [B, T, d_in] -> [B, T, num_heads * d_out].
class MultiHeadAttentionWrapper : public Module {
 public:
  MultiHeadAttentionWrapper(int64_t d_in, int64_t d_out, int64_t context_length, double dropout,
                            int64_t num_heads, bool qkv_bias, ag::Generator& gen,
                            std::shared_ptr<ag::Generator> dropout_gen);
  ag::Tensor forward(const ag::Tensor& x) const;
  std::shared_ptr<ModuleList<CausalAttention>> heads;
};

}  // namespace nn
