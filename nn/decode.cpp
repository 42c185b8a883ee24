#include "nn/decode.h"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "autograd/dtype.h"
#include "nn/decode_kernels.h"

namespace nn {

using decode::share;

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

// The part of an optional bias from `at` on.
const float* from(const float* bias, int64_t at) {
  return bias ? bias + at : nullptr;
}

// A pass's multiply-adds below this run on one thread: a barrier costs about a
// microsecond, and a model this small takes only tens of microseconds a step.
constexpr int64_t kThreadedStepWork = int64_t{1} << 18;

}  // namespace

Decoder::Decoder(const GPT& model, int64_t batch, WeightFormat format)
    : cfg_(model.config()),
      batch_(batch),
      head_dim_(cfg_.d_model / cfg_.n_heads),
      threads_(std::max(1, omp_get_max_threads())) {
  if (batch < 1) throw std::invalid_argument(fmt::format("Decoder: batch {} < 1", batch));
  if (format == WeightFormat::bf16) packed_.reserve(static_cast<size_t>(streamed_weights(cfg_)));
  auto matrix = [&](const ag::Tensor& p, const char* what) {
    return format == WeightFormat::bf16 ? packed(p, what) : decode::Weights{weights_of(p, what)};
  };
  for (const auto& block : *model.blocks) {
    const auto& at = *block->attn;
    layers_.push_back(LayerWeights{
        weights_of(block->ln1->weight, "ln1.weight"), weights_of(block->ln1->bias, "ln1.bias"),
        matrix(at.W_query->weight, "W_query"), matrix(at.W_key->weight, "W_key"),
        matrix(at.W_value->weight, "W_value"), weights_of(at.W_query->bias, "W_query.bias"),
        weights_of(at.W_key->bias, "W_key.bias"), weights_of(at.W_value->bias, "W_value.bias"),
        matrix(at.out_proj->weight, "out_proj"), weights_of(at.out_proj->bias, "out_proj"),
        weights_of(block->ln2->weight, "ln2.weight"), weights_of(block->ln2->bias, "ln2.bias"),
        matrix(block->mlp->fc1->weight, "fc1"), weights_of(block->mlp->fc1->bias, "fc1"),
        matrix(block->mlp->fc2->weight, "fc2"), weights_of(block->mlp->fc2->bias, "fc2")});
  }
  tok_emb_ = weights_of(model.tok_emb->weight, "tok_emb");
  pos_emb_ = weights_of(model.pos_emb->weight, "pos_emb");
  ln_f_w_ = weights_of(model.ln_f->weight, "ln_f.weight");
  ln_f_b_ = weights_of(model.ln_f->bias, "ln_f.bias");
  head_w_ = model.lm_head ? matrix(model.lm_head->weight, "lm_head")
                          : matrix(model.tok_emb->weight, "tok_emb");
  allocate_buffers();
}

// A bfloat16 copy of a weight matrix, appended to packed_ (reserved for all of them, so
// that the pointers stay valid); its float32 values must already be bfloat16 values.
decode::Weights Decoder::packed(const ag::Tensor& p, const char* what) {
  const float* f = weights_of(p, what);
  const auto n = static_cast<size_t>(p.numel());
  for (size_t i = 0; i < n; ++i)
    if (ag::bf16_rounded(f[i]) != f[i] && !std::isnan(f[i]))
      throw std::invalid_argument(
          fmt::format("Decoder: bfloat16 weights need {} rounded to bfloat16 first "
                      "(nn::round_weights_to_bfloat16); element {} is {}",
                      what, i, f[i]));
  const size_t at = packed_.size();
  packed_.resize(at + n);
  ag::to_bfloat16(f, packed_.data() + at, static_cast<int64_t>(n));
  return {f, packed_.data() + at};
}

void Decoder::allocate_buffers() {
  const int64_t T = cfg_.context_length, C = cfg_.d_model, rows = std::max(T, batch_);
  auto floats = [](int64_t n) { return static_cast<size_t>(n); };
  keys_.resize(floats(cfg_.n_layers * batch_ * T * C));
  values_.resize(keys_.size());
  for (auto* buffer : {&x_, &q_, &k_, &ctx_}) buffer->resize(floats(rows * C));
  a_.resize(floats(threads_ * rows * C));  // each thread normalises for itself
  ff_.resize(floats(rows * cfg_.ff_width()));
  scores_.resize(floats(std::max(threads_ * T * T, batch_ * cfg_.n_heads * T)));
  logits_.resize(floats(batch_ * cfg_.vocab_size));
}

