#pragma once
// Incremental decoding of a GPT with a key/value cache: the inference path of `sample`.
// The decoder owns the cache, the scratch buffers (inference_context.h), the threads and
// their pace; what a pass computes is the model's own description (GPT::embed and
// GPT::infer, which run each block's and layer's inference step).
//
//   nn::CachedInference dec(model, /*batch=*/2);          // cache and scratch allocated here, once
//   auto logits = dec.prefill(ids, n);            // ids [2, n]: positions 0..n-1 of each row
//   logits = dec.step(next);                      // next [2]: one more position per row
//   // logits: [2, vocab_size], the last position's, valid until the next call
//
// The prompt is run once (prefill), then each step runs one position through every layer,
// attending to the keys and values cached for the earlier positions. Keys and values of
// every layer are kept for the decoder's positions (at most context_length) of every row,
// in a cache allocated when the decoder is made; steps allocate nothing and record no
// graph: the arithmetic is plain float32 loops and BLAS calls on the model's parameters
// (read in place, never copied, except the copies of the weight formats below and a small
// model's input-major panels, keeps_weight_panels), with dropout
// off as in eval(). The logits equal GPT::forward's at the same positions to float32
// rounding (tests/test_decode.cpp).
//
// Positions are learned and absolute, so the cache holds at most context_length positions
// and cannot slide: a longer sequence is decoded by prefilling a later window again
// (generation.h decides when).
//
// Layout, per layer l and row b: values [positions][d_model] (a position's heads side by
// side), keys transposed, [d_model][positions], so that one query's scores against every
// cached position are computed position-parallel, without horizontal sums. A prefill's
// scores are computed a block of query rows at a time, in a scratch of at most
// kPrefillScoreFloats per thread (all rows at once when the window is that small), never
// threads x positions^2.
//
// Threads: a step, or the prefill of a row, runs in one parallel region (thread start-up
// costs microseconds, a step of the default model a few tens of them): each thread
// computes its share of the attention heads (their query, key and value columns and their
// attention) and of the output columns of the other projections, with a barrier where the
// next part needs all of them; BLAS, called inside the region, runs on the calling
// thread. Passes too small to gain run on one. Whether the threads pay is measured as the
// passes run (inference::StepPace, one for steps and one for prefills): on a machine whose
// cores are taken by other work, a pass's ~25 barriers can cost more than the second
// thread brings, and the passes then run on one. The logits are the same bits either way
// (each output is computed by one thread, in the same order).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "autograd/quant/block_formats.h"
#include "nn/gpt.h"
#include "nn/inference_context.h"

