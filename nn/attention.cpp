#include "nn/attention.h"

#include <fmt/format.h>

#include <cmath>

namespace nn {

namespace {

// [B, T, d_in] with T <= context_length, or a clear error naming the module.
void check_sequence(const char* who, const ag::Tensor& x, int64_t d_in, int64_t context_length) {
  if (x.dim() != 3 || x.shape()[2] != d_in)
    throw std::invalid_argument(fmt::format("{}: expected input [batch, tokens, {}], got {}", who,
                                            d_in, ag::shape_str(x.shape())));
  if (x.shape()[1] > context_length)
    throw std::invalid_argument(
        fmt::format("{}: sequence of {} tokens is longer than context_length {}", who, x.shape()[1],
                    context_length));
}

}  // namespace

// ------------------------------------------------------------------ SelfAttention_v1
SelfAttention_v1::SelfAttention_v1(int64_t d_in, int64_t d_out, ag::Generator& gen) {
  W_query = register_parameter("W_query", ag::rand({d_in, d_out}, gen));
  W_key = register_parameter("W_key", ag::rand({d_in, d_out}, gen));
  W_value = register_parameter("W_value", ag::rand({d_in, d_out}, gen));
}

ag::Tensor SelfAttention_v1::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  ag::Tensor keys = ag::matmul(x, W_key), queries = ag::matmul(x, W_query),
             values = ag::matmul(x, W_value);
  ag::Tensor scores = ag::matmul(queries, keys.transpose(-1, -2));  // omega
  ag::Tensor weights =
      ag::softmax(scores / std::sqrt(static_cast<double>(keys.shape().back())), -1);
  return ag::matmul(weights, values);
}

// ------------------------------------------------------------------ SelfAttention_v2
SelfAttention_v2::SelfAttention_v2(int64_t d_in, int64_t d_out, bool qkv_bias, ag::Generator& gen) {
  W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out, qkv_bias, gen));
  W_key = register_module("W_key", std::make_shared<Linear>(d_in, d_out, qkv_bias, gen));
  W_value = register_module("W_value", std::make_shared<Linear>(d_in, d_out, qkv_bias, gen));
}

ag::Tensor SelfAttention_v2::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  ag::Tensor keys = W_key->forward(x), queries = W_query->forward(x), values = W_value->forward(x);
  ag::Tensor scores = ag::matmul(queries, keys.transpose(-1, -2));
  ag::Tensor weights =
      ag::softmax(scores / std::sqrt(static_cast<double>(keys.shape().back())), -1);
  return ag::matmul(weights, values);
}

// ------------------------------------------------------------------ CausalAttention
CausalAttention::CausalAttention(int64_t d_in, int64_t d_out, int64_t context_length_,
                                 double dropout_p, bool qkv_bias, ag::Generator& gen,
                                 std::shared_ptr<ag::Generator> dropout_gen)
    : context_length(context_length_) {
  W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out, qkv_bias, gen));
  W_key = register_module("W_key", std::make_shared<Linear>(d_in, d_out, qkv_bias, gen));
  W_value = register_module("W_value", std::make_shared<Linear>(d_in, d_out, qkv_bias, gen));
  dropout = register_module("dropout", std::make_shared<Dropout>(dropout_p, dropout_gen));
  mask = ag::triu_mask(context_length, context_length, 1);  // a buffer, not a parameter
}

ag::Tensor CausalAttention::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  check_sequence("CausalAttention", x, W_query->weight.shape()[1], context_length);
  const int64_t T = x.shape()[1];
  ag::Tensor keys = W_key->forward(x), queries = W_query->forward(x), values = W_value->forward(x);
  ag::Tensor scores = ag::matmul(queries, keys.transpose(1, 2));
  scores = ag::masked_fill(scores, mask.narrow(0, 0, T).narrow(1, 0, T), -ag::kInf);
  ag::Tensor weights =
      ag::softmax(scores / std::sqrt(static_cast<double>(keys.shape().back())), -1);
  weights = dropout->forward(weights);
  return ag::matmul(weights, values);
}