int64_t Decoder::streamed_weights(const GPTConfig& cfg) {
  return cfg.n_layers * cfg.d_model * (4 * cfg.d_model + 2 * cfg.ff_width()) +
         cfg.vocab_size * cfg.d_model;
}

void round_weights_to_bfloat16(GPT& model) {
  auto round = [](const ag::Tensor& p) {
    if (!p.defined() || p.dtype() != ag::DType::Float32 || !p.is_contiguous()) return;
    float* f = p.data<float>();
    ag::round_to_bfloat16(f, f, p.numel());
  };
  for (const auto& block : *model.blocks) {
    const auto& at = *block->attn;
    for (const auto* w : {&at.W_query->weight, &at.W_key->weight, &at.W_value->weight,
                          &at.out_proj->weight, &block->mlp->fc1->weight, &block->mlp->fc2->weight})
      round(*w);
  }
  round(model.lm_head ? model.lm_head->weight : model.tok_emb->weight);
}

int64_t Decoder::memory_bytes(const GPTConfig& cfg, int64_t batch, int threads,
                              WeightFormat format) {
  const int64_t T = cfg.context_length, C = cfg.d_model, rows = std::max(T, batch);
  const int64_t floats = 2 * cfg.n_layers * batch * T * C + rows * (4 * C + cfg.ff_width()) +
                         threads * rows * C + std::max(threads * T * T, batch * cfg.n_heads * T) +
                         batch * cfg.vocab_size;
  const int64_t packed = format == WeightFormat::bf16 ? streamed_weights(cfg) : 0;
  return floats * static_cast<int64_t>(sizeof(float)) +
         packed * static_cast<int64_t>(sizeof(ag::bfloat16));
}

float* Decoder::keys(int64_t layer, int64_t b) {
  return keys_.data() + (layer * batch_ + b) * cfg_.d_model * cfg_.context_length;
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

// ------------------------------------------------------------------ a pass

// The query, key and value columns of heads [h0, h1) for every row of the pass: queries
// into q_, keys transposed into the cache (through k_), values into the cache.
void Decoder::project_qkv(const LayerWeights& w, int64_t l, const Pass& pass, const float* a,
                          int64_t h0, int64_t h1) {
  const int64_t C = cfg_.d_model, T = cfg_.context_length, n = pass.rows;
  const int64_t c0 = h0 * head_dim_, cn = (h1 - h0) * head_dim_;
  decode::linear(a, n, C, w.wq.rows_from(c0, C), from(w.bq, c0), cn, q_.data() + c0, C, false);
  decode::linear(a, n, C, w.wk.rows_from(c0, C), from(w.bk, c0), cn, k_.data() + c0, C, false);
  if (pass.prefill) {
    decode::transpose_into(k_.data(), n, C, c0, c0 + cn, keys(l, pass.b), T, 0);
    decode::linear(a, n, C, w.wv.rows_from(c0, C), from(w.bv, c0), cn, values(l, pass.b, 0) + c0, C,
                   false);
    return;
  }
  for (int64_t b = 0; b < n; ++b)
    decode::transpose_into(k_.data() + b * C, 1, C, c0, c0 + cn, keys(l, b), T, pass.position);
  decode::linear(a, n, C, w.wv.rows_from(c0, C), from(w.bv, c0), cn,
                 values(l, 0, pass.position) + c0, T * C, false);
}

// ctx_ of heads [h0, h1): a prefill's n causal queries of row b by GEMMs (thread tid's
// scratch for the scores), or a step's query of each row against its cached positions.
void Decoder::attention(int64_t l, const Pass& pass, int64_t h0, int64_t h1, int tid) {
  const int64_t C = cfg_.d_model, D = head_dim_, T = cfg_.context_length, H = cfg_.n_heads;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  if (!pass.prefill) {
    for (int64_t b = 0; b < pass.rows; ++b)
      for (int64_t h = h0; h < h1; ++h)
        decode::attend(q_.data() + b * C + h * D, keys(l, b) + h * D * T, T,
                       values(l, b, 0) + h * D, C, pass.position + 1, D, scale,
                       scores_.data() + (b * H + h) * T, ctx_.data() + b * C + h * D);
    return;
  }
  const auto N = static_cast<blasint>(pass.rows), Db = static_cast<blasint>(D),
             Cb = static_cast<blasint>(C), Tb = static_cast<blasint>(T);
  float* s = scores_.data() + tid * T * T;
  for (int64_t h = h0; h < h1; ++h) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, Db, scale, q_.data() + h * D, Cb,
                keys(l, pass.b) + h * D * T, Tb, 0.0f, s, N);
    decode::causal_softmax(s, pass.rows);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, Db, N, 1.0f, s, N,
                values(l, pass.b, 0) + h * D, Cb, 0.0f, ctx_.data() + h * D, Cb);
  }
}