namespace nn {

// How a decoder's steps read the weight matrices: float32 (the model as it is), or
// bfloat16 copies of matrices rounded to bfloat16 beforehand: half the bytes, and a step
// is bound by the bytes it reads (`sample --weights bf16`); or ggml's Q8_0 blocks of
// matrices rounded to them beforehand (round_weights_to_q8_0): 34 bytes per 32 weights,
// 1.06 bytes a weight, multiplied as llama.cpp does, by the activations rounded to Q8_0
// blocks (exact integer dot products: `sample --weights q8_0`, docs/quantization.md), or by
// the float32 activations (q8_0_f32: the rounded model's logits to float32 rounding,
// `--weights q8_0-f32`); or Q4_K blocks (round_weights_to_q4_k), 0.5625 bytes a weight, a
// matrix whose rows are not a multiple of 256 weights in Q8_0 instead (as llama.cpp falls
// back to another type for such rows), multiplied as llama.cpp does, by the activations
// rounded to 8 bits (Q8_K blocks for Q4_K rows, Q8_0 for Q8_0 rows: `--weights q4_k`), or
// by the float32 activations (q4_k_f32, `--weights q4_k-f32`).
enum class WeightFormat { fp32, bf16, q8_0, q8_0_f32, q4_k, q4_k_f32 };
// Whether a format's steps read Q8_0 blocks of every matrix (q8_0, q8_0_f32).
inline bool q8_0_weights(WeightFormat f) {
  return f == WeightFormat::q8_0 || f == WeightFormat::q8_0_f32;
}
// Whether a format's steps read Q4_K blocks where rows allow (q4_k, q4_k_f32).
inline bool q4_k_weights(WeightFormat f) {
  return f == WeightFormat::q4_k || f == WeightFormat::q4_k_f32;
}
// Whether a format's steps round the activations to 8 bits (q8_0, q4_k): its logits are not
// the rounded model's to float32 rounding.
inline bool rounds_activations(WeightFormat f) {
  return f == WeightFormat::q8_0 || f == WeightFormat::q4_k;
}

// The blocks a streamed matrix with rows of `in` weights is held as under `format`: Q8_0,
// Q4_K (q4_k's rows of a multiple of 256), or null (fp32, bf16).
const ag::quant::BlockLayout* decoder_blocks(WeightFormat format, int64_t in);

// Bytes of the matrices a decoder's step reads in `format` (GPT::streamed_matrices, q4_k's
// short rows as Q8_0): what bounds a step's speed, read once a step whatever its rows.
double streamed_bytes(const GPT& model, WeightFormat format);

// A float32 decoder (WeightFormat::fp32) of a model whose streamed matrices hold at most
// this many bytes keeps a copy of each as input-major panels, and multiplies by them
// (panel_gemv.h): such a model's weights stay in the caches, a step is bound by its
// arithmetic and the caches, and over the panels the outputs are a vector's lanes, with no
// lane sums to add and each weight loaded once for eight rows. (The default model's 8-row
// step took 10% less time, its prefills 1.3-1.7x less, on an Intel Xeon with AMX.) A
// larger model's step is bound by the bytes it reads, and keeps reading W's rows in place
// (no second copy of its memory). The choice is the model's size alone, never the
// machine's, so that `sample` and `serve` give the same bits anywhere.
inline constexpr double kPanelWeightBytes = 32.0 * 1024 * 1024;
bool keeps_weight_panels(const GPTConfig& cfg, WeightFormat format);

// The most floats of prefill scores a thread holds at once (16 MB): a window of up to 2048
// positions is scored whole, a longer one a block of rows at a time.
inline constexpr int64_t kPrefillScoreFloats = int64_t{1} << 22;
// The query rows a thread scores at once in a prefill of up to `positions` positions.
int64_t prefill_score_rows(int64_t positions);

class CachedInference {
 public:
  // The model must outlive the decoder and be float32, with an LM head and no unmerged
  // adapters; its parameter values may change between calls (they are read, not copied),
  // except for the matrices a step reads (GPT::streamed_matrices) where a small model's
  // float32 decoder keeps them as panels (keeps_weight_panels: copied once, here),
  // and with WeightFormat::bf16: then the matrices a step reads
  // (GPT::streamed_matrices) are copied once into bfloat16, half the bytes a token reads,
  // and must already hold bfloat16 values (round_weights_to_bfloat16), so that the copies
  // and the float32 values the prefills multiply are the same numbers; likewise with
  // WeightFormat::q8_0 and q8_0_f32 into Q8_0 blocks, of matrices that hold Q8_0 values
  // (round_weights_to_q8_0: quantizing them again gives the same blocks), and with
  // WeightFormat::q4_k (round_weights_to_q4_k, the same). batch >= 1 rows are
  // decoded side by side. positions (1..context_length; 0: context_length) is the longest
  // window it will hold: the cache and the scratch are sized by it, so that a few tokens
  // sampled from a model of a long context take memory for a few positions.
  CachedInference(const GPT& model, int64_t batch, WeightFormat format = WeightFormat::fp32,
                  int64_t positions = 0);
  // A decoder of `batch` rows of the same model, format and positions as `weights_of`,
  // which reads that decoder's copies of the weights (bfloat16, blocks, panels) rather than
  // making its own: a server's decoders, one a thread, hold the model's copies once. Its
  // cache, scratch and paces are its own, so the two may run at once on two threads.
  CachedInference(const CachedInference& weights_of, int64_t batch);

  int64_t batch() const { return batch_; }
  int64_t length() const { return length_; }  // positions cached in every row
  int64_t capacity() const { return positions_; }
  // Bytes of the key/value cache and scratch buffers a decoder of `batch` rows and
  // `positions` (as the constructor's) allocates with `threads` OpenMP threads, computed
  // without allocating (and without overflowing: absurd sizes give INT64_MAX), so that an
  // impossible batch is refused up front.
  static int64_t memory_bytes(const GPTConfig& cfg, int64_t batch, int threads,
                              WeightFormat format = WeightFormat::fp32, int64_t positions = 0);
  // The part of memory_bytes that is the copies of the weights (what a decoder made from
  // another's weights, above, does not allocate again).
  static int64_t weight_copy_bytes(const GPTConfig& cfg, WeightFormat format);

