#include "nn/inference.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>

#include "autograd/dtype.h"
#include "autograd/quant/block_formats.h"
#include "nn/block_gemv.h"
#include "nn/panel_gemv.h"

namespace nn {

namespace {

// A pass's multiply-adds below this run on one thread: a barrier costs about a
// microsecond, and a model this small takes only tens of microseconds a step.
constexpr int64_t kThreadedStepWork = int64_t{1} << 18;

// Elements of the matrices a step streams, read off the model's description; with
// `as_panels`, the floats of their input-major panels (inference::panel_floats).
int64_t streamed_elements(const GPTConfig& cfg, bool as_panels = false) {
  ShapeOnlyScope description;
  int64_t n = 0;
  for (const auto& [p, elements, outputs] : GPT(cfg, 0).streamed_matrices())
    n += as_panels ? inference::panel_floats(outputs, elements / outputs) : elements;
  return n;
}

}  // namespace

CachedInference::CachedInference(const GPT& model, int64_t batch, WeightFormat format,
                                 int64_t positions)
    : model_(model),
      cfg_(model.config()),
      batch_(batch),
      positions_(positions == 0 ? cfg_.context_length : positions),
      threads_(std::max(1, omp_get_max_threads())) {
  if (batch < 1) throw std::invalid_argument(fmt::format("CachedInference: batch {} < 1", batch));
  if (positions_ < 1 || positions_ > cfg_.context_length)
    throw std::invalid_argument(fmt::format("CachedInference: {} positions, outside 1..{} (0: {})",
                                            positions, cfg_.context_length, cfg_.context_length));
  check_model();
  if (format == WeightFormat::bf16) pack_bfloat16();
  if (q8_0_weights(format) || q4_k_weights(format)) pack_blocks(format);
  if (keeps_weight_panels(cfg_, format)) pack_weight_panels();
  bind_and_allocate();
}

CachedInference::CachedInference(const CachedInference& weights_of, int64_t batch)
    : model_(weights_of.model_),
      cfg_(weights_of.cfg_),
      batch_(batch),
      positions_(weights_of.positions_),
      threads_(std::max(1, omp_get_max_threads())),
      copies_(weights_of.copies_) {
  if (batch < 1) throw std::invalid_argument(fmt::format("CachedInference: batch {} < 1", batch));
  c_.bf16_copies = weights_of.c_.bf16_copies;
  c_.q8_0_copies = weights_of.c_.q8_0_copies;
  c_.q8_0_q8_copies = weights_of.c_.q8_0_q8_copies;
  c_.q4_k_copies = weights_of.c_.q4_k_copies;
  c_.q4_k_q8_copies = weights_of.c_.q4_k_q8_copies;
  c_.panel_copies = weights_of.c_.panel_copies;
  bind_and_allocate();
}

// Each layer's weights resolved (bind_inference, through the copies made above), then the
// cache and scratch.
void CachedInference::bind_and_allocate() {
  model_.visit_modules([&](const Module& m) { m.bind_inference(c_); });
  std::sort(c_.bound.begin(), c_.bound.end(), [](const auto& a, const auto& b) {
    return std::less<const Module*>{}(a.layer, b.layer);
  });
  allocate_buffers();
  row_lengths_.assign(static_cast<size_t>(batch_), 0);
  // a pass of a prefill and a step: every streamed matrix through its panels (linear()
  // takes them below kBlasMultiplyAdds, BLAS above), within the buffers' rows
  const auto matrices = model_.streamed_matrices();
  if (!matrices.empty() && c_.panel_copies.size() == matrices.size()) {
    int64_t largest = 0;
    for (const auto& m : matrices) largest = std::max(largest, m.elements);
    const auto below = static_cast<int64_t>(
        std::ceil(inference::kBlasMultiplyAdds / static_cast<double>(largest)) - 1);
    prefill_step_rows_ = std::min(std::max(positions_, batch_), below);
  }
}

// Every parameter contiguous float32 (read through raw pointers), an LM head, no adapter.
void CachedInference::check_model() const {
  for (const auto& [name, p] : model_.named_parameters())
    if (p.dtype() != ag::DType::Float32 || !p.is_contiguous())
      throw std::invalid_argument(
          fmt::format("CachedInference: {} must be contiguous float32, got {} {}", name,
                      ag::dtype_name(p.dtype()), ag::shape_str(p.shape())));
  if (!dynamic_cast<const LMHead*>(&model_.head()))
    throw std::invalid_argument("CachedInference: the model's head does not predict tokens");
  model_.visit_modules([](const Module& m) {
    if (auto* linear = dynamic_cast<const Linear*>(&m); linear && linear->has_adapter())
      throw std::invalid_argument(fmt::format(
          "CachedInference: {} carries an adapter; merge it first (Linear::merge_adapter)",
          m.path()));
  });
}

// A bfloat16 copy of every streamed matrix, whose float32 values must already be bfloat16
// values; the copy is sized once, so that the pointers stay valid.
void CachedInference::pack_bfloat16() {
  const auto matrices = model_.streamed_matrices();
  size_t total = 0;
  for (const auto& matrix : matrices) total += static_cast<size_t>(matrix.elements);
  std::vector<ag::bfloat16>& packed = copies_->packed;
  packed.resize(total);
  size_t at = 0;
  for (const auto& [p, elements, outputs] : matrices) {
    const float* f = p.const_data<float>();
    const auto n = static_cast<size_t>(p.numel());
    for (size_t i = 0; i < n; ++i)
      if (ag::bf16_rounded(f[i]) != f[i] && !std::isnan(f[i]))
        throw std::invalid_argument(
            fmt::format("CachedInference: bfloat16 weights need every streamed matrix rounded to "
                        "bfloat16 first (nn::round_weights_to_bfloat16); element {} of a [{}] "
                        "matrix is {}",
                        i, fmt::join(p.shape(), ", "), f[i]));
    ag::to_bfloat16(f, packed.data() + at, static_cast<int64_t>(n));
    c_.bf16_copies.emplace_back(f, packed.data() + at);
    at += n;
  }
}

bool keeps_weight_panels(const GPTConfig& cfg, WeightFormat format) {
  return format == WeightFormat::fp32 &&
         4.0 * static_cast<double>(streamed_elements(cfg)) <= kPanelWeightBytes;
}

// Every streamed matrix as input-major panels (panel_gemv.h), sized once, so that the
// pointers stay valid.
void CachedInference::pack_weight_panels() {
  const auto matrices = model_.streamed_matrices();
  int64_t total = 0;
  for (const auto& [p, elements, outputs] : matrices)
    total += inference::panel_floats(outputs, elements / outputs);
  std::vector<float>& panels = copies_->panels;
  panels.resize(static_cast<size_t>(total));
  int64_t at = 0;
  for (const auto& [p, elements, outputs] : matrices) {
    const int64_t in = elements / outputs;
    inference::pack_panels(p.const_data<float>(), outputs, in, panels.data() + at);
    c_.panel_copies.emplace_back(p.const_data<float>(), panels.data() + at);
    at += inference::panel_floats(outputs, in);
  }
}

const ag::quant::BlockLayout* decoder_blocks(WeightFormat format, int64_t in) {
  using ag::quant::BlockFormat;
  if (q4_k_weights(format) && in % 256 == 0) return &ag::quant::layout(BlockFormat::q4_k);
  if (q8_0_weights(format) || q4_k_weights(format)) return &ag::quant::layout(BlockFormat::q8_0);
  return nullptr;
}

double streamed_bytes(const GPT& model, WeightFormat format) {
  double bytes = 0;
  for (const auto& m : model.streamed_matrices()) {
    const auto* l = decoder_blocks(format, m.weight.numel() / m.weight.shape()[0]);
    const double per_weight = l ? static_cast<double>(l->bytes) / static_cast<double>(l->elements)
                              : format == WeightFormat::bf16 ? 2.0
                                                             : 4.0;
    bytes += per_weight * static_cast<double>(m.elements);
  }
  return bytes;
}

// The blocks of every streamed matrix (decoder_blocks), whose float32 values must be what
// the blocks hold (round_weights_to_q8_0, round_weights_to_q4_k); they are sized once, so
// that the pointers stay valid.
void CachedInference::pack_blocks(WeightFormat format) {
  const auto matrices = model_.streamed_matrices();
  int64_t total = 0;
  for (const auto& [p, elements, outputs] : matrices)
    if (const auto* l = decoder_blocks(format, p.numel() / p.shape()[0]))
      total += ag::quant::row_bytes(*l, elements);
  std::vector<uint8_t>& all_blocks = copies_->blocks;
  all_blocks.resize(static_cast<size_t>(total));
  int64_t at = 0;
  std::vector<float> back;
  for (const auto& [p, elements, outputs] : matrices) {
    const float* f = p.const_data<float>();
    const int64_t rows = p.shape()[0], in = p.numel() / rows;
    const ag::quant::BlockLayout& l = *decoder_blocks(format, in);
    if (in % l.elements != 0)
      throw std::invalid_argument(fmt::format(
          "CachedInference: {} weights need rows of a multiple of {} weights; a [{}] matrix "
          "has rows of {}",
          l.ggml, l.elements, fmt::join(p.shape(), ", "), in));
    ag::quant::quantize_rows(l, f, rows, in, all_blocks.data() + at);
    back.resize(static_cast<size_t>(p.numel()));
    ag::quant::dequantize_row(l, all_blocks.data() + at, p.numel(), back.data());
    if (std::memcmp(back.data(), f, back.size() * sizeof(float)) != 0)
      throw std::invalid_argument(fmt::format(
          "CachedInference: {} weights need every streamed matrix rounded to {} first "
          "(nn::round_weights_to_{}); a [{}] matrix is not",
          l.ggml, l.ggml, q4_k_weights(format) ? "q4_k" : "q8_0", fmt::join(p.shape(), ", ")));
    uint8_t* blocks = all_blocks.data() + at;
    const bool q4 = l.format == ag::quant::BlockFormat::q4_k;
    if (!q4 && rounds_activations(format)) {  // read by Q8_0 activations: interleaved, in place
      const int64_t row_bytes = ag::quant::row_bytes(l, in);
      std::vector<uint8_t> plain(static_cast<size_t>(row_bytes));
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(plain.data(), blocks + r * row_bytes, plain.size());
        inference::interleave_q8_0(plain.data(), 1, in, blocks + r * row_bytes);
      }
      c_.q8_0_q8_copies.emplace_back(f, blocks);
    } else {
      (!q4                          ? c_.q8_0_copies
       : rounds_activations(format) ? c_.q4_k_q8_copies
                                    : c_.q4_k_copies)
          .emplace_back(f, blocks);
    }
    at += ag::quant::row_bytes(l, p.numel());
  }
}

