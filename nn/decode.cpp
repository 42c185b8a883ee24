#include "nn/decode.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "autograd/dtype.h"
#include "autograd/parallel.h"
#include "autograd/vec_math.h"

namespace nn {

namespace {

// The float32 data of a parameter, which must be contiguous (parameters always are).
const float* weights_of(const ag::Tensor& p, const char* what) {
  if (!p.defined()) return nullptr;
  if (p.dtype() != ag::DType::Float32 || !p.is_contiguous())
    throw std::invalid_argument(fmt::format("Decoder: {} must be contiguous float32, got {} {}",
                                            what, ag::dtype_name(p.dtype()),
                                            ag::shape_str(p.shape())));
  return p.data<float>();
}

// y[rows, out] (row stride ldy) = x[rows, in] W^T + bias, W [out, in]; with accumulate,
// y += the same (a projection into the residual stream). One GEMV for one row.
void linear(const float* x, int64_t rows, int64_t in, const float* W, const float* bias,
            int64_t out, float* y, int64_t ldy, bool accumulate) {
  if (bias)
    for (int64_t r = 0; r < rows; ++r) {
      float* yr = y + r * ldy;
      if (accumulate) {
        AG_SIMD
        for (int64_t i = 0; i < out; ++i) yr[i] += bias[i];
      } else {
        std::memcpy(yr, bias, static_cast<size_t>(out) * sizeof(float));
      }
    }
  const float beta = bias || accumulate ? 1.0f : 0.0f;
  const auto I = static_cast<blasint>(in), O = static_cast<blasint>(out);
  if (rows == 1)
    cblas_sgemv(CblasRowMajor, CblasNoTrans, O, I, 1.0f, W, I, x, 1, beta, y, 1);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows), O, I, 1.0f, x,
                I, W, I, beta, y, static_cast<blasint>(ldy));
}

// LayerNorm of rows of x [rows, C] into y, as ag::layer_norm computes it (statistics in
// double).
void layer_norm(const float* x, int64_t rows, int64_t C, const float* w, const float* b, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * C;
    double m = 0, v = 0;
    AG_SIMD_SUM(m)
    for (int64_t i = 0; i < C; ++i) m += row[i];
    m /= static_cast<double>(C);
    AG_SIMD_SUM(v)
    for (int64_t i = 0; i < C; ++i) v += (row[i] - m) * (row[i] - m);
    v /= static_cast<double>(C);
    const float mt = static_cast<float>(m), rs = static_cast<float>(1.0 / std::sqrt(v + 1e-5));
    float* yr = y + r * C;
    AG_SIMD
    for (int64_t i = 0; i < C; ++i) yr[i] = (row[i] - mt) * rs * w[i] + b[i];
  }
}

// Row i of scores [n, n] becomes the softmax of its first i + 1 entries, the rest 0.
void causal_softmax(float* scores, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float* s = scores + i * n;
    float m = s[0];
    for (int64_t j = 1; j <= i; ++j) m = std::max(m, s[j]);
    float sum = 0;
    AG_SIMD_SUM(sum)
    for (int64_t j = 0; j <= i; ++j) sum += (s[j] = ag::detail::exp_fast(s[j] - m));
    const float inv = 1.0f / sum;
    AG_SIMD
    for (int64_t j = 0; j <= i; ++j) s[j] *= inv;
    std::fill(s + i + 1, s + n, 0.0f);
  }
}

// One query q [D] against t cached positions of one head (keys and values at stride ld):
// out [D] = softmax(scale q . k_j) weighted sum of v_j. s: t floats of scratch.
void attend(const float* q, const float* k, const float* v, int64_t t, int64_t D, int64_t ld,
            float scale, float* s, float* out) {
  float m = -INFINITY;
  for (int64_t j = 0; j < t; ++j) {
    const float* kj = k + j * ld;
    float d = 0;
    AG_SIMD_SUM(d)
    for (int64_t i = 0; i < D; ++i) d += q[i] * kj[i];
    s[j] = d * scale;
    m = std::max(m, s[j]);
  }
  float sum = 0;
  AG_SIMD_SUM(sum)
  for (int64_t j = 0; j < t; ++j) sum += (s[j] = ag::detail::exp_fast(s[j] - m));
  std::fill(out, out + D, 0.0f);
  for (int64_t j = 0; j < t; ++j) {
    const float* vj = v + j * ld;
    const float w = s[j];
    AG_SIMD
    for (int64_t i = 0; i < D; ++i) out[i] += w * vj[i];
  }
  const float inv = 1.0f / sum;
  AG_SIMD
  for (int64_t i = 0; i < D; ++i) out[i] *= inv;
}

}  // namespace

