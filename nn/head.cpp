#include "nn/head.h"

#include <fmt/format.h>

#include <cmath>

namespace nn {

void Head::infer(const DecodeContext&, const float*, int64_t, int64_t, int64_t, float*,
                 int64_t) const {
  throw std::logic_error(
      fmt::format("the head '{}' does not predict tokens: the decoder needs an LMHead", path()));
}

// ------------------------------------------------------------------ LMHead
LMHead::LMHead(int64_t d_model, int64_t vocab_size, ag::Generator& gen)
    : tied_(false), d_model_(d_model), vocab_size_(vocab_size) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(d_model));
  weight = register_parameter("weight", {vocab_size, d_model}, [&] {
    return ag::uniform({vocab_size, d_model}, -bound, bound, gen);
  });
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

void LMHead::infer(const DecodeContext& c, const float* a, int64_t rows, int64_t v0, int64_t v1,
                   float* y, int64_t ldy) const {
  decode::linear(a, rows, d_model_, c.bound_to(this).weight.rows_from(v0, d_model_), nullptr,
                 v1 - v0, y + v0, ldy, false);
}

// the logits (cross-entropy keeps them, with each row's log-sum-exp and target) and, in
// backward, their gradient
void LMHead::footprint(Footprint& f) const {
  const auto V = static_cast<double>(vocab_size_), C = static_cast<double>(d_model_);
  f.save(path(), "logits and log-sum-exp", V + 1);
  f.save(path(), "targets (int64)", 1, 8);
  f.backward(path(), "the logits' gradient", V);
  f.forward_flops_per_token += 2 * V * C;
}

// ------------------------------------------------------------------ ClassificationHead
ClassificationHead::ClassificationHead(int64_t d_model, int64_t num_classes, ag::Generator& gen)
    : d_model_(d_model), num_classes_(num_classes) {
  if (d_model < 1 || num_classes < 2)
    throw std::invalid_argument(fmt::format(
        "ClassificationHead: d_model must be positive and num_classes at least 2, got {} and {}",
        d_model, num_classes));
  const double bound = 1.0 / std::sqrt(static_cast<double>(d_model));
  weight = register_parameter("weight", {num_classes, d_model}, [&] {
    return ag::uniform({num_classes, d_model}, -bound, bound, gen);
  });
  bias = register_parameter("bias", {num_classes},
                            [&] { return ag::uniform({num_classes}, -bound, bound, gen); });
}

ag::Tensor ClassificationHead::forward(const ag::Tensor& h, const ag::Tensor&) const {
  auto scope = anomaly_scope();
  const ag::Tensor last = h.select(1, h.shape()[1] - 1);  // [B, C]
  return ag::linear(last, weight, bias);
}

ag::Tensor ClassificationHead::loss(const ag::Tensor& logits, const ag::Tensor& targets) const {
  if (targets.dim() != 1 || targets.shape()[0] != logits.shape()[0])
    throw std::invalid_argument(
        fmt::format("ClassificationHead: labels of shape {} for logits of shape {} (one label "
                    "per sequence)",
                    ag::shape_str(targets.shape()), ag::shape_str(logits.shape())));
  return ag::cross_entropy(logits, targets);
}

// per sequence, not per token: counted at full width (an upper bound)
void ClassificationHead::footprint(Footprint& f) const {
  const auto K = static_cast<double>(num_classes_);
  f.save(path(), "logits, log-sum-exp and label (int64)", K + 3);
  f.backward(path(), "the logits' gradient", K);
  f.forward_flops_per_token += 2 * K * static_cast<double>(d_model_);
}

}  // namespace nn
