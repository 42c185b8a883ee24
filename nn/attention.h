#pragma once
// The attention chapter, class by class (../shared/seeds): self-attention with raw
// weight matrices (v1) and with Linear layers (v2), causal attention with dropout, a
// wrapper that stacks single heads, and the efficient MultiHeadAttention that splits one
// projection into heads and runs them through the fused
// ag::scaled_dot_product_attention kernel.
//
//   ag::Generator gen(123);
//   auto dropout_gen = std::make_shared<ag::Generator>(0);
//   nn::MultiHeadAttention mha(/*d_in=*/3, /*d_out=*/4, /*context_length=*/6,
//                              /*dropout=*/0.0, /*num_heads=*/2, /*qkv_bias=*/false, gen,
//                              dropout_gen);
//   ag::Tensor context = mha.forward(batch);  // [B, T, 3] -> [B, T, 4]
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
  std::shared_ptr<Dropout> dropout;
  ag::Tensor mask;  // [context_length, context_length] bool, true above the diagonal
  int64_t context_length;
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

// One projection split into num_heads heads of d_out / num_heads; the causal attention
// core is one fused op (no [B, H, T, T] mask, masked entries skipped). [B, T, d_in] ->
// [B, T, d_out].
class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout,
                     int64_t num_heads, bool qkv_bias, ag::Generator& gen,
                     std::shared_ptr<ag::Generator> dropout_gen);
  ag::Tensor forward(const ag::Tensor& x) const;
  std::shared_ptr<Linear> W_query, W_key, W_value, out_proj;
  int64_t d_out, num_heads, head_dim, context_length;
  double dropout;
  std::shared_ptr<ag::Generator> dropout_gen;
};

}  // namespace nn
