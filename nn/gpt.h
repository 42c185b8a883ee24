#pragma once
// The GPT of ../shared/spec/model.md: token + position embeddings, n_layers pre-LayerNorm
// transformer blocks, a final LayerNorm and a head tied to the token embedding (or not).
// Parameter names and shapes are the spec's, so a state_dict loads into the spec's
// PyTorch module by name.
//
//   nn::GPTConfig cfg;  cfg.vocab_size = 65;
//   nn::GPT model(cfg, /*seed=*/1337);
//   auto out = model.forward(ids, targets);   // ids, targets: int64 [B, T]
//   out.loss.backward();
//   ag::Generator gen(0);
//   ag::Tensor more = model.generate(ids, 100, /*temperature=*/1.0, /*top_k=*/0, gen);
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/attention.h"

namespace nn {

struct GPTConfig {
  int64_t vocab_size = 65;
  int64_t context_length = 64;
  int64_t d_model = 128;
  int64_t n_heads = 4;
  int64_t n_layers = 4;
  int64_t d_ff = 0;  // 0 means 4 * d_model
  double dropout = 0.1;
  bool qkv_bias = false;
  bool tie_weights = true;

  int64_t ff_width() const { return d_ff > 0 ? d_ff : 4 * d_model; }
  // The name and shape of every parameter GPT(cfg) registers, in its order, computed
  // without allocating anything: a checkpoint's datasets are compared with it before a
  // model is built, so a config that lies about its sizes cannot make us allocate them.
  std::vector<std::pair<std::string, ag::Shape>> parameter_shapes() const;
  // What GPT(cfg).num_parameters() will be, without allocating anything, so that a run
  // too large for memory is refused before it is built.
  int64_t num_parameters() const;
  // Throws naming the first inconsistent value (e.g. d_model % n_heads != 0).
  void validate() const;
};

// h = h + drop_resid(attn(ln1(h)));  h = h + drop_resid(mlp(ln2(h)))
// attn.out_proj and mlp.fc2 write into the residual stream, and are marked so
// (Linear::residual_projection) for GPT-2's initialisation.
class TransformerBlock : public Module {
 public:
  TransformerBlock(const GPTConfig& cfg, ag::Generator& gen,
                   std::shared_ptr<ag::Generator> dropout_gen);
  ag::Tensor forward(const ag::Tensor& h) const;
  std::shared_ptr<LayerNorm> ln1, ln2;
  std::shared_ptr<MultiHeadAttention> attn;
  std::shared_ptr<MLP> mlp;
  std::shared_ptr<Dropout> drop_resid;  // on each branch, before it joins the residual stream
};

class GPT : public Module {
 public:
  // Weights initialised GPT-2 style from `seed`; dropout masks drawn from a generator
  // seeded with seed + ag::kDropoutStream (see dropout_generator()).
  GPT(const GPTConfig& cfg, uint64_t seed);

  struct Output {
    ag::Tensor logits;  // [B, T, vocab_size]
    ag::Tensor loss;    // mean cross-entropy, defined when targets are given
  };
  // ids [B, T] int64 with T <= context_length; targets [B, T] int64 or undefined.
  Output forward(const ag::Tensor& ids, const ag::Tensor& targets = ag::Tensor()) const;

  // Appends max_new_tokens sampled ids to ids [B, T], feeding at most context_length of
  // the latest ids each step. temperature 0 is greedy; top_k 0 keeps every token.
  // Runs without recording a graph, in whatever train/eval mode the model is in.
  ag::Tensor generate(const ag::Tensor& ids, int64_t max_new_tokens, double temperature,
                      int64_t top_k, ag::Generator& gen) const;

  const GPTConfig& config() const { return cfg_; }
  ag::Generator& dropout_generator() { return *dropout_gen_; }

  std::shared_ptr<Embedding> tok_emb, pos_emb;
  std::shared_ptr<Dropout> drop_emb;
  std::shared_ptr<ModuleList<TransformerBlock>> blocks;
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<Linear> lm_head;  // null when tie_weights

 private:
  GPTConfig cfg_;
  std::shared_ptr<ag::Generator> dropout_gen_;
};

}  // namespace nn
