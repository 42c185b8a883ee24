#include "nn/gpt.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include "autograd/allocator.h"
#include "autograd/checkpoint.h"
#include "autograd/parallel.h"
#include "autograd/quant/block_formats.h"
#include "nn/frozen_base.h"
#include "nn/generation.h"
#include "nn/inference.h"

namespace nn {

std::vector<std::pair<std::string, ag::Shape>> GPTConfig::parameter_shapes() const {
  ShapeOnlyScope description;
  return GPT(*this, 0).named_parameter_shapes();
}

// Blocks are alike, so the count of L blocks is read off descriptions of one and two (a
// hostile file's config may claim 16,384 layers: counting them costs no more than two).
int64_t GPTConfig::num_parameters() const {
  validate();
  ShapeOnlyScope description;
  GPTConfig shallow = *this;
  shallow.n_layers = 1;
  const int64_t one = GPT(shallow, 0).num_parameters();
  if (n_layers == 1) return one;
  shallow.n_layers = 2;
  return one + (n_layers - 1) * (GPT(shallow, 0).num_parameters() - one);
}

namespace {

// GPT-2 initialisation: N(0, 0.02) for Linear, embedding and head weights, scaled down by
// sqrt(2 n_layers) on the projections that write into the residual stream; biases 0;
// norms keep their ones and zeros. Modules are visited in registration order, the order
// of named_parameters(), which fixes the order of the draws.
// A frozen base (frozen_base.h) takes its matrices' draws packed.
void init_gpt2(Module& model, int64_t n_layers, ag::Generator& gen, const FrozenBase* base) {
  ag::NoGradGuard no_grad;
  const double residual_std = 0.02 / std::sqrt(2.0 * n_layers);
  auto draw = [&gen, base](const Module& m, ag::Tensor& p, double std) {
    const std::string name = m.path().empty() ? "weight" : m.path() + ".weight";
    const int64_t width = p.dim() == 2 ? p.shape()[1] : 0;
    place_initial_draws(base, name, p, [&gen, &p, width, std](int64_t rows) {
      return width > 0 ? ag::normal({rows, width}, 0.0, std, gen)
                       : ag::normal(p.shape(), 0.0, std, gen);
    });
    // a packed (or file-given) matrix's float32 chunks given back at once: the cache would
    // keep them until the model is built
    if (p.packing() || p.impl()->storage->nbytes == 0) ag::release_cached_blocks();
  };
  model.for_each_module([&](Module& m) {
    if (auto* linear = dynamic_cast<Linear*>(&m)) {
      draw(m, linear->weight, linear->residual_projection ? residual_std : 0.02);
      if (linear->bias.defined()) ag::fill_(linear->bias, 0.0);
    } else if (auto* embedding = dynamic_cast<Embedding*>(&m)) {
      draw(m, embedding->weight, 0.02);
    } else if (auto* head = dynamic_cast<LMHead*>(&m); head && !head->tied()) {
      draw(m, head->weight, 0.02);
    }
  });
  if (base && base->format) ag::release_cached_blocks();  // the float draws' blocks
}

// LoRA (GPTConfig::lora_*): an adapter on each targeted Linear of every block, block by
// block in registration order, drawn after the base weights, so that a seed gives the same
// base weights with adapters as without.
void add_lora_adapters(const GPTConfig& cfg, ModuleList<TransformerBlock>& blocks,
                       ag::Generator& gen, const std::shared_ptr<ag::Generator>& dropout_gen) {
  const std::vector<std::string> targets = cfg.lora_target_list();
  for (const auto& block : blocks) {
    // in the block's registration order, each Linear once however many targets name it
    std::vector<Linear*> linears;
    block->for_each_module([&](Module& m) {
      auto* linear = dynamic_cast<Linear*>(&m);
      if (!linear || linear->has_adapter()) return;
      for (const std::string& target : targets) {
        const auto named = block->lora_linears(target);
        if (std::find(named.begin(), named.end(), linear) != named.end()) {
          linears.push_back(linear);
          return;
        }
      }
    });
    for (Linear* linear : linears)
      linear->add_adapter(cfg.lora_rank, cfg.lora_alpha, gen, cfg.lora_dropout, dropout_gen);
  }
}

}  // namespace

GPT::GPT(const GPTConfig& cfg, uint64_t seed, const FrozenBase* base)
    : cfg_(cfg), dropout_gen_(std::make_shared<ag::Generator>(seed + ag::kDropoutStream)) {
  cfg_.validate();
  ag::Generator gen(seed);
  // a frozen base's matrices: drawn as always, then drawn again packed by init_gpt2
  std::optional<RedrawnScope> redrawn;
  if (base && (base->format || !base->from_file.empty())) redrawn.emplace();
  tok_emb =
      register_module("tok_emb", std::make_shared<Embedding>(cfg.vocab_size, cfg.d_model, gen));
  if (cfg.position == PositionKind::learned)
    pos_emb = register_module("pos_emb",
                              std::make_shared<Embedding>(cfg.context_length, cfg.d_model, gen));
  else if (!ShapeOnlyScope::active())
    rope_ = rope_tables(cfg);
  drop_emb = register_module("drop_emb", std::make_shared<Dropout>(cfg.dropout, dropout_gen_));
  blocks = register_module("blocks", std::make_shared<ModuleList<TransformerBlock>>());
  for (int64_t i = 0; i < cfg.n_layers; ++i)
    blocks->push_back(std::make_shared<TransformerBlock>(cfg_, gen, dropout_gen_, rope_));
  ln_f = register_module("ln_f", make_norm(cfg.norm, cfg.d_model, cfg.norm_eps));
  if (cfg.num_classes > 0) {  // a classifier: no LM head (tied or not), nothing to drop
    head_name_ = "classifier";
    head_ = register_module<Head>(
        head_name_, std::make_shared<ClassificationHead>(cfg.d_model, cfg.num_classes, gen,
                                                         cfg.pool, cfg.classifier_bias));
  } else {
    head_ = register_module<Head>(
        head_name_, cfg.tie_weights
                        ? std::make_shared<LMHead>(tok_emb->weight, cfg.d_model, cfg.vocab_size)
                        : std::make_shared<LMHead>(cfg.d_model, cfg.vocab_size, gen));
  }
  if (!ShapeOnlyScope::active() && !UninitializedScope::active())
    init_gpt2(*this, cfg.n_layers, gen, base);
  redrawn.reset();  // the adapters' draws are kept
  if (cfg.lora_rank > 0) add_lora_adapters(cfg_, *blocks, gen, dropout_gen_);
}

// B = batch, T = tokens, C = d_model, V = vocab_size
GPT::Output GPT::forward(const ag::Tensor& ids, const ag::Tensor& targets,
                         const ag::Tensor& lengths) const {
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
  ag::Tensor h = tok_emb->forward(ids);  // [B, T, C]
  if (pos_emb) h = h + pos_emb->forward(ag::arange(T));
  h = drop_emb->forward(h);
  for (const auto& block : *blocks) h = run_block(*block, h);
  h = ln_f->forward(h);
  Output out;
  // with targets, a head that can computes the loss without holding the logits (the LM
  // head's [B, T, V] are the largest activation of a large-vocabulary model)
  if (targets.defined()) out.loss = head_->loss_from_states(h, targets);
  if (out.loss.defined()) return out;
  out.logits = head_->forward(h, lengths);
  if (targets.defined()) out.loss = head_->loss(out.logits, targets);
  return out;
}

// A block's forward, or under activation checkpointing the same forward recorded as one
// node that runs it again in backward (its dropout masks drawn again from the same state)
ag::Tensor GPT::run_block(const TransformerBlock& block, const ag::Tensor& h) const {
  if (!checkpoint_blocks_) return block.forward(h);
  return ag::checkpoint([&block](const ag::Tensor& x) { return block.forward(x); }, h,
                        block.trainable_parameters(), {dropout_gen_.get()});
}

// ------------------------------------------------------------------ inference

void GPT::embed(InferenceContext& c, const int64_t* ids, int64_t rows, int64_t position,
                int64_t position_step, const int64_t* positions) const {
  const int64_t C = cfg_.d_model;
  const float *tok = tok_emb->weight.const_data<float>(),
              *pos = pos_emb ? pos_emb->weight.const_data<float>() : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    if (ids[r] < 0 || ids[r] >= cfg_.vocab_size)
      throw std::out_of_range(fmt::format(
          "CachedInference: token id {} is outside the vocabulary of {}", ids[r], cfg_.vocab_size));
    const float* te = tok + ids[r] * C;
    float* x = c.x.data() + r * C;
    if (!pos) {  // RoPE: the attention turns q and k by the position instead
      std::copy_n(te, C, x);
      continue;
    }
    const float* pe = pos + (positions ? positions[r] : position + r * position_step) * C;
    AG_SIMD
    for (int64_t i = 0; i < C; ++i) x[i] = te[i] + pe[i];
  }
}

