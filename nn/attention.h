#pragma once
// The model's attention: MultiHeadAttention, which applies W_query, W_key and W_value as
// one fused projection (qkv) and runs every head at once through the fused
// ag::causal_self_attention kernel. (The chapter's teaching classes that lead up to it,
// v1 to the wrapper of single heads, are in nn/chapter/attention.h.)
//
//   ag::Generator gen(123);
//   auto dropout_gen = std::make_shared<ag::Generator>(0);
//   nn::MultiHeadAttention mha(/*d_in=*/3, /*d_out=*/4, /*context_length=*/6,
//                              /*dropout=*/0.0, /*num_heads=*/2, /*qkv_bias=*/false, gen,
//                              dropout_gen);
//   ag::Tensor context = mha.forward(batch);  // [B, T, 3] -> [B, T, 4]
//
// As in the chapter, `dropout` is always a rate (the probability of zeroing); the Dropout
// modules that apply it are named drop_*.
#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "nn/rope.h"

namespace nn {

namespace detail {
// [B, T, d_in] with T <= context_length, or a clear error naming the module `who`.
void check_sequence(const char* who, const ag::Tensor& x, int64_t d_in, int64_t context_length);
}  // namespace detail

// W_query, W_key and W_value applied as one projection, [B, T, d_in] -> [B, T, 3 d_out]:
// one GEMM forward (two backward) where three Linears take three (six). It owns no
// parameters: they stay in the three Linears, under the chapter's names (checkpoints load
// into PyTorch by them); as a module it gives the projection one name, "qkv", that anomaly
// reports and NaN injection use.
class QKVProjection : public Module {
 public:
  QKVProjection(std::shared_ptr<Linear> query, std::shared_ptr<Linear> key,
                std::shared_ptr<Linear> value);
  ag::Tensor forward(const ag::Tensor& x) const;
  void footprint(Footprint& f) const override;

 private:
  std::shared_ptr<Linear> query_, key_, value_;
};

// The Llama family's options (GPTConfig's keys of the same names; the defaults are GPT-2's).
struct AttentionOptions {
  int64_t num_kv_heads = 0;  // key/value heads, each shared by a group of query heads; 0: all
  int64_t head_dim = 0;      // 0: d_out / num_heads; else the queries are num_heads * head_dim
                             // wide and out_proj maps them back to d_out
  bool out_bias = true;      // out_proj's bias
  bool qk_norm = false;      // q_norm, k_norm: RMSNorm of each head's query and key
  double norm_eps = 1e-5;
  std::shared_ptr<const RopeTables> rope;  // RoPE's turn of q and k; null: none
};

// num_heads heads of d_out / num_heads over the fused projection qkv; the causal attention
// core is one fused op (no [B, H, T, T] mask, masked entries skipped).
// [B, T, d_in] -> [B, T, d_out]. Under an ObserverScope (observer.h) the weights are
// computed explicitly by composed ops, shown to the observer, and attended with.
class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout,
                     int64_t num_heads, bool qkv_bias, ag::Generator& gen,
                     std::shared_ptr<ag::Generator> dropout_gen, AttentionOptions options = {});
  ag::Tensor forward(const ag::Tensor& x) const;
  // softmax(q k^T / sqrt(head_dim)) with -inf above the diagonal, [B, H, T, T], no graph.
  ag::Tensor weights(const ag::Tensor& x) const;
  // Inference, layer `layer` of the decoder's cache: adds the attention of the normalised
  // rows a [rows, C] into the residual stream c.x. This thread projects and attends its
  // share of the heads, writing their keys and values into the cache, then computes its
  // share of out_proj's columns.
  void infer(InferenceContext& c, int64_t layer, const InferencePass& pass, const float* a, int tid,
             int threads) const;
  void footprint(Footprint& f) const override;
  int64_t head_dim() const { return head_dim_; }
  int64_t num_heads() const { return num_heads_; }
  int64_t num_kv_heads() const { return num_kv_heads_; }
  // The Linears a LoRA target names (nn::lora_target_names); none when it names none here.
  std::vector<Linear*> lora_linears(const std::string& target) const;
  std::shared_ptr<Linear> W_query, W_key, W_value;
  std::shared_ptr<QKVProjection> qkv;  // runs W_query, W_key and W_value
  std::shared_ptr<Linear> out_proj;
  std::shared_ptr<RMSNorm> q_norm, k_norm;  // AttentionOptions::qk_norm; null without

 private:
  ag::Tensor heads_as_attended(const ag::Tensor& projected) const;
  ag::Tensor causal_weights(const ag::Tensor& projected) const;
  ag::Tensor weighted_values(const ag::Tensor& projected, const ag::Tensor& weights) const;
  void project(InferenceContext& c, int64_t layer, const InferencePass& pass, const float* a,
               int64_t h0, int64_t h1, int64_t g0, int64_t g1) const;
  void turn_and_norm(const InferenceContext& c, const InferencePass& pass, float* x, int64_t ld,
                     int64_t h0, int64_t h1, const RMSNorm* norm, int64_t r0 = 0) const;
  void attend(InferenceContext& c, int64_t layer, const InferencePass& pass, int64_t h0, int64_t h1,
              int tid) const;
  void attend_rows(InferenceContext& c, int64_t layer, const InferencePass& pass, int64_t h,
                   int64_t i0, int64_t i1, int tid) const;
  int64_t num_heads_, num_kv_heads_, head_dim_, context_length_;
  double dropout_;
  std::shared_ptr<ag::Generator> dropout_gen_;
  std::shared_ptr<const RopeTables> rope_;
};

}  // namespace nn
