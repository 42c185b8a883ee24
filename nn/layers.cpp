#include "nn/layers.h"

#include <fmt/format.h>

#include <cmath>

#include "autograd/vec_math.h"

namespace nn {

// ------------------------------------------------------------------ Linear
Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, ag::Generator& gen)
    : in_(in_features), out_(out_features) {
  if (in_features <= 0 || out_features <= 0)
    throw std::invalid_argument(
        fmt::format("Linear: in_features ({}) and out_features ({}) must be positive", in_features,
                    out_features));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = register_parameter(
      "weight", {out_features, in_features},
      [&] {
        return ag::uniform({out_features, in_features}, -bound, bound, gen);
      },
      true);
  if (with_bias)
    bias = register_parameter("bias", {out_features},
                              [&] { return ag::uniform({out_features}, -bound, bound, gen); });
}

// y = x W^T + b; W^T is a transposed view that BLAS reads in place
ag::Tensor Linear::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  if (x.dim() < 1 || x.shape().back() != in_)
    throw std::invalid_argument(
        fmt::format("Linear: input of shape {} does not end in in_features = {}",
                    ag::shape_str(x.shape()), in_));
  ag::Tensor y = ag::linear(x, weight, bias);
  return has_adapter() ? ag::lora_add(y, adapter_input(x), {adapter_term()}) : y;
}

void Linear::add_adapter(int64_t rank, double alpha, ag::Generator& gen, double dropout,
                         std::shared_ptr<ag::Generator> dropout_gen) {
  if (has_adapter()) throw std::logic_error(fmt::format("Linear {}: has an adapter", path()));
  if (rank < 1 || rank > std::min(in_, out_) || !(alpha > 0 && std::isfinite(alpha)))
    throw std::invalid_argument(fmt::format(
        "Linear {}: adapter rank must be in [1, {}] and alpha positive, got rank {} alpha {}",
        path(), std::min(in_, out_), rank, alpha));
  lora_A = register_module("lora_A", std::make_shared<Linear>(in_, rank, false, gen));
  lora_B = register_module("lora_B", std::make_shared<Linear>(rank, out_, false, gen));
  if (!ShapeOnlyScope::active()) {
    ag::NoGradGuard no_grad;
    ag::fill_(lora_B->weight, 0.0);
  }
  if (dropout > 0)
    lora_dropout =
        register_module("lora_dropout", std::make_shared<Dropout>(dropout, std::move(dropout_gen)));
  adapter_scale_ = alpha / static_cast<double>(rank);
}

ag::LoraTerm Linear::adapter_term(int64_t col) const {
  return {lora_A->weight, lora_B->weight, adapter_scale_, col};
}

ag::Tensor Linear::adapter_input(const ag::Tensor& x) const {
  return lora_dropout ? lora_dropout->forward(x) : x;
}

void Linear::merge_adapter() {
  if (!has_adapter()) return;
  {
    ag::NoGradGuard no_grad;
    const ag::Tensor delta = ag::matmul(lora_B->weight, lora_A->weight) * adapter_scale_;
    ag::copy_(weight, weight + delta.to(weight.dtype()));
  }
  remove_module("lora_A");
  remove_module("lora_B");
  if (lora_dropout) remove_module("lora_dropout");
  lora_A = lora_B = nullptr;
  lora_dropout = nullptr;
}

void Linear::infer(const InferenceContext& c, const float* x, int64_t rows, int64_t o0, int64_t o1,
                   float* y, int64_t ldy, bool accumulate) const {
  const InferenceContext::Bound& b = c.bound_to(this);
  inference::linear(x, rows, in_, b.weight.rows_from(o0, in_), b.bias ? b.bias + o0 : nullptr,
                    o1 - o0, out_, y + o0, ldy, accumulate, c.vector_rows);
}

void Linear::footprint(Footprint& f) const {
  f.forward_flops_per_token += 2.0 * static_cast<double>(in_) * static_cast<double>(out_);
  f.copy_weight(static_cast<double>(in_) * static_cast<double>(out_));
  if (!has_adapter()) return;
  f.save(path(), "adapter's x A^T", static_cast<double>(lora_A->out_features()));
  if (lora_dropout) lora_dropout->save_mask(f, static_cast<double>(in_));
  Module::footprint(f);
}