Decoder::Decoder(const GPT& model, int64_t batch)
    : cfg_(model.config()), batch_(batch), head_dim_(cfg_.d_model / cfg_.n_heads) {
  if (batch < 1) throw std::invalid_argument(fmt::format("Decoder: batch {} < 1", batch));
  for (const auto& block : *model.blocks) {
    const auto& at = *block->attn;
    layers_.push_back(LayerWeights{
        weights_of(block->ln1->weight, "ln1.weight"), weights_of(block->ln1->bias, "ln1.bias"),
        weights_of(at.W_query->weight, "W_query"), weights_of(at.W_key->weight, "W_key"),
        weights_of(at.W_value->weight, "W_value"), weights_of(at.W_query->bias, "W_query.bias"),
        weights_of(at.W_key->bias, "W_key.bias"), weights_of(at.W_value->bias, "W_value.bias"),
        weights_of(at.out_proj->weight, "out_proj"), weights_of(at.out_proj->bias, "out_proj"),
        weights_of(block->ln2->weight, "ln2.weight"), weights_of(block->ln2->bias, "ln2.bias"),
        weights_of(block->mlp->fc1->weight, "fc1"), weights_of(block->mlp->fc1->bias, "fc1"),
        weights_of(block->mlp->fc2->weight, "fc2"), weights_of(block->mlp->fc2->bias, "fc2")});
  }
  tok_emb_ = weights_of(model.tok_emb->weight, "tok_emb");
  pos_emb_ = weights_of(model.pos_emb->weight, "pos_emb");
  ln_f_w_ = weights_of(model.ln_f->weight, "ln_f.weight");
  ln_f_b_ = weights_of(model.ln_f->bias, "ln_f.bias");
  head_w_ = model.lm_head ? weights_of(model.lm_head->weight, "lm_head") : tok_emb_;
  const int64_t T = cfg_.context_length, C = cfg_.d_model, rows = std::max(T, batch);
  const auto cache = static_cast<size_t>(cfg_.n_layers * batch * T * C);
  keys_.resize(cache), values_.resize(cache);
  for (auto* buffer : {&x_, &a_, &q_, &ctx_}) buffer->resize(static_cast<size_t>(rows * C));
  ff_.resize(static_cast<size_t>(rows * cfg_.ff_width()));
  scores_.resize(static_cast<size_t>(std::max(T * T, batch * cfg_.n_heads * T)));
  logits_.resize(static_cast<size_t>(batch * cfg_.vocab_size));
}

int64_t Decoder::memory_bytes(const GPTConfig& cfg, int64_t batch) {
  const int64_t T = cfg.context_length, C = cfg.d_model, rows = std::max(T, batch);
  const int64_t floats = 2 * cfg.n_layers * batch * T * C + rows * (4 * C + cfg.ff_width()) +
                         std::max(T * T, batch * cfg.n_heads * T) + batch * cfg.vocab_size;
  return floats * static_cast<int64_t>(sizeof(float));
}

float* Decoder::keys(int64_t layer, int64_t b, int64_t t) {
  return keys_.data() + ((layer * batch_ + b) * cfg_.context_length + t) * cfg_.d_model;
}

float* Decoder::values(int64_t layer, int64_t b, int64_t t) {
  return values_.data() + ((layer * batch_ + b) * cfg_.context_length + t) * cfg_.d_model;
}

// x_[r] = tok_emb[ids[r]] + pos_emb[position + r * position_step]
void Decoder::embed(const int64_t* ids, int64_t rows, int64_t position, int64_t position_step) {
  const int64_t C = cfg_.d_model;
  for (int64_t r = 0; r < rows; ++r) {
    if (ids[r] < 0 || ids[r] >= cfg_.vocab_size)
      throw std::out_of_range(fmt::format("Decoder: token id {} is outside the vocabulary of {}",
                                          ids[r], cfg_.vocab_size));
    const float* te = tok_emb_ + ids[r] * C;
    const float* pe = pos_emb_ + (position + r * position_step) * C;
    float* x = x_.data() + r * C;
    AG_SIMD
    for (int64_t i = 0; i < C; ++i) x[i] = te[i] + pe[i];
  }
}

// a_ = ln2(x_);  x_ += fc2(gelu(fc1(a_)))
void Decoder::mlp(const LayerWeights& w, int64_t rows) {
  const int64_t C = cfg_.d_model, F = cfg_.ff_width();
  layer_norm(x_.data(), rows, C, w.ln2_w, w.ln2_b, a_.data());
  linear(a_.data(), rows, C, w.w1, w.b1, F, ff_.data(), F, false);
  float* h = ff_.data();
  AG_SIMD
  for (int64_t i = 0; i < rows * F; ++i) h[i] = ag::detail::gelu_value(h[i]);
  linear(ff_.data(), rows, F, w.w2, w.b2, C, x_.data(), C, true);
}

// logits [rows, V] of rows of a_ from `row` on (already through ln_f)
void Decoder::head(int64_t row, int64_t rows, float* logits) {
  linear(a_.data() + row * cfg_.d_model, rows, cfg_.d_model, head_w_, nullptr, cfg_.vocab_size,
         logits, cfg_.vocab_size, false);
}