int64_t prefill_score_rows(int64_t positions) {
  return std::clamp<int64_t>(kPrefillScoreFloats / std::max<int64_t>(positions, 1), 1,
                             std::max<int64_t>(positions, 1));
}

void CachedInference::allocate_buffers() {
  const int64_t T = positions_, C = cfg_.d_model, rows = std::max(T, batch_);
  const int64_t Q = cfg_.n_heads * cfg_.head_width(), K = cfg_.kv_heads() * cfg_.head_width();
  auto floats = [](int64_t n) { return static_cast<size_t>(n); };
  c_.C = C, c_.T = T, c_.F = cfg_.ff_width(), c_.batch = batch_;
  c_.q_width = Q, c_.kv_width = K;
  c_.score_rows = prefill_score_rows(T);
  c_.keys_cache.resize(floats(cfg_.n_layers * batch_ * T * K));
  c_.values_cache.resize(c_.keys_cache.size());
  c_.x.resize(floats(rows * C));
  c_.q.resize(floats(rows * Q));
  c_.ctx.resize(floats(rows * Q));
  c_.k.resize(floats(rows * K));
  c_.normed.resize(floats(threads_ * rows * C));  // each thread normalises for itself
  c_.hidden.resize(floats(rows * cfg_.ff_width()));
  if (cfg_.mlp == MlpKind::swiglu) c_.up.resize(floats(rows * cfg_.ff_width()));
  c_.scores.resize(floats(threads_ * c_.score_rows * T));  // a step scores in it too
  c_.logits.resize(floats(batch_ * cfg_.vocab_size));
}

