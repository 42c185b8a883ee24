#pragma once
// What a model's description says about a training step, per token: the tensors each
// layer's forward keeps for backward (the memory plan's activation terms) and the FLOPs
// its forward computes. Each module adds its own terms (Module::footprint), named by its
// path with layer numbers replaced by '*', so one term stands for every block:
//
//   nn::Footprint f(/*context=*/64, /*training=*/true);
//   model.footprint(f);
//   f.saved_bytes_per_token();   // the activations one token keeps until backward
//   f.forward_flops_per_token;   // x3 for forward + backward
#include <cstdint>
#include <string>
#include <vector>

namespace nn {

struct Footprint {
  Footprint(int64_t context, bool training, bool bf16 = false)
      : context(context), training(training), bf16(bf16) {}

  int64_t context;  // T: the positions each token attends over (attention's FLOPs grow with it)
  bool training;    // dropout keeps its masks only while training
  // --precision bf16 (autocast): each weight matrix a GEMM reads has a bfloat16 copy, kept
  // from step to step (ag::Bf16WeightCopies), and the GEMMs' inputs are rounded copies
  bool bf16;
  double weight_copy_bytes = 0;  // those copies, once per model
  int64_t batch = 1;             // sequences a step: the rows a chunked loss takes depend on it
  // Activation checkpointing (GPT::set_activation_checkpointing): what the blocks save is
  // held for one block at a time, in its backward's recomputation (`recomputed`, every
  // layer's summed, as `saved`'s are), and each block's input is saved instead.
  bool recompute_blocks = false;
  int64_t recomputed_layers = 1;

  struct Term {
    std::string name;  // "blocks.*.attn: q, k, v and output by head"
    double bytes;      // per token, except per_step's
  };
  std::vector<Term> saved;       // kept from forward until backward, every term at once
  std::vector<Term> recomputed;  // with recompute_blocks: the blocks' terms, all layers summed
  // the largest a layer allocates for a moment while the saved terms are held, one at a time:
  // a backward, or the chunked loss's forward (nn/head.cpp)
  Term backward_peak{"", 0};
  std::vector<Term> per_step;  // kept for backward once per step, whatever the tokens (bytes)
  double forward_flops_per_token = 0;  // multiply-adds x 2, as nanoGPT and PaLM count them

  // `elements` per token of `bytes_each` kept for backward by the module at `path`.
  void save(const std::string& path, const std::string& what, double elements,
            double bytes_each = 4);
  // `bytes` kept for backward once per forward, however many tokens it runs.
  void save_once(const std::string& path, const std::string& what, double bytes);
  // What the backward of the module at `path` allocates while it runs, per token.
  void backward(const std::string& path, const std::string& what, double elements,
                double bytes_each = 4);
  // A weight matrix of `elements` that a GEMM reads: under bf16 its bfloat16 copy.
  void copy_weight(double elements) {
    if (bf16) weight_copy_bytes += 2 * elements;
  }
  // Under bf16: `elements` per token of a GEMM's input, rounded to bfloat16 and kept for
  // its backward beside the float32 values.
  void save_bf16_copy(const std::string& path, const std::string& what, double elements) {
    if (bf16) save(path, what + " rounded to bfloat16", elements, 2);
  }
  double saved_bytes_per_token() const;
  double per_step_bytes() const;
  // one block's share of `recomputed`: what its recomputation holds while it runs
  double recomputed_bytes_per_token() const;
  // saved, a recomputed block and the backward peak: what a step holds at its fullest
  double activation_bytes_per_token() const {
    return saved_bytes_per_token() + recomputed_bytes_per_token() + backward_peak.bytes;
  }
};

}  // namespace nn
