#include "nn/gpt.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "nn/sampling.h"

namespace nn {

void GPTConfig::validate() const {
  auto positive = [](const char* name, int64_t v) {
    if (v <= 0)
      throw std::invalid_argument(fmt::format("config: {} must be positive, got {}", name, v));
  };
  positive("vocab_size", vocab_size);
  positive("context_length", context_length);
  positive("d_model", d_model);
  positive("n_heads", n_heads);
  positive("n_layers", n_layers);
  if (d_ff < 0) throw std::invalid_argument(fmt::format("config: d_ff must be >= 0, got {}", d_ff));
  // Bounds far beyond any model that fits in memory, so that size arithmetic (parameter
  // counts, memory plans) cannot overflow on absurd input.
  auto at_most = [](const char* name, int64_t v, int64_t limit) {
    if (v > limit)
      throw std::invalid_argument(
          fmt::format("config: {} = {} is larger than the supported {}", name, v, limit));
  };
  at_most("vocab_size", vocab_size, int64_t{1} << 24);
  at_most("context_length", context_length, int64_t{1} << 20);
  at_most("d_model", d_model, int64_t{1} << 20);
  at_most("d_ff", d_ff, int64_t{1} << 22);
  at_most("n_layers", n_layers, int64_t{1} << 14);
  if (d_model % n_heads != 0)
    throw std::invalid_argument(
        fmt::format("config: d_model ({}) must be divisible by n_heads ({})", d_model, n_heads));
  if (!(dropout >= 0.0 && dropout < 1.0))
    throw std::invalid_argument(fmt::format("config: dropout must be in [0, 1), got {}", dropout));
}

TransformerBlock::TransformerBlock(const GPTConfig& cfg, ag::Generator& gen,
                                   std::shared_ptr<ag::Generator> dropout_gen) {
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(cfg.d_model));
  attn = register_module("attn", std::make_shared<MultiHeadAttention>(
                                     cfg.d_model, cfg.d_model, cfg.context_length, cfg.dropout,
                                     cfg.n_heads, cfg.qkv_bias, gen, dropout_gen));
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(cfg.d_model));
  mlp = register_module("mlp", std::make_shared<MLP>(cfg.d_model, cfg.ff_width(), gen));
  drop_resid = register_module("drop_resid", std::make_shared<Dropout>(cfg.dropout, dropout_gen));
  attn->out_proj->residual_projection = true;
  mlp->fc2->residual_projection = true;
}

ag::Tensor TransformerBlock::forward(const ag::Tensor& h) const {
  auto scope = anomaly_scope();
  ag::Tensor x = h + drop_resid->forward(attn->forward(ln1->forward(h)));
  return x + drop_resid->forward(mlp->forward(ln2->forward(x)));
}

std::vector<std::pair<std::string, ag::Shape>> GPTConfig::parameter_shapes() const {
  const int64_t C = d_model, F = ff_width();
  std::vector<std::pair<std::string, ag::Shape>> shapes{{"tok_emb.weight", {vocab_size, C}},
                                                        {"pos_emb.weight", {context_length, C}}};
  for (int64_t i = 0; i < n_layers; ++i) {
    const std::string b = fmt::format("blocks.{}.", i);
    auto add = [&](const std::string& name, ag::Shape shape) {
      shapes.emplace_back(b + name, shape);
    };
    add("ln1.weight", {C}), add("ln1.bias", {C});
    for (const char* proj : {"W_query", "W_key", "W_value"}) {
      add(fmt::format("attn.{}.weight", proj), {C, C});
      if (qkv_bias) add(fmt::format("attn.{}.bias", proj), {C});
    }
    add("attn.out_proj.weight", {C, C}), add("attn.out_proj.bias", {C});
    add("ln2.weight", {C}), add("ln2.bias", {C});
    add("mlp.fc1.weight", {F, C}), add("mlp.fc1.bias", {F});
    add("mlp.fc2.weight", {C, F}), add("mlp.fc2.bias", {C});
  }
  shapes.emplace_back("ln_f.weight", ag::Shape{C});
  shapes.emplace_back("ln_f.bias", ag::Shape{C});
  if (!tie_weights) shapes.emplace_back("lm_head.weight", ag::Shape{vocab_size, C});
  return shapes;
}

int64_t GPTConfig::num_parameters() const {
  // in closed form: the list above has n_layers * 16 entries, too many to build for an
  // absurd config that is about to be refused
  const int64_t C = d_model, F = ff_width();
  const int64_t attention = 4 * C * C + (qkv_bias ? 3 * C : 0) + C;  // W_q, W_k, W_v, out_proj
  const int64_t mlp = C * F + F + F * C + C;
  const int64_t block = 2 * 2 * C + attention + mlp;  // two LayerNorms
  return vocab_size * C + context_length * C + n_layers * block + 2 * C +
         (tie_weights ? 0 : vocab_size * C);
}

