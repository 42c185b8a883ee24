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
// in one lora_add (one pass over x for the three), or one after another when each has its
// own dropout on x. On some only: one by one, each adding its own.
ag::Tensor QKVProjection::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  const int adapters = query_->has_adapter() + key_->has_adapter() + value_->has_adapter();
  if (adapters == 1 || adapters == 2)
    return ag::cat({query_->forward(x), key_->forward(x), value_->forward(x)}, -1);
  std::vector<ag::Tensor> weights{query_->weight, key_->weight, value_->weight}, biases;
  if (query_->bias.defined()) biases = {query_->bias, key_->bias, value_->bias};
  ag::Tensor y = ag::linear(x, weights, biases);
  if (adapters == 0) return y;
  const int64_t k_col = query_->out_features(), v_col = k_col + key_->out_features();
  const std::vector<ag::LoraTerm> terms{query_->adapter_term(0), key_->adapter_term(k_col),
                                        value_->adapter_term(v_col)};
  if (!query_->lora_dropout && !key_->lora_dropout && !value_->lora_dropout)
    return ag::lora_add(y, x, terms);
  const Linear* parts[] = {query_.get(), key_.get(), value_.get()};
  for (int i = 0; i < 3; ++i) y = ag::lora_add(y, parts[i]->adapter_input(x), {terms[i]});
  return y;
}

// the one GEMM's weight: the three stacked, a copy its backward keeps
void QKVProjection::footprint(Footprint& f) const {
  const int adapters = query_->has_adapter() + key_->has_adapter() + value_->has_adapter();
  // (under bf16 the stacked copy is the bfloat16 one the Linears' copy_weight counts)
  if (adapters == 1 || adapters == 2 || f.bf16) return;
  const auto in = static_cast<double>(query_->in_features());
  const auto out =
      static_cast<double>(query_->out_features() + key_->out_features() + value_->out_features());
  f.save_once(path(), "the three weights stacked", 4 * in * out);
}

// ------------------------------------------------------------------ MultiHeadAttention
MultiHeadAttention::MultiHeadAttention(int64_t d_in, int64_t d_out, int64_t context_length,
                                       double dropout, int64_t num_heads, bool qkv_bias,
                                       ag::Generator& gen,
                                       std::shared_ptr<ag::Generator> dropout_gen,
                                       AttentionOptions options)
    : num_heads_(num_heads),
      num_kv_heads_(options.num_kv_heads > 0 ? options.num_kv_heads : num_heads),
      context_length_(context_length),
      dropout_(dropout),
      dropout_gen_(std::move(dropout_gen)),
      rope_(std::move(options.rope)) {
  if (num_heads <= 0 || (options.head_dim == 0 && d_out % num_heads != 0))
    throw std::invalid_argument(fmt::format(
        "MultiHeadAttention: d_out ({}) must be divisible by num_heads ({})", d_out, num_heads));
  if (num_kv_heads_ > num_heads || num_heads % num_kv_heads_ != 0)
    throw std::invalid_argument(
        fmt::format("MultiHeadAttention: num_kv_heads ({}) must divide num_heads ({})",
                    num_kv_heads_, num_heads));
  if (!(dropout >= 0.0 && dropout <= 1.0))
    throw std::invalid_argument(
        fmt::format("MultiHeadAttention: dropout must be in [0, 1], got {}", dropout));
  head_dim_ = options.head_dim > 0 ? options.head_dim : d_out / num_heads;
  const int64_t queries = num_heads * head_dim_, keys = num_kv_heads_ * head_dim_;
  W_query = register_module("W_query", std::make_shared<Linear>(d_in, queries, qkv_bias, gen));
  W_key = register_module("W_key", std::make_shared<Linear>(d_in, keys, qkv_bias, gen));
  W_value = register_module("W_value", std::make_shared<Linear>(d_in, keys, qkv_bias, gen));
  qkv = register_module("qkv", std::make_shared<QKVProjection>(W_query, W_key, W_value));
  out_proj =
      register_module("out_proj", std::make_shared<Linear>(queries, d_out, options.out_bias, gen));
  if (options.qk_norm) {
    q_norm = register_module("q_norm", std::make_shared<RMSNorm>(head_dim_, options.norm_eps));
    k_norm = register_module("k_norm", std::make_shared<RMSNorm>(head_dim_, options.norm_eps));
  }
  if (!dropout_gen_) dropout_gen_ = std::make_shared<ag::Generator>(0);
}