  // Forgets the cache and runs ids [batch, n] (row-major, 1 <= n <= capacity()) at
  // positions 0..n-1. Rows with the same ids as an earlier row are computed once.
  // Returns the logits of position n - 1, [batch, vocab_size].
  std::span<const float> prefill(std::span<const int64_t> ids, int64_t n);
  // Runs ids [batch] at position length() (< capacity()) of each row.
  std::span<const float> step(std::span<const int64_t> ids);

  // Independent sequences, one a row (a server's slots): each row has a length of its own.
  // prefill_slot forgets row `slot` and runs ids (1 <= size <= capacity()) at its positions
  // 0..n-1; the row's logits, [vocab_size]. step_slots runs ids[i] at position
  // slot_length(slots[i]) (< capacity()) of row slots[i] (distinct rows, each prefilled);
  // the logits [slots.size(), vocab_size], in the order of `slots`. Up to kStepRowsAtOnce
  // rows run in one pass, every matrix through the vector kernel (each weight read once for
  // all of them), which gives each row the bits a decoder of that row alone computes: a
  // step's usual route for more than four rows, BLAS's GEMM, sums in another order.
  static constexpr int64_t kStepRowsAtOnce = 16;
  std::span<const float> prefill_slot(int64_t slot, std::span<const int64_t> ids);
  std::span<const float> step_slots(std::span<const int64_t> slots, std::span<const int64_t> ids);
  // prefill_slot(slot, window) and then step_slots(slots, ids) (slots without `slot`): the
  // logits [1 + slots.size(), vocab_size], the prefilled row's first, the same bits as the
  // two calls. Where every matrix goes through the panels either way (keeps_weight_panels,
  // and small enough products: prefill_step_rows), both run in one pass, which reads the
  // weights once: a server's row whose window moved no longer costs its lane's step a
  // second pass.
  std::span<const float> prefill_and_step_slots(int64_t slot, std::span<const int64_t> window,
                                                std::span<const int64_t> slots,
                                                std::span<const int64_t> ids);
  // The most rows (the prefill's and the step's) such a pass may have; 0: none.
  int64_t prefill_step_rows() const { return prefill_step_rows_; }
  int64_t slot_length(int64_t slot) const { return row_lengths_.at(static_cast<size_t>(slot)); }

  // Whether passes large enough to share run on the threads: as timed (the default), or
  // always on the team, or always on one (benchmarks and tests; the logits are the same).
  enum class Threads { kTimed, kTeam, kOne };
  void set_threads(Threads policy) { policy_ = policy; }

 private:
  void check_model() const;
  void bind_and_allocate();
  void pack_bfloat16();
  void pack_blocks(WeightFormat format);
  void pack_weight_panels();
  void allocate_buffers();
  void prefill_row(const int64_t* ids, int64_t b, int64_t n);
  void check_prefill_row(int64_t slot, int64_t n) const;
  void check_step_rows(std::span<const int64_t> slots, std::span<const int64_t> ids) const;
  int64_t step_vector_rows() const;
  std::span<const float> prefill_then_step(int64_t slot, std::span<const int64_t> window,
                                           std::span<const int64_t> slots,
                                           std::span<const int64_t> ids);
  void copy_row(int64_t from, int64_t to);
  void run(const InferencePass& pass, inference::StepPace& pace);

  const GPT& model_;
  GPTConfig cfg_;
  int64_t batch_, positions_, length_ = 0;
  std::vector<int64_t> row_lengths_;     // prefill_slot's and step_slots' rows
  std::vector<int64_t> step_positions_;  // step_slots' positions, a block of rows at a time
  std::vector<float> row_logits_;        // step_slots' logits
  std::vector<int64_t> pass_ids_;        // prefill_and_step_slots' ids and positions
  int64_t prefill_step_rows_ = 0;
  int threads_;  // the most a pass uses (OpenMP's count when the decoder was made)
  // The copies of the streamed matrices a step reads, shared by the decoders made from
  // this one's weights (their c_ points into them): bfloat16 (WeightFormat::bf16), blocks
  // (q8_0, q4_k), input-major panels (keeps_weight_panels).
  struct WeightCopies {
    std::vector<ag::bfloat16> packed;
    std::vector<uint8_t> blocks;
    std::vector<float> panels;
  };
  std::shared_ptr<WeightCopies> copies_ = std::make_shared<WeightCopies>();
  InferenceContext c_;
  inference::PacesByRows step_paces_, prefill_paces_;
  Threads policy_ = Threads::kTimed;
};

}  // namespace nn
