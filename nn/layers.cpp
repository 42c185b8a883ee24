#include "nn/layers.h"

#include <fmt/format.h>

#include <cmath>

namespace nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, ag::Generator& gen) {
  if (in_features <= 0 || out_features <= 0)
    throw std::invalid_argument(
        fmt::format("Linear: in_features ({}) and out_features ({}) must be positive", in_features,
                    out_features));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight =
      register_parameter("weight", ag::uniform({out_features, in_features}, -bound, bound, gen));
  if (with_bias) bias = register_parameter("bias", ag::uniform({out_features}, -bound, bound, gen));
}

// y = x W^T + b; W^T is a transposed view that BLAS reads in place
ag::Tensor Linear::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  if (x.dim() < 1 || x.shape().back() != weight.shape()[1])
    throw std::invalid_argument(
        fmt::format("Linear: input of shape {} does not end in in_features = {}",
                    ag::shape_str(x.shape()), weight.shape()[1]));
  return ag::linear(x, weight, bias);
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, ag::Generator& gen) {
  weight = register_parameter("weight", ag::randn({num_embeddings, embedding_dim}, gen));
}

ag::Tensor Embedding::forward(const ag::Tensor& ids) const {
  auto scope = anomaly_scope();
  return ag::embedding(weight, ids);
}

LayerNorm::LayerNorm(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", ag::ones({dim}));
  bias = register_parameter("bias", ag::zeros({dim}));
}

ag::Tensor LayerNorm::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  return ag::layer_norm(x, weight, bias, eps_);
}

Dropout::Dropout(double p, std::shared_ptr<ag::Generator> gen) : p_(p), gen_(std::move(gen)) {
  if (!(p_ >= 0.0 && p_ <= 1.0))
    throw std::invalid_argument(fmt::format("Dropout: p must be in [0, 1], got {}", p_));
  if (!gen_) gen_ = std::make_shared<ag::Generator>(0);
}

ag::Tensor Dropout::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  return ag::dropout(x, p_, is_training(), *gen_);
}

MLP::MLP(int64_t d_model, int64_t d_ff, ag::Generator& gen) {
  fc1 = register_module("fc1", std::make_shared<Linear>(d_model, d_ff, true, gen));
  fc2 = register_module("fc2", std::make_shared<Linear>(d_ff, d_model, true, gen));
}

// gelu fused into fc1: one pass over its output instead of two, one node instead of two
ag::Tensor MLP::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  ag::Tensor h;
  {
    auto fc1_scope = fc1->anomaly_scope();
    h = ag::linear(x, fc1->weight, fc1->bias, ag::Activation::Gelu);
  }
  return fc2->forward(h);
}

}  // namespace nn
