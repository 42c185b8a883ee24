#include "nn/attention.h"

#include <cblas.h>
#include <fmt/format.h>

#include <cmath>
#include <utility>
#include <vector>

#include "autograd/threading.h"
#include "nn/observer.h"

namespace nn {

namespace detail {

void check_sequence(const char* who, const ag::Tensor& x, int64_t d_in, int64_t context_length) {
  if (x.dim() != 3 || x.shape()[2] != d_in)
    throw std::invalid_argument(fmt::format("{}: expected input [batch, tokens, {}], got {}", who,
                                            d_in, ag::shape_str(x.shape())));
  if (x.shape()[1] > context_length)
    throw std::invalid_argument(
        fmt::format("{}: sequence of {} tokens is longer than context_length {}", who, x.shape()[1],
                    context_length));
}

}  // namespace detail

// ------------------------------------------------------------------ QKVProjection
QKVProjection::QKVProjection(std::shared_ptr<Linear> query, std::shared_ptr<Linear> key,
                             std::shared_ptr<Linear> value)
    : query_(std::move(query)), key_(std::move(key)), value_(std::move(value)) {}

// Adapters on all three (LoRA's attn.qkv): the fused projection plus their low-rank terms
// side by side. On some only: one by one, each adding its own.
ag::Tensor QKVProjection::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  const int adapters = query_->has_adapter() + key_->has_adapter() + value_->has_adapter();
  if (adapters == 1 || adapters == 2)
    return ag::cat({query_->forward(x), key_->forward(x), value_->forward(x)}, -1);
  std::vector<ag::Tensor> weights{query_->weight, key_->weight, value_->weight}, biases;
  if (query_->bias.defined()) biases = {query_->bias, key_->bias, value_->bias};
  const ag::Tensor y = ag::linear(x, weights, biases);
  if (adapters == 0) return y;
  return y +
         ag::cat({query_->adapter_delta(x), key_->adapter_delta(x), value_->adapter_delta(x)}, -1);
}

// the one GEMM's weight: the three stacked, a copy its backward keeps
void QKVProjection::footprint(Footprint& f) const {
  const int adapters = query_->has_adapter() + key_->has_adapter() + value_->has_adapter();
  if (adapters == 1 || adapters == 2) return;
  const auto in = static_cast<double>(query_->in_features());
  const auto out =
      static_cast<double>(query_->out_features() + key_->out_features() + value_->out_features());
  f.save_once(path(), "the three weights stacked", 4 * in * out);
}

// ------------------------------------------------------------------ MultiHeadAttention
MultiHeadAttention::MultiHeadAttention(int64_t d_in, int64_t d_out, int64_t context_length,
                                       double dropout, int64_t num_heads, bool qkv_bias,
                                       ag::Generator& gen,
                                       std::shared_ptr<ag::Generator> dropout_gen)
    : num_heads_(num_heads),
      context_length_(context_length),
      dropout_(dropout),
      dropout_gen_(std::move(dropout_gen)) {
  if (num_heads <= 0 || d_out % num_heads != 0)
    throw std::invalid_argument(fmt::format(
        "MultiHeadAttention: d_out ({}) must be divisible by num_heads ({})", d_out, num_heads));
  if (!(dropout >= 0.0 && dropout <= 1.0))
    throw std::invalid_argument(
        fmt::format("MultiHeadAttention: dropout must be in [0, 1], got {}", dropout));
  head_dim_ = d_out / num_heads;
  W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out, qkv_bias, gen));
  W_key = register_module("W_key", std::make_shared<Linear>(d_in, d_out, qkv_bias, gen));
  W_value = register_module("W_value", std::make_shared<Linear>(d_in, d_out, qkv_bias, gen));
  qkv = register_module("qkv", std::make_shared<QKVProjection>(W_query, W_key, W_value));
  out_proj = register_module("out_proj", std::make_shared<Linear>(d_out, d_out, true, gen));
  if (!dropout_gen_) dropout_gen_ = std::make_shared<ag::Generator>(0);
}

namespace {

// B = batch, T = tokens, H = heads, D = head_dim, C = H D.
// Part `which` (0 q, 1 k, 2 v) of the fused projection [B, T, 3C], as [B, H, T, D].
ag::Tensor heads_of(const ag::Tensor& projected, int which, int64_t heads) {
  const int64_t B = projected.shape()[0], T = projected.shape()[1];
  const int64_t C = projected.shape()[2] / 3;
  return projected.narrow(2, which * C, C).reshape({B, T, heads, C / heads}).transpose(1, 2);
}

// softmax(q k^T / sqrt(D)) with -inf above the diagonal: [B, H, T, T].
ag::Tensor causal_weights(const ag::Tensor& projected, int64_t heads) {
  const ag::Tensor q = heads_of(projected, 0, heads), k = heads_of(projected, 1, heads);
  const int64_t T = q.shape()[2];
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.shape()[3]));
  const ag::Tensor scores = ag::matmul(q, k.transpose(-1, -2)) * scale;
  return ag::softmax(ag::masked_fill(scores, ag::triu_mask(T, T), -ag::kInf), -1);
}

// weights @ V with the heads side by side again: [B, T, C].
ag::Tensor weighted_values(const ag::Tensor& projected, const ag::Tensor& weights) {
  const int64_t heads = weights.shape()[1];
  const ag::Tensor context = ag::matmul(weights, heads_of(projected, 2, heads));  // [B, H, T, D]
  const int64_t B = context.shape()[0], T = context.shape()[2];
  return context.transpose(1, 2).reshape({B, T, -1});
}

}  // namespace