// The blocks, then the final norm and the head on the rows whose logits are wanted, each
// thread a share of the vocabulary.
void GPT::infer(InferenceContext& c, const InferencePass& pass, int tid, int threads) const {
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    InferencePass layer_pass = pass;
    if (pass.prefilled > 0 && l == cfg_.n_layers - 1) layer_pass.outputs_from = pass.prefilled - 1;
    (*blocks)[static_cast<size_t>(l)].infer(c, l, layer_pass, tid, threads);
  }
  const int64_t C = cfg_.d_model, V = cfg_.vocab_size;
  // a prefill's last row, then the step's rows: logits in the order of the rows, from row 0
  // of c.logits, but a prefill alone's at row b
  const int64_t first = std::max<int64_t>(pass.prefilled - 1, 0), rows = pass.rows - first;
  float* a = c.normed_rows(tid, pass.rows);
  ln_f->infer(c, c.x.data() + first * C, rows, a);
  const auto [v0, v1] = inference::share(V, tid, threads);
  head_->infer(c, a, rows, v0, v1, c.logits.data() + (pass.prefill_only() ? pass.b * V : 0), V);
}

std::vector<GPT::StreamedMatrix> GPT::streamed_matrices() const {
  std::vector<StreamedMatrix> out;
  visit_modules([&](const Module& m) {
    if (auto* linear = dynamic_cast<const Linear*>(&m))
      out.push_back(
          {linear->weight, linear->in_features() * linear->out_features(), linear->out_features()});
  });
  if (head_->streamed_elements() > 0)
    out.push_back(
        {head_->streamed_weight(), head_->streamed_elements(), head_->streamed_outputs()});
  return out;
}

