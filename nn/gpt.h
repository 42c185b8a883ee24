#pragma once
// The GPT of docs/model.md: token + position embeddings, n_layers transformer blocks
// (block.h), a final norm and a head (head.h: tied to the token embedding, its own, or,
// with cfg.num_classes >= 2, a classifier "classifier" pooling by cfg.pool). Parameter
// names and shapes are docs/model.md's, so a state_dict loads into that page's PyTorch
// module by name.
//
// The model is described once, here and in block.h; that description runs four ways:
//   forward               the training forward (autograd ops), and under an
//                         ObserverScope the attention maps (observer.h)
//   embed / infer         the KV-cached inference step (inference.h drives it)
//   footprint             FLOPs and the tensors kept for backward, per token (the memory plan)
//   under ShapeOnlyScope  the parameter list and count, nothing allocated
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

#include "nn/block.h"
#include "nn/config.h"
#include "nn/head.h"

namespace nn {

struct FrozenBase;

class GPT : public Module {
 public:
  // Weights initialised GPT-2 style from `seed`; dropout masks drawn from a generator
  // seeded with seed + ag::kDropoutStream (see dropout_generator()). With cfg.lora_rank > 0,
  // LoRA adapters on the Linears cfg.lora_targets names, drawn after the base weights (B
  // zero: the model starts as the base). Under a ShapeOnlyScope: the description only.
  // With a frozen base (frozen_base.h), the matrices it packs are drawn into their blocks
  // (build under an UninitializedScope-free path: their float32 storage is never written).
  GPT(const GPTConfig& cfg, uint64_t seed, const FrozenBase* base = nullptr);

  struct Output {
    // [B, T, vocab_size]; a classifier's [B, num_classes]. Undefined when targets are given
    // to a head that computes its loss without them (the LM head: Head::loss_from_states).
    ag::Tensor logits;
    ag::Tensor loss;  // the head's loss, defined when targets are given
  };
  // ids [B, T] int64 with T <= context_length; targets as the head takes them (the LM
  // head: [B, T] int64) or undefined; lengths (int64 [B]) the real tokens of each row of a
  // right-padded batch, for a head that pools (Head::forward), or undefined.
  Output forward(const ag::Tensor& ids, const ag::Tensor& targets = ag::Tensor(),
                 const ag::Tensor& lengths = ag::Tensor()) const;

  // Appends max_new_tokens sampled ids to each row of ids [B, T], through generate()
  // (generation.h: the KV cache, and its window once past the context). temperature 0 is
  // greedy; top_k 0 keeps every token. Rows are generated one after the other, each
  // drawing from `gen`. Records no graph; dropout is off.
  ag::Tensor generate(const ag::Tensor& ids, int64_t max_new_tokens, double temperature,
                      int64_t top_k, ag::Generator& gen) const;

  // Inference (inference.h): ids[r] at position `position + r * position_step` (or, given
  // `positions`, at positions[r]) into the rows of c.x; then every block and the head on
  // them (the logits of a step's rows, or of a prefill's last row, into c.logits).
  void embed(InferenceContext& c, const int64_t* ids, int64_t rows, int64_t position,
             int64_t position_step, const int64_t* positions = nullptr) const;
  void infer(InferenceContext& c, const InferencePass& pass, int tid, int threads) const;
  // The weight matrices decode reads in full for every token (what bfloat16 weights
  // halve), with their element counts (a shape-only description has the counts only).
  struct StreamedMatrix {
    ag::Tensor weight;
    int64_t elements;
    int64_t outputs;  // its rows (known in a shape-only description too)
  };
  std::vector<StreamedMatrix> streamed_matrices() const;

  void footprint(Footprint& f) const override;

  // Puts `head` (registered as `name`) where the head was; the LM head's parameters, if it
  // had its own, go with it.
  void replace_head(std::shared_ptr<Head> head, const std::string& name);
  Head& head() const { return *head_; }

  const GPTConfig& config() const { return cfg_; }
  ag::Generator& dropout_generator() { return *dropout_gen_; }

  // Activation checkpointing (--checkpoint-activations, autograd/checkpoint.h): a training
  // forward keeps each block's input only, and backward runs the block again. The same
  // loss and gradients bit for bit; a block's saved tensors alive one block at a time.
  void set_activation_checkpointing(bool on) { checkpoint_blocks_ = on; }
  bool activation_checkpointing() const { return checkpoint_blocks_; }

  std::shared_ptr<Embedding> tok_emb, pos_emb;  // pos_emb: learned positions only
  std::shared_ptr<Dropout> drop_emb;
  std::shared_ptr<ModuleList<TransformerBlock>> blocks;
  std::shared_ptr<Norm> ln_f;

 private:
  GPTConfig cfg_;
  std::shared_ptr<ag::Generator> dropout_gen_;
  std::shared_ptr<Head> head_;
  std::shared_ptr<const RopeTables> rope_;  // RoPE's tables, shared by the blocks; or null
  std::string head_name_ = "lm_head";
  bool checkpoint_blocks_ = false;

  ag::Tensor run_block(const TransformerBlock& block, const ag::Tensor& h) const;
};

// Rounds, in place, the matrices a decoder's steps read (GPT::streamed_matrices) to
// bfloat16 values (ties to even). After it the model is the one a bfloat16 decoder runs
// exactly, and GPT::forward its reference.
void round_weights_to_bfloat16(GPT& model);
// The same to ggml's Q8_0 blocks (quantized as llama.cpp's reference quantizer does, then
// dequantized: quantizing the values again gives the same blocks): the model a Q8_0 decoder
// runs exactly. Rows not a multiple of 32 weights: std::invalid_argument.
void round_weights_to_q8_0(GPT& model);
// The same to ggml's Q4_K blocks (Q8_0 for a matrix whose rows are not a multiple of 256
// weights: nn::decoder_blocks), each row quantized by llama.cpp's reference and dequantized,
// and again while quantizing the values does not give them back (Q4_K's scale search need
// not find a block's own scales for its values; measured: docs/quantization.md), so that
// the values are the blocks a Q4_K decoder reads. Returns the most rounds a row took (1:
// every row's first quantization gave its values back).
int round_weights_to_q4_k(GPT& model);

}  // namespace nn
