#include "nn/chapter/attention.h"

#include <fmt/format.h>

#include <cmath>

#include "nn/attention.h"

namespace nn {

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
CausalAttention::CausalAttention(int64_t d_in, int64_t d_out, int64_t context_length,
                                 double dropout, bool qkv_bias, ag::Generator& gen,
                                 std::shared_ptr<ag::Generator> dropout_gen)
    : context_length_(context_length) {
  W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out, qkv_bias, gen));
  W_key = register_module("W_key", std::make_shared<Linear>(d_in, d_out, qkv_bias, gen));
  W_value = register_module("W_value", std::make_shared<Linear>(d_in, d_out, qkv_bias, gen));
  drop_attn = register_module("drop_attn", std::make_shared<Dropout>(dropout, dropout_gen));
  mask = ag::triu_mask(context_length, context_length, 1);  // a buffer, not a parameter
}

ag::Tensor CausalAttention::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  detail::check_sequence("CausalAttention", x, W_query->weight.shape()[1], context_length_);
  const int64_t T = x.shape()[1];
  ag::Tensor keys = W_key->forward(x), queries = W_query->forward(x), values = W_value->forward(x);
  ag::Tensor scores = ag::matmul(queries, keys.transpose(1, 2));
  scores = ag::masked_fill(scores, mask.narrow(0, 0, T).narrow(1, 0, T), -ag::kInf);
  ag::Tensor weights =
      ag::softmax(scores / std::sqrt(static_cast<double>(keys.shape().back())), -1);
  weights = drop_attn->forward(weights);
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

}  // namespace nn