void round_weights_to_bfloat16(GPT& model) {
  for (const auto& [p, elements, outputs] : model.streamed_matrices()) {
    if (p.dtype() != ag::DType::Float32 || !p.is_contiguous()) continue;
    float* f = p.data<float>();
    ag::round_to_bfloat16(f, f, p.numel());
  }
}

void round_weights_to_q8_0(GPT& model) {
  const ag::quant::BlockLayout& q8 = ag::quant::layout(ag::quant::BlockFormat::q8_0);
  for (const auto& [p, elements, outputs] : model.streamed_matrices()) {
    if (p.dtype() != ag::DType::Float32 || !p.is_contiguous()) continue;
    const int64_t rows = p.shape()[0], in = p.numel() / rows;
    if (in % q8.elements != 0)
      throw std::invalid_argument(fmt::format(
          "Q8_0 weights need rows of a multiple of 32 weights; a [{}] matrix has rows of {}",
          fmt::join(p.shape(), ", "), in));
    std::vector<uint8_t> blocks(static_cast<size_t>(ag::quant::row_bytes(q8, p.numel())));
    float* f = p.data<float>();
    ag::quant::quantize_rows(q8, f, rows, in, blocks.data());
    ag::quant::dequantize_row(q8, blocks.data(), p.numel(), f);
  }
}