// In double: an absurd batch or thread count must give an absurd size, not an overflowed
// one.
int64_t CachedInference::memory_bytes(const GPTConfig& cfg, int64_t batch, int threads,
                                      WeightFormat format, int64_t positions) {
  const int64_t P = positions == 0 ? cfg.context_length : positions;
  const double T = static_cast<double>(P), C = static_cast<double>(cfg.d_model),
               B = static_cast<double>(batch), n = static_cast<double>(threads),
               rows = std::max(T, B);
  const double Q = static_cast<double>(cfg.n_heads) * static_cast<double>(cfg.head_width()),
               K = static_cast<double>(cfg.kv_heads()) * static_cast<double>(cfg.head_width()),
               F = static_cast<double>(cfg.ff_width()) * (cfg.mlp == MlpKind::swiglu ? 2 : 1);
  const double floats = 2 * static_cast<double>(cfg.n_layers) * B * T * K +
                        rows * (C + 2 * Q + K + F) + n * rows * C +
                        n * static_cast<double>(prefill_score_rows(P)) * T +
                        B * static_cast<double>(cfg.vocab_size);
  const double bytes = floats * sizeof(float) + static_cast<double>(weight_copy_bytes(cfg, format));
  return bytes < 9e18 ? static_cast<int64_t>(bytes) : std::numeric_limits<int64_t>::max();
}