std::vector<Linear*> MultiHeadAttention::lora_linears(const std::string& target) const {
  if (target == "attn.qkv") return {W_query.get(), W_key.get(), W_value.get()};
  if (target == "q_proj") return {W_query.get()};
  if (target == "k_proj") return {W_key.get()};
  if (target == "v_proj") return {W_value.get()};
  if (target == "attn.out_proj" || target == "o_proj") return {out_proj.get()};
  if (target == "all-linear") return {W_query.get(), W_key.get(), W_value.get(), out_proj.get()};
  return {};
}

namespace {

// B = batch, T = tokens, H = heads, KV = key/value heads, D = head_dim.
// `heads` heads from column `offset` of the packed projection [B, T, (H + 2 KV) D], as
// [B, heads, T, D].
ag::Tensor heads_of(const ag::Tensor& projected, int64_t offset, int64_t heads, int64_t D) {
  const int64_t B = projected.shape()[0], T = projected.shape()[1];
  return projected.narrow(2, offset, heads * D).reshape({B, T, heads, D}).transpose(1, 2);
}

// [B, KV, T, D] with each head repeated `group` times in place: [B, KV group, T, D], as
// Hugging Face's repeat_kv (for the observer's explicit weights only: the fused op reads
// shared rows)
ag::Tensor repeated(const ag::Tensor& heads, int64_t group) {
  if (group == 1) return heads;
  std::vector<ag::Tensor> parts;
  for (int64_t j = 0; j < heads.shape()[1]; ++j)
    for (int64_t g = 0; g < group; ++g) parts.push_back(heads.narrow(1, j, 1));
  return ag::cat(parts, 1);
}

}  // namespace

// Qwen3's per-head norms of q and k, then RoPE's turn of both: the packed projection
// [B, T, (H + 2 KV) D] as the attention reads it.
ag::Tensor MultiHeadAttention::heads_as_attended(const ag::Tensor& projected) const {
  const int64_t H = num_heads_, KV = num_kv_heads_, D = head_dim_;
  ag::Tensor p = projected;
  if (q_norm) {
    const int64_t B = p.shape()[0], T = p.shape()[1];
    auto normed = [&](const RMSNorm& norm, int64_t offset, int64_t heads) {
      return norm.forward(p.narrow(2, offset, heads * D).reshape({B, T, heads, D}))
          .reshape({B, T, heads * D});
    };
    p = ag::cat(
        {normed(*q_norm, 0, H), normed(*k_norm, H * D, KV), p.narrow(2, (H + KV) * D, KV * D)}, -1);
  }
  if (rope_) p = ag::rope(p, rope_->cos, rope_->sin, H + KV, D);
  return p;
}

// softmax(q k^T / sqrt(D)) with -inf above the diagonal: [B, H, T, T].
ag::Tensor MultiHeadAttention::causal_weights(const ag::Tensor& projected) const {
  const int64_t H = num_heads_, KV = num_kv_heads_, D = head_dim_;
  const ag::Tensor q = heads_of(projected, 0, H, D);
  const ag::Tensor k = repeated(heads_of(projected, H * D, KV, D), H / KV);
  const int64_t T = q.shape()[2];
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const ag::Tensor scores = ag::matmul(q, k.transpose(-1, -2)) * scale;
  return ag::softmax(ag::masked_fill(scores, ag::triu_mask(T, T), -ag::kInf), -1);
}

// weights @ V with the heads side by side again: [B, T, H D].
ag::Tensor MultiHeadAttention::weighted_values(const ag::Tensor& projected,
                                               const ag::Tensor& weights) const {
  const int64_t H = num_heads_, KV = num_kv_heads_, D = head_dim_;
  const ag::Tensor v = repeated(heads_of(projected, (H + KV) * D, KV, D), H / KV);
  const ag::Tensor context = ag::matmul(weights, v);  // [B, H, T, D]
  const int64_t B = context.shape()[0], T = context.shape()[2];
  return context.transpose(1, 2).reshape({B, T, -1});
}

