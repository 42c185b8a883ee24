#include "nn/head.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace nn {

void Head::infer(const InferenceContext&, const float*, int64_t, int64_t, int64_t, float*,
                 int64_t) const {
  throw std::logic_error(
      fmt::format("the head '{}' does not predict tokens: the decoder needs an LMHead", path()));
}

// ------------------------------------------------------------------ LMHead
LMHead::LMHead(int64_t d_model, int64_t vocab_size, ag::Generator& gen)
    : tied_(false), d_model_(d_model), vocab_size_(vocab_size) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(d_model));
  weight = register_parameter(
      "weight", {vocab_size, d_model},
      [&] {
        return ag::uniform({vocab_size, d_model}, -bound, bound, gen);
      },
      true);
}

LMHead::LMHead(const ag::Tensor& tied_weight, int64_t d_model, int64_t vocab_size)
    : weight(tied_weight), tied_(true), d_model_(d_model), vocab_size_(vocab_size) {}

// the tied head is F.linear(h, tok_emb.weight): [B, T, V]
ag::Tensor LMHead::forward(const ag::Tensor& h, const ag::Tensor&) const {
  auto scope = anomaly_scope();
  return ag::linear(h, weight);
}

ag::Tensor LMHead::loss(const ag::Tensor& logits, const ag::Tensor& targets) const {
  const ag::Shape& l = logits.shape();
  if (targets.shape() != ag::Shape(l.begin(), l.end() - 1))
    throw std::invalid_argument(fmt::format("GPT: targets of shape {} for ids of shape {}",
                                            ag::shape_str(targets.shape()),
                                            ag::shape_str(ag::Shape(l.begin(), l.end() - 1))));
  return ag::cross_entropy(logits, targets);
}

ag::Tensor LMHead::loss_from_states(const ag::Tensor& h, const ag::Tensor& targets) const {
  auto scope = anomaly_scope();
  const ag::Shape& s = h.shape();
  if (targets.shape() != ag::Shape(s.begin(), s.end() - 1))
    throw std::invalid_argument(fmt::format("GPT: targets of shape {} for ids of shape {}",
                                            ag::shape_str(targets.shape()),
                                            ag::shape_str(ag::Shape(s.begin(), s.end() - 1))));
  return ag::linear_cross_entropy(h, weight, targets);
}

void LMHead::infer(const InferenceContext& c, const float* a, int64_t rows, int64_t v0, int64_t v1,
                   float* y, int64_t ldy) const {
  inference::linear(a, rows, d_model_, c.bound_to(this).weight.rows_from(v0, d_model_), nullptr,
                    v1 - v0, vocab_size_, y + v0, ldy, false, c.vector_rows);
}

// The loss is computed from the hidden states a chunk of rows at a time
// (ag::linear_cross_entropy), which keeps for backward the hidden states' gradient, float32,
// in place of the hidden states themselves (ln_f's output, declared by ln_f, which nothing
// keeps any more: the bfloat16 copy ln_f declares under bf16 is the only term counted that
// is not held). While a chunk runs it holds the chunk's logits turned into their gradient
// (and its bfloat16 copy under bf16) and the chunk's part of the hidden states' gradient:
// a peak that, like a backward's, comes and goes while the saved terms are all held.
void LMHead::footprint(Footprint& f) const {
  const auto V = static_cast<double>(vocab_size_), C = static_cast<double>(d_model_);
  const int64_t tokens = std::max<int64_t>(1, f.batch * f.context);
  const auto rows =
      static_cast<double>(std::min(ag::linear_cross_entropy_rows(vocab_size_), tokens));
  f.backward(path(), "a chunk's logits and their gradient, in forward",
             rows * (V * (f.bf16 ? 6 : 4) + C * 4) / static_cast<double>(tokens), 1);
  f.forward_flops_per_token += 2 * V * C;
  f.copy_weight(V * C);
}

// ------------------------------------------------------------------ ClassificationHead
ClassificationHead::ClassificationHead(int64_t d_model, int64_t num_classes, ag::Generator& gen,
                                       Pooling pool, bool with_bias)
    : d_model_(d_model), num_classes_(num_classes), pool_(pool) {
  if (d_model < 1 || num_classes < 2)
    throw std::invalid_argument(fmt::format(
        "ClassificationHead: d_model must be positive and num_classes at least 2, got {} and {}",
        d_model, num_classes));
  const double bound = 1.0 / std::sqrt(static_cast<double>(d_model));
  weight = register_parameter("weight", {num_classes, d_model}, [&] {
    return ag::uniform({num_classes, d_model}, -bound, bound, gen);
  });
  if (with_bias)
    bias = register_parameter("bias", {num_classes},
                              [&] { return ag::uniform({num_classes}, -bound, bound, gen); });
}