// ------------------------------------------------------------------ Embedding
Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, ag::Generator& gen) {
  weight = register_parameter(
      "weight", {num_embeddings, embedding_dim},
      [&] {
        return ag::randn({num_embeddings, embedding_dim}, gen);
      },
      true);
}

ag::Tensor Embedding::forward(const ag::Tensor& ids) const {
  auto scope = anomaly_scope();
  return ag::embedding(weight, ids);
}

// ------------------------------------------------------------------ LayerNorm, RMSNorm
Norm::Norm(int64_t dim, double eps) : dim_(dim), eps_(eps) {
  weight = register_parameter("weight", {dim}, [&] { return ag::ones({dim}); });
}

LayerNorm::LayerNorm(int64_t dim, double eps) : Norm(dim, eps) {
  bias = register_parameter("bias", {dim}, [&] { return ag::zeros({dim}); });
}

ag::Tensor LayerNorm::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  return ag::layer_norm(x, weight, bias, eps());
}

void LayerNorm::infer(const InferenceContext& c, const float* x, int64_t rows, float* y) const {
  const InferenceContext::Bound& b = c.bound_to(this);
  ag::kernels::layer_norm_rows(x, rows, dim(), b.weight.f32, b.bias, eps(), y);
}

// its output (kept by the projection that reads it) and each row's mean and 1/std
void LayerNorm::footprint(Footprint& f) const {
  f.save(path(), "output, mean and rstd", static_cast<double>(dim()) + 2);
  f.save_bf16_copy(path(), "output", static_cast<double>(dim()));
}

RMSNorm::RMSNorm(int64_t dim, double eps) : Norm(dim, eps) {}

ag::Tensor RMSNorm::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  return ag::rms_norm(x, weight, eps());
}

void RMSNorm::infer(const InferenceContext& c, const float* x, int64_t rows, float* y) const {
  ag::kernels::rms_norm_rows(x, rows, dim(), c.bound_to(this).weight.f32, eps(), y);
}

void RMSNorm::footprint(Footprint& f) const {
  f.save(path(), "output and rstd", static_cast<double>(dim()) + 1);
  f.save_bf16_copy(path(), "output", static_cast<double>(dim()));
}

std::shared_ptr<Norm> make_norm(NormKind kind, int64_t dim, double eps) {
  if (kind == NormKind::rms_norm) return std::make_shared<RMSNorm>(dim, eps);
  return std::make_shared<LayerNorm>(dim, eps);
}

// ------------------------------------------------------------------ Dropout
Dropout::Dropout(double p, std::shared_ptr<ag::Generator> gen) : p_(p), gen_(std::move(gen)) {
  if (!(p_ >= 0.0 && p_ <= 1.0))
    throw std::invalid_argument(fmt::format("Dropout: p must be in [0, 1], got {}", p_));
  if (!gen_) gen_ = std::make_shared<ag::Generator>(0);
}

ag::Tensor Dropout::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  return ag::dropout(x, p_, is_training(), *gen_);
}

void Dropout::save_mask(Footprint& f, double elements) const {
  if (f.training && p_ > 0) f.save(path(), "mask", elements, 1);
}

// ------------------------------------------------------------------ MLP
MLP::MLP(int64_t d_model, int64_t d_ff, ag::Generator& gen, bool bias) {
  fc1 = register_module("fc1", std::make_shared<Linear>(d_model, d_ff, bias, gen));
  fc2 = register_module("fc2", std::make_shared<Linear>(d_ff, d_model, bias, gen));
}

std::vector<Linear*> MLP::lora_linears(const std::string& target) const {
  if (target == "mlp.fc1") return {fc1.get()};
  if (target == "mlp.fc2") return {fc2.get()};
  if (target == "all-linear") return {fc1.get(), fc2.get()};
  return {};
}

// gelu fused into fc1: one pass over its output instead of two, one node instead of two
ag::Tensor MLP::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  ag::Tensor h;
  if (fc1->has_adapter()) {
    h = ag::gelu(fc1->forward(x));
  } else {
    auto fc1_scope = fc1->anomaly_scope();
    h = ag::linear(x, fc1->weight, fc1->bias, ag::Activation::Gelu);
  }
  return fc2->forward(h);
}