// ------------------------------------------------------------------ MultiHeadAttentionWrapper
MultiHeadAttentionWrapper::MultiHeadAttentionWrapper(int64_t d_in, int64_t d_out,
                                                     int64_t context_length, double dropout,
                                                     int64_t num_heads, bool qkv_bias,
                                                     ag::Generator& gen,
                                                     std::shared_ptr<ag::Generator> dropout_gen) {
  if (num_heads <= 0)
    throw std::invalid_argument(
        fmt::format("MultiHeadAttentionWrapper: num_heads must be positive, got {}", num_heads));
  heads = register_module("heads", std::make_shared<ModuleList<CausalAttention>>());
  for (int64_t h = 0; h < num_heads; ++h)
    heads->push_back(std::make_shared<CausalAttention>(d_in, d_out, context_length, dropout,
                                                       qkv_bias, gen, dropout_gen));
}

ag::Tensor MultiHeadAttentionWrapper::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  std::vector<ag::Tensor> outs;
  for (const auto& head : *heads) outs.push_back(head->forward(x));
  return ag::cat(outs, -1);
}

// ------------------------------------------------------------------ MultiHeadAttention
MultiHeadAttention::MultiHeadAttention(int64_t d_in, int64_t d_out_, int64_t context_length_,
                                       double dropout_, int64_t num_heads_, bool qkv_bias,
                                       ag::Generator& gen,
                                       std::shared_ptr<ag::Generator> dropout_gen_)
    : d_out(d_out_),
      num_heads(num_heads_),
      context_length(context_length_),
      dropout(dropout_),
      dropout_gen(std::move(dropout_gen_)) {
  if (num_heads <= 0 || d_out % num_heads != 0)
    throw std::invalid_argument(fmt::format(
        "MultiHeadAttention: d_out ({}) must be divisible by num_heads ({})", d_out, num_heads));
  if (!(dropout >= 0.0 && dropout <= 1.0))
    throw std::invalid_argument(
        fmt::format("MultiHeadAttention: dropout must be in [0, 1], got {}", dropout));
  head_dim = d_out / num_heads;
  W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out, qkv_bias, gen));
  W_key = register_module("W_key", std::make_shared<Linear>(d_in, d_out, qkv_bias, gen));
  W_value = register_module("W_value", std::make_shared<Linear>(d_in, d_out, qkv_bias, gen));
  out_proj = register_module("out_proj", std::make_shared<Linear>(d_out, d_out, true, gen));
  if (!dropout_gen) dropout_gen = std::make_shared<ag::Generator>(0);
}

// B = batch, T = tokens, H = heads, D = head_dim
ag::Tensor MultiHeadAttention::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  check_sequence("MultiHeadAttention", x, W_query->weight.shape()[1], context_length);
  // W_query, W_key and W_value applied as one [3 d_out, d_in] projection: one GEMM (and
  // two in backward) instead of three; the heads are split inside the fused kernel
  ag::Tensor qkv;  // [B, T, 3 d_out]
  if (ag::tracking_modules()) {
    // anomaly detection names W_query, W_key or W_value: three projections, each in its scope
    qkv = ag::cat({W_query->forward(x), W_key->forward(x), W_value->forward(x)}, -1);
  } else {
    ag::Tensor w = ag::cat({W_query->weight, W_key->weight, W_value->weight}, 0);
    ag::Tensor b = W_query->bias.defined() ? ag::cat({W_query->bias, W_key->bias, W_value->bias}, 0)
                                           : ag::Tensor();
    qkv = ag::linear(x, w, b);
  }
  const double p = is_training() ? dropout : 0.0;
  ag::Tensor context =
      ag::causal_self_attention(qkv, num_heads, p, dropout_gen.get());  // [B, T, C]
  return out_proj->forward(context);
}

}  // namespace nn