// ctx_ [n, C] of row b's n positions, every head, from q_ and the cache (causal).
void Decoder::attention_prefill(int64_t layer, int64_t b, int64_t n) {
  const int64_t C = cfg_.d_model, D = head_dim_;
  const auto N = static_cast<blasint>(n), Db = static_cast<blasint>(D),
             Cb = static_cast<blasint>(C);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  for (int64_t h = 0; h < cfg_.n_heads; ++h) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, N, Db, scale, q_.data() + h * D, Cb,
                keys(layer, b, 0) + h * D, Cb, 0.0f, scores_.data(), N);
    causal_softmax(scores_.data(), n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, Db, N, 1.0f, scores_.data(), N,
                values(layer, b, 0) + h * D, Cb, 0.0f, ctx_.data() + h * D, Cb);
  }
}

// ctx_ [batch, C]: each row's query at `position` against positions 0..position.
void Decoder::attention_step(int64_t layer, int64_t position) {
  const int64_t C = cfg_.d_model, D = head_dim_, H = cfg_.n_heads, t = position + 1;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  // a thread is worth its start-up only for tens of thousands of multiply-adds
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / (t * D));
  ag::detail::parallel_for(batch_ * H, grain, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t b = p / H, h = p % H;
      attend(q_.data() + b * C + h * D, keys(layer, b, 0) + h * D, values(layer, b, 0) + h * D, t,
             D, C, scale, scores_.data() + p * cfg_.context_length, ctx_.data() + b * C + h * D);
    }
  });
}

void Decoder::prefill_row(const int64_t* ids, int64_t b, int64_t n) {
  const int64_t C = cfg_.d_model;
  embed(ids, n, 0, 1);
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    const LayerWeights& w = layers_[static_cast<size_t>(l)];
    layer_norm(x_.data(), n, C, w.ln1_w, w.ln1_b, a_.data());
    linear(a_.data(), n, C, w.wq, w.bq, C, q_.data(), C, false);
    linear(a_.data(), n, C, w.wk, w.bk, C, keys(l, b, 0), C, false);
    linear(a_.data(), n, C, w.wv, w.bv, C, values(l, b, 0), C, false);
    attention_prefill(l, b, n);
    linear(ctx_.data(), n, C, w.wo, w.bo, C, x_.data(), C, true);
    mlp(w, n);
  }
  const int64_t last = n - 1;
  layer_norm(x_.data() + last * C, 1, C, ln_f_w_, ln_f_b_, a_.data() + last * C);
  head(last, 1, logits_.data() + b * cfg_.vocab_size);
}

void Decoder::copy_row(int64_t from, int64_t to, int64_t n) {
  const auto bytes = static_cast<size_t>(n * cfg_.d_model) * sizeof(float);
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    std::memcpy(keys(l, to, 0), keys(l, from, 0), bytes);
    std::memcpy(values(l, to, 0), values(l, from, 0), bytes);
  }
  const int64_t V = cfg_.vocab_size;
  std::copy_n(logits_.data() + from * V, V, logits_.data() + to * V);
}

std::span<const float> Decoder::prefill(std::span<const int64_t> ids, int64_t n) {
  if (n < 1 || n > cfg_.context_length || static_cast<int64_t>(ids.size()) != batch_ * n)
    throw std::invalid_argument(
        fmt::format("Decoder::prefill: {} ids for {} rows of {} positions (context_length {})",
                    ids.size(), batch_, n, cfg_.context_length));
  length_ = 0;  // a failure below leaves an empty cache, never a half-written one
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t* row = ids.data() + b * n;
    int64_t same = 0;
    while (same < b && !std::equal(row, row + n, ids.data() + same * n)) ++same;
    if (same < b)
      copy_row(same, b, n);
    else
      prefill_row(row, b, n);
  }
  length_ = n;
  return logits_;
}

std::span<const float> Decoder::step(std::span<const int64_t> ids) {
  if (static_cast<int64_t>(ids.size()) != batch_)
    throw std::invalid_argument(
        fmt::format("Decoder::step: {} ids for {} rows", ids.size(), batch_));
  if (length_ == 0 || length_ >= cfg_.context_length)
    throw std::logic_error(fmt::format(
        "Decoder::step: {} positions cached of {}; prefill first, and again past the context",
        length_, cfg_.context_length));
  const int64_t C = cfg_.d_model, B = batch_, p = length_, ld = cfg_.context_length * C;
  embed(ids.data(), B, p, 0);
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    const LayerWeights& w = layers_[static_cast<size_t>(l)];
    layer_norm(x_.data(), B, C, w.ln1_w, w.ln1_b, a_.data());
    linear(a_.data(), B, C, w.wq, w.bq, C, q_.data(), C, false);
    linear(a_.data(), B, C, w.wk, w.bk, C, keys(l, 0, p), ld, false);
    linear(a_.data(), B, C, w.wv, w.bv, C, values(l, 0, p), ld, false);
    attention_step(l, p);
    linear(ctx_.data(), B, C, w.wo, w.bo, C, x_.data(), C, true);
    mlp(w, B);
  }
  layer_norm(x_.data(), B, C, ln_f_w_, ln_f_b_, a_.data());
  head(0, B, logits_.data());
  length_ = p + 1;
  return logits_;
}

}  // namespace nn
