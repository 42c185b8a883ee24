#pragma once
// What attention looked at: the softmax weights of every layer and head for one sequence,
// the matrices the attention chapter prints (rows are queries, columns keys, exactly zero
// above the diagonal, each row summing to 1).
//
//   nn::AttentionMaps maps = nn::attention_maps(model, ids);  // ids: T token ids
//   maps.weights[layer]   // [H, T, T] float32
//   maps.logits           // [T, V]: what GPT::forward predicts at each position
//
// The fused attention (ag::causal_self_attention) never materialises these weights. The
// maps are GPT::forward run with an observer attached (observer.h): each attention layer
// then computes its weights from the same q and k by composed ops (scaled scores, -inf
// above the diagonal, softmax), shows them, and attends with them (weights @ V), so a
// test can hold the product against the fused op and the logits against an unobserved
// forward. Dropout is off whatever mode the model is in, and no graph is recorded.
#include <vector>

#include "nn/gpt.h"

namespace nn {

// B = batch, T = tokens, H = heads. x [B, T, d_in] -> weights [B, H, T, T].
ag::Tensor attention_weights(const MultiHeadAttention& layer, const ag::Tensor& x);

struct AttentionMaps {
  std::vector<ag::Tensor> weights;  // one [H, T, T] per layer
  ag::Tensor logits;                // [T, V]
};

// ids: 1 to context_length token ids, each below the vocabulary size (else
// std::invalid_argument naming the problem).
AttentionMaps attention_maps(const GPT& model, const std::vector<int64_t>& ids);

}  // namespace nn
