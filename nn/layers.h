#pragma once
// The basic layers, with PyTorch's parameter names and layouts: Linear stores its weight
// [out_features, in_features] and computes x W^T + b. Each layer declares its parameters
// (constructor), its training forward (autograd ops), its inference step on the KV-cached
// decoder's float32 rows (infer, inference_context.h) and what its forward keeps for
// backward and computes (footprint), side by side.
#include <memory>
#include <string>
#include <vector>

#include "nn/config.h"
#include "nn/inference_context.h"
#include "nn/module.h"

namespace nn {

class Dropout;

// Weight and bias drawn as torch.nn.Linear draws them: U(-1/sqrt(in), 1/sqrt(in)).
//
// A Linear can carry a low-rank adapter (LoRA): y = x W^T + b + (alpha / rank) (x A^T) B^T
// with A [rank, in] drawn as a Linear's weight and B [out, rank] zero, so that the adapted
// layer starts out equal to the plain one. A and B are registered as the Linears lora_A
// and lora_B (and its input's Dropout as lora_dropout); freeze() the model first to train
// only them. merge_adapter() folds them into
// W and removes them (the decoder runs plain Linears only).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, ag::Generator& gen);
  ag::Tensor forward(const ag::Tensor& x) const;
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

  // dropout: a rate on the adapter's input while training, its masks drawn from
  // dropout_gen (the model's dropout generator); 0 adds no Dropout.
  void add_adapter(int64_t rank, double alpha, ag::Generator& gen, double dropout = 0,
                   std::shared_ptr<ag::Generator> dropout_gen = nullptr);
  bool has_adapter() const { return lora_A != nullptr; }
  // The adapter as ag::lora_add's term into output columns from col, and its input (x
  // through the adapter's dropout); only with an adapter.
  ag::LoraTerm adapter_term(int64_t col = 0) const;
  ag::Tensor adapter_input(const ag::Tensor& x) const;
  double adapter_scale() const { return adapter_scale_; }  // alpha / rank
  void merge_adapter();

  // Inference: output columns [o0, o1) of rows of x [rows, in] into y (column 0 of the
  // output, row stride ldy), added to y with accumulate.
  void infer(const InferenceContext& c, const float* x, int64_t rows, int64_t o0, int64_t o1,
             float* y, int64_t ldy, bool accumulate) const;
  void bind_inference(InferenceContext& c) const override { c.bind(this, weight, bias); }
  void footprint(Footprint& f) const override;

  ag::Tensor weight;                       // [out_features, in_features]
  ag::Tensor bias;                         // [out_features], undefined when bias == false
  std::shared_ptr<Linear> lora_A, lora_B;  // the adapter, null without one
  std::shared_ptr<Dropout> lora_dropout;   // on the adapter's input; null without
  // Set by a model on the projections whose output is added into its residual stream, for
  // initialisations that scale those down (GPT-2's; see GPT). Plain layers leave it false.
  bool residual_projection = false;

 private:
  int64_t in_, out_;
  double adapter_scale_ = 0;  // alpha / rank
};

// Weight ~ N(0, 1) as torch.nn.Embedding draws it.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, ag::Generator& gen);
  ag::Tensor forward(const ag::Tensor& ids) const;
  ag::Tensor weight;  // [num_embeddings, embedding_dim]
};

// A normalisation over the last dimension, as a GPT's blocks and ln_f use it: LayerNorm or
// RMSNorm (GPTConfig::norm; make_norm builds the one a config names).
class Norm : public Module {
 public:
  virtual ag::Tensor forward(const ag::Tensor& x) const = 0;
  // Inference: rows of x [rows, C] into y, as forward computes them in float32.
  virtual void infer(const InferenceContext& c, const float* x, int64_t rows, float* y) const = 0;
  int64_t dim() const { return dim_; }
  double eps() const { return eps_; }
  ag::Tensor weight;  // [dim], ones

 protected:
  Norm(int64_t dim, double eps);  // registers the weight

 private:
  int64_t dim_;
  double eps_;
};

