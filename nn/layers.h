#pragma once
// The basic layers, with PyTorch's parameter names and layouts: Linear stores its weight
// [out_features, in_features] and computes x W^T + b.
#include <memory>

#include "nn/module.h"

namespace nn {

// Weight and bias drawn as torch.nn.Linear draws them: U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, ag::Generator& gen);
  ag::Tensor forward(const ag::Tensor& x) const;
  ag::Tensor weight;  // [out_features, in_features]
  ag::Tensor bias;    // [out_features], undefined when bias == false
  // Set by a model on the projections whose output is added into its residual stream, for
  // initialisations that scale those down (GPT-2's; see GPT). Plain layers leave it false.
  bool residual_projection = false;
};

// Weight ~ N(0, 1) as torch.nn.Embedding draws it.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, ag::Generator& gen);
  ag::Tensor forward(const ag::Tensor& ids) const;
  ag::Tensor weight;  // [num_embeddings, embedding_dim]
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5);
  ag::Tensor forward(const ag::Tensor& x) const;
  double eps() const { return eps_; }
  ag::Tensor weight, bias;  // [dim], ones and zeros

 private:
  double eps_;
};

// Zeroes elements with probability p (the dropout rate) while training. Draws its masks
// from a generator it shares with its model, so one saved generator state reproduces every
// dropout mask of a run; a null generator means a private one seeded 0.
class Dropout : public Module {
 public:
  Dropout(double p, std::shared_ptr<ag::Generator> gen);
  ag::Tensor forward(const ag::Tensor& x) const;
  double p() const { return p_; }

 private:
  double p_;
  std::shared_ptr<ag::Generator> gen_;
};

class GELU : public Module {
 public:
  ag::Tensor forward(const ag::Tensor& x) const { return ag::gelu(x); }
};

// fc2(gelu(fc1(x))), the transformer's feed-forward network.
class MLP : public Module {
 public:
  MLP(int64_t d_model, int64_t d_ff, ag::Generator& gen);
  ag::Tensor forward(const ag::Tensor& x) const;
  std::shared_ptr<Linear> fc1, fc2;
};

}  // namespace nn
