#pragma once
// What a module's inference step works on (the layers' infer methods):
// one pass of the KV-cached decoder through the model, and the cache and scratch buffers
// the decoder (inference.h) owns. A pass is a step (every row of the batch at one position)
// or a prefill (positions 0..rows-1 of one row). The threads of one parallel region run
// the same pass; each layer shares its work out (inference::share) and waits at
// barrier() where the next part needs every thread's part.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "autograd/autograd.h"
#include "nn/inference_kernels.h"

namespace nn {

class Module;

// A pass's rows: the first `prefilled` are a prefill of the cache's row b, at positions 0..
// prefilled - 1; the others (if any) are a step, one position of a row each. A server's
// step may carry one row's prefill (CachedInference::prefill_and_step_slots), so that the
// weights are read once for both.
struct InferencePass {
  int64_t prefilled;  // rows of the pass that are row b's prefill
  int64_t rows;       // the prefill's and the step's
  int64_t b;          // the prefill's row of the batch
  int64_t position;   // a step's position (every row's)
  // A step of independent sequences (a server's): row r >= prefilled of the pass is the
  // cache's row slots[r - prefilled], at position positions[r - prefilled]. Null: row r is
  // the cache's row r, at `position`.
  const int64_t* slots = nullptr;
  const int64_t* positions = nullptr;
  // Rows before this one need only their keys and values, not the layer's output: a
  // prefill's last layer, whose last row alone the logits read (GPT::infer).
  int64_t outputs_from = 0;
  bool prefill_only() const { return prefilled == rows; }
  int64_t slot(int64_t r) const { return r < prefilled ? b : slots ? slots[r - prefilled] : r; }
  int64_t position_of(int64_t r) const {
    return r < prefilled ? r : positions ? positions[r - prefilled] : position;
  }
};

struct InferenceContext {
  int64_t C = 0, T = 0, F = 0;  // width, positions held (at most the context), MLP width
  int64_t q_width = 0;          // the queries' (and attention output's): heads * head_dim
  int64_t kv_width = 0;         // the keys' and values': key/value heads * head_dim
  int64_t batch = 0;
  // the most rows of a pass the layers' vector kernel takes (inference::linear): more would
  // go through BLAS's GEMM, whose sums differ from it in the last bit
  int64_t vector_rows = inference::kVectorRows;
  // the rows of the pass: residual stream [rows, C]; normalised, one copy per thread;
  // queries [rows, q_width]; keys before they are transposed into the cache [rows,
  // kv_width]; attention output [rows, q_width]; MLP hidden [rows, F] (SwiGLU's gate
  // product, and its up projection in `up`)
  std::vector<float> x, normed, q, k, ctx, hidden, up;
  // scores: per thread [score_rows, T] (a prefill's block of query rows, or a step's row
  // and head in its first T); logits [batch, V]
  std::vector<float> scores, logits;
  int64_t score_rows = 0;
  std::vector<float> keys_cache, values_cache;
  inference::SpinBarrier barrier;
  // WeightFormat::bf16: each streamed matrix's bfloat16 copy, by its float32 data
  std::vector<std::pair<const float*, const ag::bfloat16*>> bf16_copies;
  // WeightFormat::q8_0_f32: each streamed matrix's Q8_0 blocks, by its float32 data
  std::vector<std::pair<const float*, const uint8_t*>> q8_0_copies;
  // WeightFormat::q8_0: the same blocks interleaved (inference::interleave_q8_0); and
  // q4_k's matrices of Q8_0 blocks
  std::vector<std::pair<const float*, const uint8_t*>> q8_0_q8_copies;
  // WeightFormat::q4_k_f32: each streamed matrix's Q4_K blocks (rows of a multiple of 256
  // weights; the others' Q8_0 blocks are among q8_0_copies)
  std::vector<std::pair<const float*, const uint8_t*>> q4_k_copies;
  // WeightFormat::q4_k: the same Q4_K blocks, read by Q8_K activations
  std::vector<std::pair<const float*, const uint8_t*>> q4_k_q8_copies;
  // keeps_weight_panels: each streamed matrix's input-major panels, by its float32 data
  std::vector<std::pair<const float*, const float*>> panel_copies;

  // What a layer's inference step reads, resolved once when the decoder is made
  // (Module::bind_inference), so that a step follows no tensor to its storage: the layer's
  // weight (with its bfloat16 copy, if any) and bias. Sorted by layer.
  struct Bound {
    const Module* layer;
    inference::Weights weight;
    const float* bias;  // null when none
  };
  std::vector<Bound> bound;
  void bind(const Module* layer, const ag::Tensor& weight, const ag::Tensor& bias);
  const Bound& bound_to(const Module* layer) const {
    const auto it = std::lower_bound(bound.begin(), bound.end(), layer, [](const Bound& b, auto l) {
      return std::less<const Module*>{}(b.layer, l);
    });
    if (it == bound.end() || it->layer != layer) unbound();
    return *it;
  }
  [[noreturn]] static void unbound();  // a layer that did not bind_inference

  float* normed_rows(int tid, int64_t rows) { return normed.data() + tid * rows * C; }
  // layer l, row b: keys transposed [kv_width][T]; values [T][kv_width] (the key/value
  // heads only: grouped heads share them)
  float* keys(int64_t l, int64_t b) { return keys_cache.data() + (l * batch + b) * kv_width * T; }
  float* values(int64_t l, int64_t b, int64_t t) {
    return values_cache.data() + ((l * batch + b) * T + t) * kv_width;
  }
};

}  // namespace nn