class LayerNorm : public Norm {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5);
  ag::Tensor forward(const ag::Tensor& x) const override;
  void infer(const InferenceContext& c, const float* x, int64_t rows, float* y) const override;
  void bind_inference(InferenceContext& c) const override { c.bind(this, weight, bias); }
  void footprint(Footprint& f) const override;
  ag::Tensor bias;  // [dim], zeros
};

// x / sqrt(mean(x^2) + eps) * weight: no mean subtracted, no bias (LLaMA's, T5's).
class RMSNorm : public Norm {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-5);
  ag::Tensor forward(const ag::Tensor& x) const override;
  void infer(const InferenceContext& c, const float* x, int64_t rows, float* y) const override;
  void bind_inference(InferenceContext& c) const override { c.bind(this, weight, ag::Tensor()); }
  void footprint(Footprint& f) const override;
};

// The norm GPTConfig::norm names, with epsilon eps (GPTConfig::norm_eps).
std::shared_ptr<Norm> make_norm(NormKind kind, int64_t dim, double eps = 1e-5);

// Zeroes elements with probability p (the dropout rate) while training. Draws its masks
// from a generator it shares with its model, so one saved generator state reproduces every
// dropout mask of a run; a null generator means a private one seeded 0.
class Dropout : public Module {
 public:
  Dropout(double p, std::shared_ptr<ag::Generator> gen);
  ag::Tensor forward(const ag::Tensor& x) const;
  double p() const { return p_; }
  // Its mask (a byte per element) of `elements` per token, when a training forward keeps
  // one; the module that applies the dropout knows the width.
  void save_mask(Footprint& f, double elements) const;

 private:
  double p_;
  std::shared_ptr<ag::Generator> gen_;
};

class GELU : public Module {
 public:
  ag::Tensor forward(const ag::Tensor& x) const { return ag::gelu(x); }
};

// The transformer's feed-forward network, of the kind GPTConfig::mlp names (make_mlp).
class FeedForward : public Module {
 public:
  virtual ag::Tensor forward(const ag::Tensor& x) const = 0;
  // Inference: adds the network of the normalised rows a [rows, C] into the residual
  // stream c.x, this thread's share of the hidden and output columns.
  virtual void infer(InferenceContext& c, const InferencePass& pass, const float* a, int tid,
                     int threads) const = 0;
  // the projection whose output joins the residual stream
  virtual Linear& output_projection() const = 0;
  // The Linears a LoRA target names (nn::lora_target_names: mlp.fc1 the input
  // projections, mlp.fc2 the output's, or one by its Llama name); none when it names none
  // of this network's.
  virtual std::vector<Linear*> lora_linears(const std::string& target) const = 0;
};

// fc2(gelu(fc1(x))), GPT-2's feed-forward network. bias: on both Linears.
class MLP : public FeedForward {
 public:
  MLP(int64_t d_model, int64_t d_ff, ag::Generator& gen, bool bias = true);
  ag::Tensor forward(const ag::Tensor& x) const override;
  void infer(InferenceContext& c, const InferencePass& pass, const float* a, int tid,
             int threads) const override;
  Linear& output_projection() const override { return *fc2; }
  std::vector<Linear*> lora_linears(const std::string& target) const override;
  void footprint(Footprint& f) const override;
  std::shared_ptr<Linear> fc1, fc2;
};

// down_proj(silu(gate_proj(x)) * up_proj(x)), the SwiGLU network of Llama and Qwen, with
// their names. bias: on the three Linears (none in either family).
class SwiGLU : public FeedForward {
 public:
  SwiGLU(int64_t d_model, int64_t d_ff, ag::Generator& gen, bool bias = false);
  ag::Tensor forward(const ag::Tensor& x) const override;
  void infer(InferenceContext& c, const InferencePass& pass, const float* a, int tid,
             int threads) const override;
  Linear& output_projection() const override { return *down_proj; }
  std::vector<Linear*> lora_linears(const std::string& target) const override;
  void footprint(Footprint& f) const override;
  std::shared_ptr<Linear> gate_proj, up_proj, down_proj;
};

// The network cfg.mlp names, d_model -> ff_width() -> d_model, biases as cfg.linear_bias.
std::shared_ptr<FeedForward> make_mlp(const GPTConfig& cfg, ag::Generator& gen);

}  // namespace nn