namespace {

// GPT-2 initialisation: N(0, 0.02) for Linear and embedding weights, scaled down by
// sqrt(2 n_layers) on the projections that write into the residual stream; biases 0;
// LayerNorms keep their ones and zeros. Modules are visited in registration order, the
// order of named_parameters(), which fixes the order of the draws.
void init_gpt2(Module& model, int64_t n_layers, ag::Generator& gen) {
  ag::NoGradGuard no_grad;
  const double residual_std = 0.02 / std::sqrt(2.0 * n_layers);
  auto draw = [&gen](ag::Tensor& p, double std) {
    ag::copy_(p, ag::normal(p.shape(), 0.0, std, gen));
  };
  model.for_each_module([&](Module& m) {
    if (auto* linear = dynamic_cast<Linear*>(&m)) {
      draw(linear->weight, linear->residual_projection ? residual_std : 0.02);
      if (linear->bias.defined()) ag::fill_(linear->bias, 0.0);
    } else if (auto* embedding = dynamic_cast<Embedding*>(&m)) {
      draw(embedding->weight, 0.02);
    }
  });
}

}  // namespace

GPT::GPT(const GPTConfig& cfg, uint64_t seed)
    : cfg_(cfg), dropout_gen_(std::make_shared<ag::Generator>(seed + ag::kDropoutStream)) {
  cfg_.validate();
  ag::Generator gen(seed);
  tok_emb =
      register_module("tok_emb", std::make_shared<Embedding>(cfg.vocab_size, cfg.d_model, gen));
  pos_emb =
      register_module("pos_emb", std::make_shared<Embedding>(cfg.context_length, cfg.d_model, gen));
  drop_emb = register_module("drop_emb", std::make_shared<Dropout>(cfg.dropout, dropout_gen_));
  blocks = register_module("blocks", std::make_shared<ModuleList<TransformerBlock>>());
  for (int64_t i = 0; i < cfg.n_layers; ++i)
    blocks->push_back(std::make_shared<TransformerBlock>(cfg_, gen, dropout_gen_));
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(cfg.d_model));
  if (!cfg.tie_weights)
    lm_head = register_module("lm_head",
                              std::make_shared<Linear>(cfg.d_model, cfg.vocab_size, false, gen));
  init_gpt2(*this, cfg.n_layers, gen);
}

// B = batch, T = tokens, C = d_model, V = vocab_size
GPT::Output GPT::forward(const ag::Tensor& ids, const ag::Tensor& targets) const {
  auto scope = anomaly_scope();
  if (ids.dim() != 2 || ids.dtype() != ag::DType::Int64)
    throw std::invalid_argument(fmt::format("GPT: ids must be int64 [batch, tokens], got {} {}",
                                            ag::dtype_name(ids.dtype()),
                                            ag::shape_str(ids.shape())));
  const int64_t T = ids.shape()[1];
  if (T > cfg_.context_length || T == 0)
    throw std::invalid_argument(
        fmt::format("GPT: sequence of {} tokens; it must be between 1 and context_length {}", T,
                    cfg_.context_length));
  if (targets.defined() && targets.shape() != ids.shape())
    throw std::invalid_argument(fmt::format("GPT: targets of shape {} for ids of shape {}",
                                            ag::shape_str(targets.shape()),
                                            ag::shape_str(ids.shape())));
  ag::Tensor positions = ag::arange(T);
  ag::Tensor h = tok_emb->forward(ids) + pos_emb->forward(positions);  // [B, T, C]
  h = drop_emb->forward(h);
  for (const auto& block : *blocks) h = block->forward(h);
  h = ln_f->forward(h);
  Output out;
  // the tied head is F.linear(h, tok_emb.weight): [B, T, V]
  out.logits = lm_head ? lm_head->forward(h) : ag::linear(h, tok_emb->weight);
  if (targets.defined()) out.loss = ag::cross_entropy(out.logits, targets);
  return out;
}

ag::Tensor GPT::generate(const ag::Tensor& ids, int64_t max_new_tokens, double temperature,
                         int64_t top_k, ag::Generator& gen) const {
  SamplingOptions sampling;
  sampling.temperature = temperature;
  sampling.top_k = top_k;
  try {
    sampling.validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("generate: {}", e.what()));
  }
  TokenSampler sampler(cfg_.vocab_size, sampling);
  ag::NoGradGuard no_grad;
  const int64_t B = ids.shape()[0];
  std::vector<std::vector<int64_t>> rows(B);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < ids.shape()[1]; ++t)
      rows[b].push_back(static_cast<int64_t>(ids.at({b, t})));
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    const int64_t len = static_cast<int64_t>(rows[0].size());
    const int64_t T = std::min(len, cfg_.context_length);
    std::vector<int64_t> window;
    for (const auto& r : rows) window.insert(window.end(), r.end() - T, r.end());
    ag::Tensor logits = forward(ag::from_vector(window, {B, T})).logits.select(1, T - 1);  // [B, V]
    for (int64_t b = 0; b < B; ++b) {
      const std::vector<double> l = logits.select(0, b).to_vector();
      rows[b].push_back(sampler.choose(l, gen));
    }
  }
  std::vector<int64_t> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return ag::from_vector(flat, {B, static_cast<int64_t>(rows[0].size())});
}

}  // namespace nn