ag::Tensor MultiHeadAttention::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  detail::check_sequence("MultiHeadAttention", x, W_query->in_features(), context_length_);
  ag::Tensor projected = qkv->forward(x);  // [B, T, 3 H D] = [q | k | v]
  if (Observer* observer = ObserverScope::current()) {
    const ag::Tensor weights = causal_weights(projected, num_heads_);
    observer->attention(*this, weights);
    return out_proj->forward(weighted_values(projected, weights));
  }
  const double p = is_training() ? dropout_ : 0.0;
  ag::Tensor context =
      ag::causal_self_attention(projected, num_heads_, p, dropout_gen_.get());  // [B, T, H D]
  return out_proj->forward(context);
}

ag::Tensor MultiHeadAttention::weights(const ag::Tensor& x) const {
  ag::NoGradGuard no_grad;
  return causal_weights(qkv->forward(x), num_heads_);
}

// the fused op keeps q, k, v and its output by head, and each row's log-sum-exp; out_proj
// keeps its input; scores and weighted values cost 2 T C multiply-adds each (all T x T
// counted, as nanoGPT counts them)
void MultiHeadAttention::footprint(Footprint& f) const {
  const auto C = static_cast<double>(W_query->out_features());
  f.save(path(), "q, k, v and output by head, log-sum-exp",
         4 * C + static_cast<double>(num_heads_));
  f.save(path(), "context (out_proj's input)", C);
  f.forward_flops_per_token += 4.0 * C * static_cast<double>(f.context);
  f.backward(path(), "gradients of q, k, v, output and qkv", 7 * C);
  Module::footprint(f);
}

// ------------------------------------------------------------------ inference

void MultiHeadAttention::infer(InferenceContext& c, int64_t layer, const InferencePass& pass,
                               const float* a, int tid, int threads) const {
  const auto [h0, h1] = inference::share(num_heads_, tid, threads, 1);
  project(c, layer, pass, a, h0, h1);
  attend(c, layer, pass, h0, h1, tid);  // the heads this thread projected: no barrier between
  c.barrier.wait(threads);
  const auto [c0, c1] = inference::share(c.C, tid, threads);
  out_proj->infer(c, c.ctx.data(), pass.rows, c0, c1, c.x.data(), c.C, true);
  c.barrier.wait(threads);
}

// The query, key and value columns of heads [h0, h1) for every row of the pass: queries
// into c.q, keys transposed into the cache (through c.k), values into the cache.
void MultiHeadAttention::project(InferenceContext& c, int64_t l, const InferencePass& pass,
                                 const float* a, int64_t h0, int64_t h1) const {
  const int64_t C = c.C, T = c.T, n = pass.rows, c0 = h0 * head_dim_, c1 = h1 * head_dim_;
  W_query->infer(c, a, n, c0, c1, c.q.data(), C, false);
  W_key->infer(c, a, n, c0, c1, c.k.data(), C, false);
  if (pass.prefill) {
    inference::transpose_into(c.k.data(), n, C, c0, c1, c.keys(l, pass.b), T, 0);
    W_value->infer(c, a, n, c0, c1, c.values(l, pass.b, 0), C, false);
    return;
  }
  for (int64_t b = 0; b < n; ++b)
    inference::transpose_into(c.k.data() + b * C, 1, C, c0, c1, c.keys(l, b), T, pass.position);
  W_value->infer(c, a, n, c0, c1, c.values(l, 0, pass.position), T * C, false);
}

// c.ctx of heads [h0, h1): a prefill's n causal queries of row b by GEMMs, or a step's
// query of each row against its cached positions.
void MultiHeadAttention::attend(InferenceContext& c, int64_t l, const InferencePass& pass,
                                int64_t h0, int64_t h1, int tid) const {
  const int64_t C = c.C, D = head_dim_, T = c.T, H = num_heads_;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  if (!pass.prefill) {
    for (int64_t b = 0; b < pass.rows; ++b)
      for (int64_t h = h0; h < h1; ++h)
        inference::attend(c.q.data() + b * C + h * D, c.keys(l, b) + h * D * T, T,
                          c.values(l, b, 0) + h * D, C, pass.position + 1, D, scale,
                          c.scores.data() + (b * H + h) * T, c.ctx.data() + b * C + h * D);
    return;
  }
  for (int64_t h = h0; h < h1; ++h)
    for (int64_t i0 = 0; i0 < pass.rows; i0 += c.score_rows)
      attend_rows(c, l, pass, h, i0, std::min(pass.rows, i0 + c.score_rows), tid);
}

// Queries [i0, i1) of a prefill, head h, in thread tid's scratch for [i1 - i0, i1] scores
// (no query sees a later position): the whole window in one block when the scratch holds
// it, so that the products are those of one n x n GEMM.
void MultiHeadAttention::attend_rows(InferenceContext& c, int64_t l, const InferencePass& pass,
                                     int64_t h, int64_t i0, int64_t i1, int tid) const {
  const int64_t C = c.C, D = head_dim_, T = c.T;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  const auto M = static_cast<blasint>(i1 - i0), N = static_cast<blasint>(i1),
             Db = static_cast<blasint>(D), Cb = static_cast<blasint>(C),
             Tb = static_cast<blasint>(T);
  float* s = c.scores.data() + tid * c.score_rows * T;
  const ag::OpenBlasCallThreads blas_threads;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, Db, scale,
              c.q.data() + i0 * C + h * D, Cb, c.keys(l, pass.b) + h * D * T, Tb, 0.0f, s, N);
  inference::causal_softmax(s, i1 - i0, i1, i0);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, Db, N, 1.0f, s, N,
              c.values(l, pass.b, 0) + h * D, Cb, 0.0f, c.ctx.data() + i0 * C + h * D, Cb);
}

}  // namespace nn