// 2 bytes a weight in bfloat16, 34 per 32 in Q8_0 (and at most that in q4_k, whose
// matrices of short rows are Q8_0); a small model's input-major panels
int64_t CachedInference::weight_copy_bytes(const GPTConfig& cfg, WeightFormat format) {
  const double per_weight = format == WeightFormat::bf16                   ? 2.0
                            : q8_0_weights(format) || q4_k_weights(format) ? 34.0 / 32.0
                                                                           : 0.0;
  const double panels =
      keeps_weight_panels(cfg, format) ? static_cast<double>(streamed_elements(cfg, true)) : 0;
  const double bytes =
      panels * sizeof(float) + per_weight * static_cast<double>(streamed_elements(cfg));
  return bytes < 9e18 ? static_cast<int64_t>(bytes) : std::numeric_limits<int64_t>::max();
}

void InferenceContext::bind(const Module* layer, const ag::Tensor& weight, const ag::Tensor& bias) {
  const float* f = weight.const_data<float>();
  const ag::bfloat16* copy = nullptr;
  for (const auto& [from, to] : bf16_copies)
    if (from == f) copy = to;
  const uint8_t *blocks = nullptr, *q4_k = nullptr, *interleaved = nullptr, *q4_k_q8 = nullptr;
  for (const auto& [from, to] : q8_0_copies)
    if (from == f) blocks = to;
  for (const auto& [from, to] : q4_k_copies)
    if (from == f) q4_k = to;
  for (const auto& [from, to] : q8_0_q8_copies)
    if (from == f) interleaved = to;
  for (const auto& [from, to] : q4_k_q8_copies)
    if (from == f) q4_k_q8 = to;
  const float* panels = nullptr;
  for (const auto& [from, to] : panel_copies)
    if (from == f) panels = to;
  bound.push_back(Bound{layer,
                        {f, copy, blocks, q4_k, interleaved, q4_k_q8, panels},
                        bias.defined() ? bias.data<float>() : nullptr});
}

void InferenceContext::unbound() {
  throw std::logic_error("CachedInference: a layer's inference step reads what it never bound");
}

// Every layer and the head, on the threads when they pay (`pace` times both ways).
void CachedInference::run(const InferencePass& pass, inference::StepPace& pace) {
  const int64_t work = pass.rows * cfg_.n_layers * cfg_.d_model *
                       (4 * cfg_.d_model + 2 * cfg_.ff_width());  // near enough for GQA
  const int team = work >= kThreadedStepWork && !omp_in_parallel()
                       ? std::min(threads_, std::max(1, omp_get_max_threads()))
                       : 1;
  const bool threaded =
      team > 1 && (policy_ == Threads::kTeam || (policy_ == Threads::kTimed && pace.threaded()));
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(team) if (threaded)
  model_.infer(c_, pass, omp_get_thread_num(), omp_get_num_threads());
  if (team > 1 && policy_ == Threads::kTimed)
    pace.record(threaded,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void CachedInference::prefill_row(const int64_t* ids, int64_t b, int64_t n) {
  model_.embed(c_, ids, n, 0, 1);
  run(InferencePass{n, n, b, 0}, prefill_paces_[n]);
}

// Row `to` of the cache and logits becomes a copy of row `from`.
void CachedInference::copy_row(int64_t from, int64_t to) {
  const auto block = static_cast<size_t>(positions_ * c_.kv_width);
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    std::copy_n(c_.keys(l, from), block, c_.keys(l, to));
    std::copy_n(c_.values(l, from, 0), block, c_.values(l, to, 0));
  }
  const int64_t V = cfg_.vocab_size;
  std::copy_n(c_.logits.data() + from * V, V, c_.logits.data() + to * V);
}

std::span<const float> CachedInference::prefill(std::span<const int64_t> ids, int64_t n) {
  if (n < 1 || n > positions_ || static_cast<int64_t>(ids.size()) != batch_ * n)
    throw std::invalid_argument(
        fmt::format("CachedInference::prefill: {} ids for {} rows of {} positions (capacity {} of "
                    "context_length {})",
                    ids.size(), batch_, n, positions_, cfg_.context_length));
  length_ = 0;  // a failure below leaves an empty cache, never a half-written one
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t* row = ids.data() + b * n;
    int64_t same = 0;
    while (same < b && !std::equal(row, row + n, ids.data() + same * n)) ++same;
    if (same < b)
      copy_row(same, b);
    else
      prefill_row(row, b, n);
  }
  length_ = n;
  return c_.logits;
}