namespace {

// Rounds the rows of f [rows, in] to l's blocks until quantizing them gives them back
// (kRounds at most: std::runtime_error beyond). Returns the rounds the slowest row took.
int round_rows_to_fixed_blocks(float* f, int64_t rows, int64_t in,
                               const ag::quant::BlockLayout& l) {
  constexpr int kRounds = 8;
  std::atomic<int> most{0};
  ag::detail::parallel_for_items(
      rows, 1, 40.0 * static_cast<double>(in), [&](int64_t a, int64_t b) {
        std::vector<uint8_t> blocks(static_cast<size_t>(ag::quant::row_bytes(l, in)));
        std::vector<float> back(static_cast<size_t>(in));
        for (int64_t r = a; r < b; ++r) {
          float* row = f + r * in;
          int round = 0;
          for (; round <= kRounds; ++round) {
            ag::quant::quantize_row(l, row, in, blocks.data());
            ag::quant::dequantize_row(l, blocks.data(), in, back.data());
            if (round > 0 && std::memcmp(back.data(), row, back.size() * sizeof(float)) == 0) break;
            std::memcpy(row, back.data(), back.size() * sizeof(float));
          }
          int seen = most.load();
          while (round > seen && !most.compare_exchange_weak(seen, round)) {
          }
        }
      });
  if (most.load() > kRounds)
    throw std::runtime_error(
        fmt::format("{} weights: a row's values did not settle in {} rounds", l.ggml, kRounds));
  return most.load();
}

}  // namespace

int round_weights_to_q4_k(GPT& model) {
  int most = 0;
  for (const auto& [p, elements, outputs] : model.streamed_matrices()) {
    if (p.dtype() != ag::DType::Float32 || !p.is_contiguous()) continue;
    const int64_t rows = p.shape()[0], in = p.numel() / rows;
    const ag::quant::BlockLayout& l = *decoder_blocks(WeightFormat::q4_k, in);
    if (in % l.elements != 0)
      throw std::invalid_argument(fmt::format(
          "Q8_0 weights need rows of a multiple of 32 weights; a [{}] matrix has rows of {}",
          fmt::join(p.shape(), ", "), in));
    most = std::max(most, round_rows_to_fixed_blocks(p.data<float>(), rows, in, l));
  }
  return most;
}

// ------------------------------------------------------------------ the rest

// the embeddings' sum, which the first block's norm keeps, its dropout mask, and the ids
// the embedding's backward reads
void GPT::footprint(Footprint& f) const {
  const auto C = static_cast<double>(cfg_.d_model);
  f.save(path(), "embeddings", C);
  f.save(path(), "token ids (int64)", 1, 8);
  if (f.recompute_blocks) {  // the first block's input is the embeddings above
    f.save(path(), "each later block's input, kept for its recomputation",
           C * static_cast<double>(cfg_.n_layers - 1));
    f.recomputed_layers = cfg_.n_layers;
  }
  drop_emb->save_mask(f, C);
  Module::footprint(f);
}

void GPT::replace_head(std::shared_ptr<Head> head, const std::string& name) {
  if (!head) throw std::invalid_argument("GPT::replace_head: no head given");
  replace_module(head_name_, name, head);
  head_ = std::move(head);
  head_name_ = name;
}

ag::Tensor GPT::generate(const ag::Tensor& ids, int64_t max_new_tokens, double temperature,
                         int64_t top_k, ag::Generator& gen) const {
  GenerationOptions o;
  o.max_new_tokens = max_new_tokens;
  o.sampling.temperature = temperature;
  o.sampling.top_k = top_k;
  o.generator = &gen;
  try {
    o.validate(cfg_);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("generate: {}", e.what()));
  }
  const int64_t B = ids.shape()[0], T = ids.shape()[1];
  std::vector<int64_t> flat;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int64_t> row;
    for (int64_t t = 0; t < T; ++t) row.push_back(static_cast<int64_t>(ids.at({b, t})));
    flat.insert(flat.end(), row.begin(), row.end());
    const std::vector<std::vector<int64_t>> fresh = generate_tokens(*this, row, o);
    flat.insert(flat.end(), fresh[0].begin(), fresh[0].end());
  }
  return ag::from_vector(flat, {B, static_cast<int64_t>(flat.size()) / std::max<int64_t>(B, 1)});
}

}  // namespace nn
