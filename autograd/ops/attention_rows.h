#pragma once
// Internal: what the fused attention's kernels share (ops/attention.cpp, its tiles; and
// ops/attention_onednn.cpp, its products on oneDNN): the problem one call computes, which
// keys a query sees, and the dropout mask of each query row.
#include <algorithm>
#include <cstdint>

#include "autograd/generator.h"

namespace ag::detail::attention {

// What one call computes: R rows of T queries [T, D] against S keys [S, D] and values
// [S, Dv], causal or not, with dropout of rate p drawn from the op's one draw. Under
// autocast (bf16) the products take bfloat16 operands, on one of three kernels.
struct Spec {
  int64_t R, T, S, D, Dv;
  bool causal;
  double p;
  uint64_t draw;
  double scale;
  // query rows per key and value row (grouped-query attention): query row r reads key and
  // value row r / group, so R / group rows of keys and values are stored, never repeated
  int64_t group = 1;
  bool bf16 = false;    // products on bfloat16 operands (autocast)
  bool units = false;   // ... on the CPU's BF16 dot products (tile_kernels_bf16.h)
  bool onednn = false;  // ... on oneDNN's matmuls, blocks of queries and keys of several
                        // rows at a time (attention_onednn.h: AMX where the CPU has it)
  // float64 operands on the blocked kernel of attention_onednn.h with exact products: its
  // twin, which the gradient checks run (tests only: force_attention_blocked_for_tests)
  bool blocked_twin = false;
  // key and value rows one call of the blocked kernel takes (0: chosen from the problem's
  // size; the tuner's sample sets the whole problem's)
  int64_t call_rows = 0;
};

// The operands are stored as bfloat16 (else as float32 holding bfloat16 values under
// autocast, for the FMA kernels)
inline bool bf16_operands(const Spec& s) {
  return s.units || s.onednn;
}

// the key and value row that query row r reads
inline int64_t kv_row(const Spec& s, int64_t r) {
  return r / s.group;
}

// Multiply-adds of the scores and the weighted values (causal: half the square; of
// backward: about twice this), for team_pays and the timers
inline double attention_macs(const Spec& s) {
  return static_cast<double>(s.R) * s.T * s.S * (s.D + s.Dv) * (s.causal ? 0.5 : 1.0);
}

// visible keys of query row i
inline int64_t visible(const Spec& s, int64_t i) {
  return s.causal ? std::min(i + 1, s.S) : s.S;
}

// Row (r, i) draws its dropout mask from its own stream, derived from the op's one draw,
// so rows can run in any order (or thread) and backward can replay any row alone.
inline Generator row_stream(uint64_t draw, int64_t r, int64_t i, int64_t T) {
  return Generator::substream(draw, static_cast<uint64_t>(r * T + i));
}

// keep[j] = 0 or 1/(1-p) for the visible keys of row (r, i); the definition of the mask,
// which the tiles' tile_mask reproduces and attention_dropout_mask replays
template <typename T>
void row_mask(const Spec& s, int64_t r, int64_t i, T* keep) {
  Generator g = row_stream(s.draw, r, i, s.T);
  const T scale = s.p >= 1.0 ? T(0) : static_cast<T>(1.0 / (1.0 - s.p));
  for (int64_t j = 0; j < visible(s, i); ++j) keep[j] = g.uniform() < s.p ? T(0) : scale;
}

}  // namespace ag::detail::attention