// The most rows of a step that go through the vector kernel. Weights read by 8-bit
// activations (q8_0, q4_k) take them in every step, however many rows: past the usual
// four, the float32 route would sum the rounded weights by float32 activations, and a
// sample's text would depend on how many were drawn beside it. The other formats keep the
// float32 route past four rows: reading their compact copy (bfloat16, blocks) instead, 8
// and 16 rows of a 101M-parameter model ran at 0.5-1.2x its speed (Zen 3, 2026-12-07).
int64_t CachedInference::step_vector_rows() const {
  if (!c_.q8_0_q8_copies.empty() || !c_.q4_k_q8_copies.empty())
    return std::max(batch_, inference::kVectorRows);
  return inference::kVectorRows;
}

std::span<const float> CachedInference::step(std::span<const int64_t> ids) {
  if (static_cast<int64_t>(ids.size()) != batch_)
    throw std::invalid_argument(
        fmt::format("CachedInference::step: {} ids for {} rows", ids.size(), batch_));
  if (length_ == 0 || length_ >= positions_)
    throw std::logic_error(
        fmt::format("CachedInference::step: {} positions cached of {}; prefill first, and again "
                    "past the context "
                    "(the decoder's capacity)",
                    length_, positions_));
  model_.embed(c_, ids.data(), batch_, length_, 0);
  c_.vector_rows = step_vector_rows();
  run(InferencePass{0, batch_, 0, length_}, step_paces_[batch_]);
  c_.vector_rows = inference::kVectorRows;
  length_ += 1;
  return c_.logits;
}

}  // namespace nn

namespace nn {

std::span<const float> CachedInference::prefill_slot(int64_t slot, std::span<const int64_t> ids) {
  const auto n = static_cast<int64_t>(ids.size());
  check_prefill_row(slot, n);
  length_ = 0;  // the rows no longer share one length
  row_lengths_[static_cast<size_t>(slot)] = 0;
  prefill_row(ids.data(), slot, n);
  row_lengths_[static_cast<size_t>(slot)] = n;
  const int64_t V = cfg_.vocab_size;
  return std::span<const float>(c_.logits).subspan(static_cast<size_t>(slot * V),
                                                   static_cast<size_t>(V));
}

std::span<const float> CachedInference::step_slots(std::span<const int64_t> slots,
                                                   std::span<const int64_t> ids) {
  const auto rows = static_cast<int64_t>(slots.size());
  check_step_rows(slots, ids);
  length_ = 0;
  const int64_t V = cfg_.vocab_size;
  row_logits_.resize(static_cast<size_t>(rows * V));
  step_positions_.resize(static_cast<size_t>(kStepRowsAtOnce));
  for (int64_t i0 = 0; i0 < rows; i0 += kStepRowsAtOnce) {
    const int64_t n = std::min(kStepRowsAtOnce, rows - i0);
    const int64_t* block = slots.data() + i0;
    for (int64_t r = 0; r < n; ++r) step_positions_[static_cast<size_t>(r)] = slot_length(block[r]);
    model_.embed(c_, ids.data() + i0, n, 0, 0, step_positions_.data());
    c_.vector_rows = kStepRowsAtOnce;
    run(InferencePass{0, n, 0, 0, block, step_positions_.data()}, step_paces_[n]);
    c_.vector_rows = inference::kVectorRows;
    std::copy_n(c_.logits.data(), n * V, row_logits_.data() + i0 * V);
    for (int64_t r = 0; r < n; ++r) ++row_lengths_[static_cast<size_t>(block[r])];
  }
  return row_logits_;
}

void CachedInference::check_prefill_row(int64_t slot, int64_t n) const {
  if (slot < 0 || slot >= batch_ || n < 1 || n > positions_)
    throw std::invalid_argument(
        fmt::format("CachedInference::prefill_slot: row {} of {}, {} ids (capacity {})", slot,
                    batch_, n, positions_));
}

void CachedInference::check_step_rows(std::span<const int64_t> slots,
                                      std::span<const int64_t> ids) const {
  const auto rows = static_cast<int64_t>(slots.size());
  if (rows < 1 || rows > batch_ || ids.size() != slots.size())
    throw std::invalid_argument(fmt::format("CachedInference::step_slots: {} ids for {} rows of {}",
                                            ids.size(), rows, batch_));
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t b = slots[static_cast<size_t>(i)];
    const bool repeated = std::find(slots.begin(), slots.begin() + i, b) != slots.begin() + i;
    if (b < 0 || b >= batch_ || repeated || slot_length(b) < 1 || slot_length(b) >= positions_)
      throw std::logic_error(fmt::format(
          "CachedInference::step_slots: row {} (of {}) is repeated, not prefilled or full", b,
          batch_));
  }
}