ag::Tensor MultiHeadAttention::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  detail::check_sequence("MultiHeadAttention", x, W_query->in_features(), context_length_);
  // [B, T, (H + 2 KV) D] = [q | k | v]
  const ag::Tensor projected = heads_as_attended(qkv->forward(x));
  if (Observer* observer = ObserverScope::current()) {
    const ag::Tensor weights = causal_weights(projected);
    observer->attention(*this, weights);
    return out_proj->forward(weighted_values(projected, weights));
  }
  const double p = is_training() ? dropout_ : 0.0;
  const ag::Tensor context = ag::causal_self_attention(projected, num_heads_, num_kv_heads_, p,
                                                       dropout_gen_.get());  // [B, T, H D]
  return out_proj->forward(context);
}

ag::Tensor MultiHeadAttention::weights(const ag::Tensor& x) const {
  ag::NoGradGuard no_grad;
  return causal_weights(heads_as_attended(qkv->forward(x)));
}

// the fused op keeps q, k, v and its output by head, and each row's log-sum-exp; out_proj
// keeps its input; scores and weighted values cost 2 T H D multiply-adds each (all T x T
// counted, as nanoGPT counts them); the norms and RoPE's copies of the projection
void MultiHeadAttention::footprint(Footprint& f) const {
  const auto Q = static_cast<double>(W_query->out_features()),
             K = static_cast<double>(W_key->out_features());
  f.save(path(), "q, k, v and output by head, log-sum-exp",
         2 * Q + 2 * K + static_cast<double>(num_heads_));
  f.save(path(), "context (out_proj's input)", Q);
  f.save_bf16_copy(path(), "context", Q);
  if (q_norm) f.save(path(), "q and k before their norms, packed after", 2 * (Q + 2 * K));
  f.forward_flops_per_token += 4.0 * Q * static_cast<double>(f.context);
  f.backward(path(), "gradients of q, k, v, output and qkv", 3 * Q + 4 * K);
  Module::footprint(f);
}

// ------------------------------------------------------------------ inference

// This thread's share of the query heads and of the key/value heads (the same heads when
// they are not grouped, so no barrier between projecting and attending).
void MultiHeadAttention::infer(InferenceContext& c, int64_t layer, const InferencePass& pass,
                               const float* a, int tid, int threads) const {
  const auto [h0, h1] = inference::share(num_heads_, tid, threads, 1);
  const auto [g0, g1] = inference::share(num_kv_heads_, tid, threads, 1);
  project(c, layer, pass, a, h0, h1, g0, g1);
  if (num_kv_heads_ != num_heads_) c.barrier.wait(threads);
  attend(c, layer, pass, h0, h1, tid);
  c.barrier.wait(threads);
  const auto [c0, c1] = inference::share(c.C, tid, threads);
  const int64_t f = pass.outputs_from;
  out_proj->infer(c, c.ctx.data() + f * c.q_width, pass.rows - f, c0, c1, c.x.data() + f * c.C, c.C,
                  true);
  c.barrier.wait(threads);
}

// Heads [h0, h1) of the rows [r0, rows) of x [rows, ld] (queries or keys) normed and
// turned as heads_as_attended does: a prefill's row r at position r, a step's rows at its
// position.
void MultiHeadAttention::turn_and_norm(const InferenceContext& c, const InferencePass& pass,
                                       float* x, int64_t ld, int64_t h0, int64_t h1,
                                       const RMSNorm* norm, int64_t r0) const {
  const int64_t D = head_dim_;
  const float* gain = norm ? c.bound_to(norm).weight.f32 : nullptr;  // looked up once a pass
  const float* cos = rope_ ? rope_->cos.const_data<float>() : nullptr;
  const float* sin = rope_ ? rope_->sin.const_data<float>() : nullptr;
  for (int64_t r = r0; r < pass.rows; ++r) {
    float* row = x + r * ld + h0 * D;
    if (gain) ag::kernels::rms_norm_rows(row, h1 - h0, D, gain, norm->eps(), row);
    if (cos) ag::kernels::rope_rows(row, 1, ld, h1 - h0, D, cos, sin, pass.position_of(r));
  }
}

