#pragma once
// A frozen base held packed (docs/quantization.md, "Training over a quantized base"): which
// of a model's frozen weight matrices are kept as blocks of a format (or bfloat16) rather
// than float32, and the two ways they become so: drawn and packed at once when a model is
// initialised (nothing of the float32 matrix is ever written: a Llama-3.2-1B-shaped model
// never holds its 4.9 GB of float32), or packed after a checkpoint's floats were read into
// the model. The matrices are the weights of Linears, Embeddings and an untied LM head (a
// tied head reads the token embedding's, packed with it); norms, biases and whatever trains
// stay float32. A matrix whose rows are not a whole number of the format's blocks is held
// as bfloat16 instead (as llama.cpp falls back to another type for such rows).
//
//   nn::FrozenBase base{ag::quant::packed_format(BasePrecision::q8_0), frozen_names};
//   nn::GPT model(cfg, seed, &base);   // the named matrices drawn straight into Q8_0 blocks
#include <functional>
#include <string>
#include <unordered_set>

#include "autograd/quant/packed_weight.h"
#include "nn/module.h"

namespace nn {

struct FrozenBase {
  const ag::quant::PackedFormat* format = nullptr;  // null: nothing packed (fp32, own)
  // own (BasePrecision::own): a frozen matrix already packed (a checkpoint's blocks, in
  // whatever format: a GGUF import's Q4_K beside its Q6_K) stays as it is; one held as
  // float32 stays float32. Nothing is packed anew.
  bool own = false;
  std::unordered_set<std::string> frozen;  // parameter names that train not
  // Matrices an --init-from file holds as blocks, under own: GPT(cfg, seed, &base) draws
  // them (the generator as ever) but gives them no storage, so that the model never holds
  // them as float32 before the file's blocks are adopted (train::load_init_weights).
  std::unordered_set<std::string> from_file;
  // Whether the parameter `name` is a frozen weight matrix (what a base may hold packed).
  bool frozen_matrix(const std::string& name, const ag::Shape& shape) const;
  // Whether the parameter `name`, a matrix of the given shape, is packed in `format`.
  bool packs(const std::string& name, const ag::Shape& shape) const;
  // The format a matrix of rows of `width` weights is packed in: format, or bf16 where
  // rows are not a whole number of its blocks.
  const ag::quant::PackedFormat& format_for(int64_t width) const;
};

// Draws the next `rows` rows of a parameter's initial values (ag::normal over the
// generator: rows drawn a chunk at a time are the rows drawn at once).
using RowDraw = std::function<ag::Tensor(int64_t rows)>;
// Sets the parameter `name`, p, to the values `draw` gives (base may be null). A matrix
// base packs is drawn a chunk of rows at a time (16 MiB of float32: the generator advances
// as ever), each chunk packed as drawn, so its float32 is never held whole (a
// Llama-3.2-1B embedding's 1 GB would be the peak of a Q4_K base's run), and p's float32
// storage is let go unwritten; one base->from_file names is drawn the same way and left
// without storage (its blocks come next); any other takes the whole draw.
inline constexpr int64_t kDrawChunkBytes = int64_t{16} << 20;
void place_initial_draws(const FrozenBase* base, const std::string& name, ag::Tensor& p,
                         const RowDraw& draw, int64_t chunk_bytes = kDrawChunkBytes);
// Holds every parameter of model as base says, in place: one base packs and is held as
// float32 (its values read from a checkpoint) is packed; one already packed in the format
// base packs it in (a checkpoint's blocks, taken as they are: nothing re-quantized) is
// left so; one packed otherwise (another format, or a parameter base does not pack: it
// trains, or the run's base is fp32) is dequantized to float32, then packed as base says.
// Under base.own a frozen matrix is left as it is held, packed or not.
// Returns how many were packed. The allocator's cached blocks are given back after it, so
// that the floats leave the resident memory.
int pack_frozen_base(Module& model, const FrozenBase& base);
// Every packed parameter of model back to float32 (for merging adapters, the decoder).
void unpack_frozen_base(Module& model);
// Bytes the model's parameters occupy as they are held (packed ones as their blocks).
int64_t held_parameter_bytes(const Module& model);

}  // namespace nn