// One pass: the window's rows at positions 0..n-1 of row `slot`, then the step's rows.
// Every matrix takes the panels for the window alone, the step alone and both together
// (prefill_step_rows), and each output is one chain of multiply-adds whatever the rows
// beside it; the attention runs each part's kernel; so each row gets the two calls' bits.
std::span<const float> CachedInference::prefill_and_step_slots(int64_t slot,
                                                               std::span<const int64_t> window,
                                                               std::span<const int64_t> slots,
                                                               std::span<const int64_t> ids) {
  const auto n = static_cast<int64_t>(window.size()), s = static_cast<int64_t>(slots.size());
  if (std::find(slots.begin(), slots.end(), slot) != slots.end())
    throw std::logic_error(fmt::format(
        "CachedInference::prefill_and_step_slots: row {} is both prefilled and stepped", slot));
  if (s == 0 || n + s > prefill_step_rows_ || s + 1 > kStepRowsAtOnce)
    return prefill_then_step(slot, window, slots, ids);
  check_prefill_row(slot, n);
  check_step_rows(slots, ids);
  length_ = 0;
  row_lengths_[static_cast<size_t>(slot)] = 0;
  // ids, then positions: the window's 0..n-1, the step rows' lengths
  pass_ids_.assign(window.begin(), window.end());
  pass_ids_.insert(pass_ids_.end(), ids.begin(), ids.end());
  for (int64_t r = 0; r < n; ++r) pass_ids_.push_back(r);
  for (const int64_t b : slots) pass_ids_.push_back(slot_length(b));
  const int64_t* positions = pass_ids_.data() + n + s;
  model_.embed(c_, pass_ids_.data(), n + s, 0, 0, positions);
  c_.vector_rows = kStepRowsAtOnce;
  run(InferencePass{n, n + s, slot, 0, slots.data(), positions + n}, prefill_paces_[n + s]);
  c_.vector_rows = inference::kVectorRows;
  row_lengths_[static_cast<size_t>(slot)] = n;
  for (const int64_t b : slots) ++row_lengths_[static_cast<size_t>(b)];
  const int64_t V = cfg_.vocab_size;
  row_logits_.assign(c_.logits.begin(), c_.logits.begin() + (1 + s) * V);
  return row_logits_;
}

// The two calls, where one pass would not take the panels for every matrix.
std::span<const float> CachedInference::prefill_then_step(int64_t slot,
                                                          std::span<const int64_t> window,
                                                          std::span<const int64_t> slots,
                                                          std::span<const int64_t> ids) {
  if (!slots.empty()) check_step_rows(slots, ids);  // before the prefill changes anything
  const std::span<const float> first = prefill_slot(slot, window);
  std::vector<float> logits(first.begin(), first.end());
  if (!slots.empty()) {
    const std::span<const float> rest = step_slots(slots, ids);
    logits.insert(logits.end(), rest.begin(), rest.end());
  }
  row_logits_ = std::move(logits);
  return row_logits_;
}

}  // namespace nn
