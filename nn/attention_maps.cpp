#include "nn/attention_maps.h"

#include <fmt/format.h>

#include <cmath>

namespace nn {

namespace {

// B = batch, T = tokens, H = heads, D = head_dim, C = H D.
// Part `which` (0 q, 1 k, 2 v) of the fused projection [B, T, 3C], as [B, H, T, D].
ag::Tensor heads_of(const ag::Tensor& projected, int which, int64_t heads) {
  const int64_t B = projected.shape()[0], T = projected.shape()[1];
  const int64_t C = projected.shape()[2] / 3;
  return projected.narrow(2, which * C, C).reshape({B, T, heads, C / heads}).transpose(1, 2);
}

int64_t head_count(const MultiHeadAttention& attn) {
  return attn.W_query->weight.shape()[0] / attn.head_dim();
}

// softmax(q k^T / sqrt(D)) with -inf above the diagonal: [B, H, T, T].
ag::Tensor causal_weights(const ag::Tensor& projected, int64_t heads) {
  const ag::Tensor q = heads_of(projected, 0, heads), k = heads_of(projected, 1, heads);
  const int64_t T = q.shape()[2];
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.shape()[3]));
  const ag::Tensor scores = ag::matmul(q, k.transpose(-1, -2)) * scale;
  return ag::softmax(ag::masked_fill(scores, ag::triu_mask(T, T), -ag::kInf), -1);
}

// The attention sub-layer's output from explicit weights: out_proj(weights @ V).
ag::Tensor attend(const MultiHeadAttention& attn, const ag::Tensor& projected,
                  const ag::Tensor& weights) {
  const int64_t heads = weights.shape()[1];
  const ag::Tensor context = ag::matmul(weights, heads_of(projected, 2, heads));  // [B, H, T, D]
  const int64_t B = context.shape()[0], T = context.shape()[2];
  return attn.out_proj->forward(context.transpose(1, 2).reshape({B, T, -1}));
}

void check_ids(const GPT& model, const std::vector<int64_t>& ids) {
  const GPTConfig& cfg = model.config();
  const int64_t T = static_cast<int64_t>(ids.size());
  if (T == 0 || T > cfg.context_length)
    throw std::invalid_argument(
        fmt::format("attention maps: a sequence of {} tokens; it must be between 1 and the "
                    "model's context_length {}",
                    T, cfg.context_length));
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= cfg.vocab_size)
      throw std::invalid_argument(
          fmt::format("attention maps: token {} has id {}, outside the vocabulary of {}", i, ids[i],
                      cfg.vocab_size));
}

}  // namespace

ag::Tensor attention_weights(const MultiHeadAttention& attn, const ag::Tensor& x) {
  ag::NoGradGuard no_grad;
  return causal_weights(attn.qkv->forward(x), head_count(attn));
}

// GPT::forward with dropout skipped, each block's attention through explicit weights.
AttentionMaps attention_maps(const GPT& model, const std::vector<int64_t>& ids) {
  check_ids(model, ids);
  ag::NoGradGuard no_grad;
  const int64_t T = static_cast<int64_t>(ids.size());
  ag::Tensor h = model.tok_emb->forward(ag::from_vector(ids, {1, T})) +
                 model.pos_emb->forward(ag::arange(T));  // [1, T, C]
  AttentionMaps maps;
  for (const auto& block : *model.blocks) {
    const MultiHeadAttention& attn = *block->attn;
    const ag::Tensor projected = attn.qkv->forward(block->ln1->forward(h));
    const ag::Tensor weights = causal_weights(projected, head_count(attn));  // [1, H, T, T]
    maps.weights.push_back(weights.select(0, 0).contiguous());
    h = h + attend(attn, projected, weights);
    h = h + block->mlp->forward(block->ln2->forward(h));
  }
  h = model.ln_f->forward(h);
  const ag::Tensor head = model.lm_head ? model.lm_head->weight : model.tok_emb->weight;
  maps.logits = ag::matmul(h, head.t()).select(0, 0).contiguous();
  return maps;
}

}  // namespace nn
