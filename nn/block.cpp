#include "nn/block.h"

namespace nn {

TransformerBlock::TransformerBlock(const GPTConfig& cfg, ag::Generator& gen,
                                   std::shared_ptr<ag::Generator> dropout_gen,
                                   std::shared_ptr<const RopeTables> rope) {
  AttentionOptions options;
  options.num_kv_heads = cfg.kv_heads();
  options.head_dim = cfg.head_dim;
  options.out_bias = cfg.linear_bias;
  options.qk_norm = cfg.qk_norm;
  options.norm_eps = cfg.norm_eps;
  options.rope = std::move(rope);
  ln1 = register_module("ln1", make_norm(cfg.norm, cfg.d_model, cfg.norm_eps));
  attn = register_module("attn", std::make_shared<MultiHeadAttention>(
                                     cfg.d_model, cfg.d_model, cfg.context_length, cfg.dropout,
                                     cfg.n_heads, cfg.qkv_bias, gen, dropout_gen, options));
  ln2 = register_module("ln2", make_norm(cfg.norm, cfg.d_model, cfg.norm_eps));
  mlp = register_module("mlp", make_mlp(cfg, gen));
  drop_resid = register_module("drop_resid", std::make_shared<Dropout>(cfg.dropout, dropout_gen));
  attn->out_proj->residual_projection = true;
  mlp->output_projection().residual_projection = true;
}

std::vector<Linear*> TransformerBlock::lora_linears(const std::string& target) const {
  std::vector<Linear*> out = attn->lora_linears(target);
  for (Linear* l : mlp->lora_linears(target)) out.push_back(l);
  return out;
}

ag::Tensor TransformerBlock::forward(const ag::Tensor& h) const {
  auto scope = anomaly_scope();
  ag::Tensor x = h + drop_resid->forward(attn->forward(ln1->forward(h)));
  return x + drop_resid->forward(mlp->forward(ln2->forward(x)));
}

// Each branch adds its output into the residual stream c.x itself (its last projection
// accumulates); every thread normalises all rows for itself, so no barrier is needed
// before a branch. Rows before pass.outputs_from get their keys and values only.
void TransformerBlock::infer(InferenceContext& c, int64_t layer, const InferencePass& pass, int tid,
                             int threads) const {
  float* a = c.normed_rows(tid, pass.rows);
  ln1->infer(c, c.x.data(), pass.rows, a);
  attn->infer(c, layer, pass, a, tid, threads);
  const int64_t f = pass.outputs_from;
  ln2->infer(c, c.x.data() + f * c.C, pass.rows - f, a + f * c.C);
  mlp->infer(c, pass, a + f * c.C, tid, threads);
}

// The residual stream after each branch is kept by the norm that reads it next.
void TransformerBlock::footprint(Footprint& f) const {
  const auto C = static_cast<double>(ln1->dim());
  f.save(path(), "residual stream after each branch", 2 * C);
  drop_resid->save_mask(f, 2 * C);
  Module::footprint(f);
}

}  // namespace nn