namespace {

// Each row's real tokens, from lengths [B] (every one of them in [1, T]), or T for all.
std::vector<int64_t> row_lengths(const ag::Tensor& lengths, int64_t B, int64_t T) {
  if (!lengths.defined()) return std::vector<int64_t>(static_cast<size_t>(B), T);
  if (lengths.dtype() != ag::DType::Int64 || lengths.shape() != ag::Shape{B})
    throw std::invalid_argument(
        fmt::format("ClassificationHead: lengths must be int64 [{}] (one per row), got {} {}", B,
                    ag::dtype_name(lengths.dtype()), ag::shape_str(lengths.shape())));
  const ag::Tensor c = lengths.contiguous();
  std::vector<int64_t> n(c.data<int64_t>(), c.data<int64_t>() + B);
  for (int64_t b = 0; b < B; ++b)
    if (n[static_cast<size_t>(b)] < 1 || n[static_cast<size_t>(b)] > T)
      throw std::invalid_argument(
          fmt::format("ClassificationHead: row {} has length {}, outside [1, {}] tokens", b,
                      n[static_cast<size_t>(b)], T));
  return n;
}

}  // namespace

// last: row b*T + n_b - 1 of the flattened states, gathered by ag::embedding (whose backward
// scatters the gradient back to that row); mean: a [B, 1, T] matrix of 1/n_b over the real
// positions (0 on padding) times the states
ag::Tensor ClassificationHead::pooled(const ag::Tensor& h, const ag::Tensor& lengths) const {
  if (h.dim() != 3 || h.shape()[2] != d_model_)
    throw std::invalid_argument(
        fmt::format("ClassificationHead: hidden states must be [B, T, {}], got {}", d_model_,
                    ag::shape_str(h.shape())));
  const int64_t B = h.shape()[0], T = h.shape()[1];
  if (pool_ == Pooling::last && !lengths.defined()) return h.select(1, T - 1);
  const std::vector<int64_t> n = row_lengths(lengths, B, T);
  if (pool_ == Pooling::last) {
    std::vector<int64_t> rows(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) rows[static_cast<size_t>(b)] = b * T + n[b] - 1;
    return ag::embedding(h.reshape({B * T, d_model_}), ag::from_vector(rows, {B}));
  }
  std::vector<double> w(static_cast<size_t>(B * T), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < n[b]; ++t)
      w[static_cast<size_t>(b * T + t)] = 1.0 / static_cast<double>(n[b]);
  return ag::matmul(ag::from_vector(w, {B, 1, T}, h.dtype()), h).reshape({B, d_model_});
}

ag::Tensor ClassificationHead::forward(const ag::Tensor& h, const ag::Tensor& lengths) const {
  auto scope = anomaly_scope();
  return ag::linear(pooled(h, lengths), weight, bias);  // [B, num_classes]
}

ag::Tensor ClassificationHead::loss(const ag::Tensor& logits, const ag::Tensor& targets) const {
  if (targets.dim() != 1 || targets.shape()[0] != logits.shape()[0])
    throw std::invalid_argument(
        fmt::format("ClassificationHead: labels of shape {} for logits of shape {} (one label "
                    "per sequence)",
                    ag::shape_str(targets.shape()), ag::shape_str(logits.shape())));
  return ag::cross_entropy(logits, targets);
}

// per sequence, not per token: counted at full width (an upper bound). The pooling keeps
// the gathered row's index (last) or its weights, one per position (mean; the states it
// multiplies are ln_f's output, counted there); its backward spreads the pooled gradient
// over [B, T, C].
void ClassificationHead::footprint(Footprint& f) const {
  const auto K = static_cast<double>(num_classes_), C = static_cast<double>(d_model_);
  f.save(path(), "logits, log-sum-exp and label (int64)", K + 3);
  if (pool_ == Pooling::last) f.save(path(), "pooled row index (int64)", 1, 8);
  if (pool_ == Pooling::mean) f.save(path(), "mean pooling's weights", 1);
  f.backward(path(), "the logits' and the hidden states' gradients", K + C);
  f.forward_flops_per_token += 2 * K * C + (pool_ == Pooling::mean ? 2 * C : 0);
}

}  // namespace nn
