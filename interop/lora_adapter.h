#pragma once
// LoRA adapters apart from their base: what `export --format peft|gguf-lora` writes and
// `import ADAPTER --base BASE.h5` attaches (docs/finetuning.md, "Adapters out and in").
//
//   interop::LoraAdapter a = interop::adapter_of(ckpt);           // a LoRA checkpoint's
//   interop::write_peft(a, "adapter/");                           // peft.h
//   io::Checkpoint run = interop::attach_adapter(base, interop::read_peft("adapter/", cfg));
//
// Other tools put an adapter on their own tensors, some of which hold several of attograd's
// Linears (GPT-2's c_attn and llama.cpp's gpt2 attn_qkv: W_query, W_key and W_value as rows).
// Such a tensor's adapter is the parts' adapters joined exactly: A their A's stacked
// ([k r, in]), B their B's block-diagonal ([sum out, k r]), of rank k r and alpha k alpha, so
// that its scale is still alpha / r. Read back, a block-diagonal adapter splits into the
// parts' own; an adapter of rank r on the whole tensor (another tool's, trained fused) gives
// each part the same A and its rows of B, which computes the same.
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "nn/config.h"
#include "nn/module.h"

namespace interop {

struct LoraAdapter {
  nn::GPTConfig config;   // the model with the adapters: lora_rank, lora_alpha, lora_targets set
  nn::StateDict tensors;  // the adapters only ("blocks.0.attn.W_query.lora_A.weight", ...)
  std::string base_name;  // what the base is called (the run's --init-from), for the files
};

// A checkpoint's adapters; one without (lora_rank 0) is an InteropError saying so.
LoraAdapter adapter_of(const io::Checkpoint& ckpt);

// base (a checkpoint without adapters) with the adapter's tensors attached: its config's lora_*
// set, its weights GPT(config)'s in order, step 0, no optimizer state. A base of another shape
// than the adapter states, or with adapters already, is an InteropError naming the tensor.
io::Checkpoint attach_adapter(const io::Checkpoint& base, const LoraAdapter& adapter);

// One tensor of another tool that an adapter may sit on: its name there (peft: the module;
// GGUF: the base tensor, ".weight" and all), the Linears it is made of (attograd's names
// without ".weight"), their output rows, their input width, and llama.cpp's per-head row
// permutation of its rows (gguf_row_source; 0: none).
struct AdaptedTensor {
  std::string name;
  std::vector<std::string> parts;
  std::vector<int64_t> rows;
  int64_t in = 0;
  int64_t rope_heads = 0;
  int64_t out() const;  // the rows of all parts
};

// Whether an attograd parameter is the weight of a block's Linear ("blocks.3.mlp.fc1.weight").
bool is_block_linear(const std::string& weight_name);

// The adapter on t, its parts' adapters joined as this header's top says, at rank `rank`
// (>= k r: rows of A and columns of B past k r are zeros), A [rank, in] and B [out, rank]
// row-major, B's rows permuted as t's are.
struct JoinedAdapter {
  std::vector<float> a, b;
  int64_t rank = 0;
};
JoinedAdapter join_adapter(const AdaptedTensor& t, const LoraAdapter& adapter, int64_t rank);

// Which of t's parts carry adapters in `adapter`: all (true) or none (false); some but not all
// is an InteropError naming t (its other tool holds them as one tensor).
bool adapted(const AdaptedTensor& t, const LoraAdapter& adapter, const std::string& format);

// An adapter read from another tool's file: for each tensor, A [R, in] and B [out, R] as
// stored there (B's rows in the file's order: split_adapter undoes a permutation), and the
// scale numerator that file gives it.
struct ReadAdapter {
  const AdaptedTensor* tensor;
  int64_t rank;  // R
  double alpha;  // the tensor's scale is alpha / R
  std::vector<float> a, b;
};

// The adapter these tensors make on a base of config `base`, attograd's rank r: each split
// into its parts (block-diagonal of rank >= k r with zeros elsewhere, or rank r shared), alpha
// the one that gives every tensor its scale, the targets those the tensors name (the same
// Linears in every block), spelled as `spelled` (attograd's lora_targets, which its exports
// keep beside the tensors) when that names the same Linears. Errors name `source` and the
// tensor.
LoraAdapter split_adapter(const std::vector<ReadAdapter>& read, const nn::GPTConfig& base,
                          int64_t r, double dropout, const std::string& source,
                          const std::string& spelled = "");

// Where attograd's exports keep its lora_targets (safetensors metadata, a GGUF key).
inline constexpr const char* kLoraTargetsKey = "attograd.lora_targets";

}  // namespace interop