// One layer of a pass on thread `tid`: its heads (projections, then attention: no barrier
// between the two), then its share of the other projections' output columns, with
// barriers where the next part needs every column.
void Decoder::layer(const LayerWeights& w, int64_t l, const Pass& pass, int tid, int threads) {
  const int64_t n = pass.rows, C = cfg_.d_model, F = cfg_.ff_width();
  float *x = x_.data(), *a = a_.data() + tid * n * C;  // each thread normalises for itself
  decode::layer_norm(x, n, C, w.ln1_w, w.ln1_b, a);
  const auto [h0, h1] = share(cfg_.n_heads, tid, threads, 1);
  project_qkv(w, l, pass, a, h0, h1);
  attention(l, pass, h0, h1, tid);
  barrier_.wait(threads);
  const auto [c0, c1] = share(C, tid, threads);
  decode::linear(ctx_.data(), n, C, w.wo.rows_from(c0, C), from(w.bo, c0), c1 - c0, x + c0, C,
                 true);
  barrier_.wait(threads);
  decode::layer_norm(x, n, C, w.ln2_w, w.ln2_b, a);
  const auto [f0, f1] = share(F, tid, threads);
  decode::linear(a, n, C, w.w1.rows_from(f0, C), from(w.b1, f0), f1 - f0, ff_.data() + f0, F,
                 false);
  for (int64_t r = 0; r < n; ++r) decode::gelu(ff_.data() + r * F + f0, f1 - f0);
  barrier_.wait(threads);
  decode::linear(ff_.data(), n, F, w.w2.rows_from(c0, F), from(w.b2, c0), c1 - c0, x + c0, C, true);
  barrier_.wait(threads);
}

// The logits: of every row of a step, of the last position of a prefill (into its row);
// each thread a share of the vocabulary.
void Decoder::head(const Pass& pass, int tid, int threads) {
  const int64_t C = cfg_.d_model, V = cfg_.vocab_size;
  const int64_t first = pass.prefill ? pass.rows - 1 : 0, rows = pass.prefill ? 1 : pass.rows;
  float* a = a_.data() + tid * pass.rows * C;
  decode::layer_norm(x_.data() + first * C, rows, C, ln_f_w_, ln_f_b_, a);
  const auto [v0, v1] = share(V, tid, threads);
  float* logits = logits_.data() + (pass.prefill ? pass.b * V : 0);
  decode::linear(a, rows, C, head_w_.rows_from(v0, C), nullptr, v1 - v0, logits + v0, V, false);
}

// Every layer and the head, on the threads when they pay (`pace` times both ways).
void Decoder::run(const Pass& pass, decode::StepPace& pace) {
  const int64_t work =
      pass.rows * cfg_.n_layers * cfg_.d_model * (4 * cfg_.d_model + 2 * cfg_.ff_width());
  const int team = work >= kThreadedStepWork && !omp_in_parallel()
                       ? std::min(threads_, std::max(1, omp_get_max_threads()))
                       : 1;
  const bool threaded =
      team > 1 && (policy_ == Threads::kTeam || (policy_ == Threads::kTimed && pace.threaded()));
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(team) if (threaded)
  {
    const int tid = omp_get_thread_num(), threads = omp_get_num_threads();
    for (int64_t l = 0; l < cfg_.n_layers; ++l)
      layer(layers_[static_cast<size_t>(l)], l, pass, tid, threads);
    head(pass, tid, threads);
  }
  if (team > 1 && policy_ == Threads::kTimed)
    pace.record(threaded,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void Decoder::prefill_row(const int64_t* ids, int64_t b, int64_t n) {
  embed(ids, n, 0, 1);
  run(Pass{true, n, b, 0}, prefill_pace_);
}

// Row `to` of the cache and logits becomes a copy of row `from`.
void Decoder::copy_row(int64_t from, int64_t to) {
  const auto block = static_cast<size_t>(cfg_.context_length * cfg_.d_model);
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    std::copy_n(keys(l, from), block, keys(l, to));
    std::copy_n(values(l, from, 0), block, values(l, to, 0));
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
      copy_row(same, b);
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
  embed(ids.data(), batch_, length_, 0);
  run(Pass{false, batch_, 0, length_}, step_pace_);
  length_ += 1;
  return logits_;
}

}  // namespace nn