// The query columns of heads [h0, h1) for the rows of the pass from outputs_from on into
// c.q; the key and value columns of key/value heads [g0, g1) for every row: keys
// transposed into the cache (through c.k), values into the cache.
void MultiHeadAttention::project(InferenceContext& c, int64_t l, const InferencePass& pass,
                                 const float* a, int64_t h0, int64_t h1, int64_t g0,
                                 int64_t g1) const {
  const int64_t Q = c.q_width, K = c.kv_width, T = c.T, n = pass.rows, D = head_dim_;
  const int64_t f = pass.outputs_from;
  W_query->infer(c, a + f * c.C, n - f, h0 * D, h1 * D, c.q.data() + f * Q, Q, false);
  turn_and_norm(c, pass, c.q.data(), Q, h0, h1, q_norm.get(), f);
  W_key->infer(c, a, n, g0 * D, g1 * D, c.k.data(), K, false);
  turn_and_norm(c, pass, c.k.data(), K, g0, g1, k_norm.get());
  const int64_t p = pass.prefilled;
  if (p > 0) inference::transpose_into(c.k.data(), p, K, g0 * D, g1 * D, c.keys(l, pass.b), T, 0);
  if (pass.prefill_only()) {
    W_value->infer(c, a, n, g0 * D, g1 * D, c.values(l, pass.b, 0), K, false);
    return;
  }
  for (int64_t r = p; r < n; ++r)
    inference::transpose_into(c.k.data() + r * K, 1, K, g0 * D, g1 * D, c.keys(l, pass.slot(r)), T,
                              pass.position_of(r));
  if (!pass.slots) {
    W_value->infer(c, a, n, g0 * D, g1 * D, c.values(l, 0, pass.position), T * K, false);
    return;
  }
  // rows at positions of their own (a prefill's among them): the values through c.k (this
  // thread's columns, whose keys are in the cache now), then each into its row's cache
  W_value->infer(c, a, n, g0 * D, g1 * D, c.k.data(), K, false);
  for (int64_t r = 0; r < n; ++r)
    std::copy(c.k.data() + r * K + g0 * D, c.k.data() + r * K + g1 * D,
              c.values(l, pass.slot(r), pass.position_of(r)) + g0 * D);
}

// c.ctx of heads [h0, h1): a prefill's causal queries of row b by GEMMs, then a step's
// query of each row against its cached positions; head h reads key/value head h / group.
// Each thread scores in its own scratch.
void MultiHeadAttention::attend(InferenceContext& c, int64_t l, const InferencePass& pass,
                                int64_t h0, int64_t h1, int tid) const {
  const int64_t Q = c.q_width, K = c.kv_width, D = head_dim_, T = c.T,
                group = num_heads_ / num_kv_heads_;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  for (int64_t h = h0; h < h1; ++h)
    for (int64_t i0 = pass.outputs_from; i0 < pass.prefilled; i0 += c.score_rows)
      attend_rows(c, l, pass, h, i0, std::min(pass.prefilled, i0 + c.score_rows), tid);
  float* scores = c.scores.data() + tid * c.score_rows * T;
  for (int64_t r = std::max(pass.prefilled, pass.outputs_from); r < pass.rows; ++r)
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t b = pass.slot(r);
      inference::attend(c.q.data() + r * Q + h * D, c.keys(l, b) + (h / group) * D * T, T,
                        c.values(l, b, 0) + (h / group) * D, K, pass.position_of(r) + 1, D, scale,
                        scores, c.ctx.data() + r * Q + h * D);
    }
}

// Queries [i0, i1) of a prefill, head h, in thread tid's scratch for [i1 - i0, i1] scores
// (no query sees a later position): the whole window in one block when the scratch holds
// it, so that the products are those of one n x n GEMM.
void MultiHeadAttention::attend_rows(InferenceContext& c, int64_t l, const InferencePass& pass,
                                     int64_t h, int64_t i0, int64_t i1, int tid) const {
  const int64_t Q = c.q_width, K = c.kv_width, D = head_dim_, T = c.T,
                kv = h / (num_heads_ / num_kv_heads_);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  const auto M = static_cast<blasint>(i1 - i0), N = static_cast<blasint>(i1),
             Db = static_cast<blasint>(D), Qb = static_cast<blasint>(Q),
             Kb = static_cast<blasint>(K), Tb = static_cast<blasint>(T);
  float* s = c.scores.data() + tid * c.score_rows * T;
  const ag::OpenBlasCallThreads blas_threads;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, Db, scale,
              c.q.data() + i0 * Q + h * D, Qb, c.keys(l, pass.b) + kv * D * T, Tb, 0.0f, s, N);
  inference::causal_softmax(s, i1 - i0, i1, i0);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, Db, N, 1.0f, s, N,
              c.values(l, pass.b, 0) + kv * D, Kb, 0.0f, c.ctx.data() + i0 * Q + h * D, Qb);
}

}  // namespace nn