// this thread's hidden columns, then (every hidden column needed) its output columns; the
// rows from pass.outputs_from on (`a` their normalised rows)
void MLP::infer(InferenceContext& c, const InferencePass& pass, const float* a, int tid,
                int threads) const {
  const int64_t n = pass.rows - pass.outputs_from, F = c.F;
  const auto [f0, f1] = inference::share(F, tid, threads);
  fc1->infer(c, a, n, f0, f1, c.hidden.data(), F, false);
  for (int64_t r = 0; r < n; ++r) inference::gelu(c.hidden.data() + r * F + f0, f1 - f0);
  c.barrier.wait(threads);
  const auto [c0, c1] = inference::share(c.C, tid, threads);
  fc2->infer(c, c.hidden.data(), n, c0, c1, c.x.data() + pass.outputs_from * c.C, c.C, true);
  c.barrier.wait(threads);
}

// fc1's GELU derivative (kept in its pre-activation's memory) and its output, which fc2 keeps
void MLP::footprint(Footprint& f) const {
  const auto F = static_cast<double>(fc1->out_features());
  f.save(path(), "GELU derivative and output", 2 * F);
  f.save_bf16_copy(path(), "GELU's output", F);
  f.backward(path(), "gradients of the hidden layer and the input",
             F + static_cast<double>(fc1->in_features()));
  Module::footprint(f);
}

// ------------------------------------------------------------------ SwiGLU
SwiGLU::SwiGLU(int64_t d_model, int64_t d_ff, ag::Generator& gen, bool bias) {
  gate_proj = register_module("gate_proj", std::make_shared<Linear>(d_model, d_ff, bias, gen));
  up_proj = register_module("up_proj", std::make_shared<Linear>(d_model, d_ff, bias, gen));
  down_proj = register_module("down_proj", std::make_shared<Linear>(d_ff, d_model, bias, gen));
}

std::vector<Linear*> SwiGLU::lora_linears(const std::string& target) const {
  if (target == "gate_proj") return {gate_proj.get()};
  if (target == "up_proj") return {up_proj.get()};
  if (target == "down_proj" || target == "mlp.fc2") return {down_proj.get()};
  if (target == "mlp.fc1") return {gate_proj.get(), up_proj.get()};
  if (target == "all-linear") return {gate_proj.get(), up_proj.get(), down_proj.get()};
  return {};
}

ag::Tensor SwiGLU::forward(const ag::Tensor& x) const {
  auto scope = anomaly_scope();
  return down_proj->forward(ag::swiglu(gate_proj->forward(x), up_proj->forward(x)));
}

// this thread's hidden columns (silu(gate) * up, as the training ops compute them), then
// (every hidden column needed) its output columns; the rows from pass.outputs_from on
void SwiGLU::infer(InferenceContext& c, const InferencePass& pass, const float* a, int tid,
                   int threads) const {
  const int64_t n = pass.rows - pass.outputs_from, F = c.F;
  const auto [f0, f1] = inference::share(F, tid, threads);
  gate_proj->infer(c, a, n, f0, f1, c.hidden.data(), F, false);
  up_proj->infer(c, a, n, f0, f1, c.up.data(), F, false);
  for (int64_t r = 0; r < n; ++r) {
    float* h = c.hidden.data() + r * F;
    const float* u = c.up.data() + r * F;
    for (int64_t i = f0; i < f1; ++i) h[i] = ag::detail::silu_value(h[i]) * u[i];
  }
  c.barrier.wait(threads);
  const auto [c0, c1] = inference::share(c.C, tid, threads);
  down_proj->infer(c, c.hidden.data(), n, c0, c1, c.x.data() + pass.outputs_from * c.C, c.C, true);
  c.barrier.wait(threads);
}

// swiglu keeps gate and up, down_proj keeps the product; backward holds the product's
// gradient while swiglu's makes the gate's and up's
void SwiGLU::footprint(Footprint& f) const {
  const auto F = static_cast<double>(gate_proj->out_features());
  f.save(path(), "gate, up and their product", 3 * F);
  f.save_bf16_copy(path(), "the product", F);
  f.backward(path(), "gradients of the hidden layers and the input",
             3 * F + static_cast<double>(gate_proj->in_features()));
  Module::footprint(f);
}

std::shared_ptr<FeedForward> make_mlp(const GPTConfig& cfg, ag::Generator& gen) {
  if (cfg.mlp == MlpKind::swiglu)
    return std::make_shared<SwiGLU>(cfg.d_model, cfg.ff_width(), gen, cfg.linear_bias);
  return std::make_shared<MLP>(cfg.d_model, cfg.ff_width(), gen, cfg.linear_bias);
}

}  // namespace nn
