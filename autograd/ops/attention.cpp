// Fused scaled dot-product attention, flash style: one kernel forward, one backward, and no
// [T, S] matrix in memory. Both work on tiles of up to 64 queries of one (batch, head) row
// against the keys those queries can see, in per-thread scratch of one tile; forward saves
// only each query's log-sum-exp, and backward recomputes the softmax from it.
// R = rows (product of leading dims), T = queries, S = keys, D = head dim, Dv = value dim.
//
// Forward, for a tile of queries x (j runs over the keys x sees):
//   s[j][x] = scale k_j . q_x;  m_x = max_j s;  l_x = sum_j exp(s - m_x);  lse_x = m_x + log l_x
//   o_x = (1 / l_x) sum_j exp(s[j][x] - m_x) keep[j][x] v_j
// Backward, for each row r its tiles in order, so that dk and dv sum in a fixed order:
//   p = exp(s - lse);  a = p keep;  dp[j][x] = v_j . do_x;  delta_x = do_x . o_x
//   ds = p (dp keep - delta_x) scale;  dv_j += sum_x a do_x;  dk_j += sum_x ds q_x;
//   dq_x = sum_j ds k_j
// delta_x equals sum_j a dp (since o_x = sum_j a v_j), so backward reads it off the saved
// output instead of summing a pass over the tile first.
//
// Tiles are key-major, s[j][x] with the tile's queries across (ops/tile_kernels.h holds
// the products on them): the softmax statistics of the 64 queries are then lane-wise
// vector operations down the keys, the 64 rows' dropout generators advance lane-wise too,
// and only the tile's q and do need transposing (keys are read as stored). Work is split
// by (r, tile) forward and by r backward, and each tile's arithmetic is the same whichever
// thread runs it, so results do not depend on the thread count.
// float64 takes the same path, with std::exp, so it stays exact.
//
// Under a bf16 autocast scope (float32 inputs) the products take bfloat16 operands and
// accumulate in float32, as autocast's GEMMs do: q, k, v and do are rounded to bfloat16 as
// they are packed, and so are the tiles that enter a product (p keep before p v; a and ds
// before dv, dk and dq); the softmax statistics (max, sum, lse, delta) stay float32. The
// operands are held as float32 with bfloat16 values and multiplied by the same tile
// kernels: a product of two bfloat16 values is exact in float32 (see ops/gemm.h for why
// FMAs rather than BF16 dot products).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/ops/attention_onednn.h"
#include "autograd/ops/attention_rows.h"
#include "autograd/ops/gemm_tuning.h"
#include "autograd/ops/heads.h"
#include "autograd/ops/tile_kernels.h"
#include "autograd/ops/tile_kernels_bf16.h"
#include "autograd/profile.h"
#include "autograd/threading.h"
#include "autograd/vec_math.h"

namespace ag {

namespace {

using namespace tile;
using detail::attention::attention_macs;
using detail::attention::bf16_operands;
using detail::attention::row_stream;
using detail::attention::Spec;
using detail::attention::visible;
using tile::bf16::word;

// Which kernels take the bf16 products: the FMA tiles, the BF16 units' tiles, or oneDNN;
// or none where float32 was measured faster (the attention then runs as in fp32)
enum class Products { fma, units, onednn, f32 };
Products chosen_products(const Spec& s);  // below

// s.bf16 under autocast where bfloat16 pays, and then s.units or s.onednn where those take
// the products
void set_precision(Spec& s, DType dtype) {
  s.bf16 = detail::autocast_to_bf16(dtype);
  s.blocked_twin = dtype == DType::Float64 && detail::attention::blocked_twin_for_tests();
  if (!s.bf16) return;
  const Products products = chosen_products(s);
  s.bf16 = products != Products::f32;
  s.units = products == Products::units;
  s.onednn = products == Products::onednn;
}

// Word buffers of the BF16-unit products, empty unless s.units: a tile paired (a), the
// other operand (b: q or do transposed, v, do or q paired), and backward's keys paired once
// per row for dq (kv)
struct UnitWords {
  explicit UnitWords(const Spec& s) {
    if (!s.units) return;
    const int64_t width = std::max(s.D, s.Dv), padded = round_up(width, kLanes<float>);
    const int64_t key_pairs = (s.S + 1) / 2;
    a.resize(key_pairs * kTile);
    b.resize(std::max({width / 2 * kTile, key_pairs * padded, kTile / 2 * padded}));
    kv.resize(key_pairs * round_up(s.D, kLanes<float>));
  }
  std::vector<word> a, b, kv;
};

// The keys j < nk of a key-major tile rounded to bfloat16 values, when s.bf16
template <typename T>
void round_tile(const Spec& s, int64_t nk, T* tile) {
  if constexpr (std::is_same_v<T, float>) {
    if (!s.bf16) return;
    AG_SIMD
    for (int64_t i = 0; i < nk * kTile; ++i) tile[i] = bf16_rounded(tile[i]);
  }
}

// ---- dropout masks

// keep[j * kTile + x] = row_mask of query row i0 + x at key j, for j < nk and every x that
// sees key j (other entries hold 0, 1/(1-p) or stale values of those, never NaN). One
// stream alone is a serial chain; the tile's rows advance side by side instead, 8 to a
// vector and 4 vectors at once to hide the step's latency, each lane through
// Generator::step and tested as uniform() < p is, by Generator::uniform_cutoff.
// attention_dropout_mask (test_hooks.h) replays Generator itself, so the tests that compare
// the fused op with the composed ops guard that the two agree.
template <typename T>
void tile_mask(const Spec& s, int64_t r, int64_t i0, int64_t nk, T* keep) {
  typedef uint64_t u64v __attribute__((vector_size(64)));
  typedef int32_t i32v __attribute__((vector_size(32)));
  constexpr int G = 4, W = 8 * G;  // vectors advanced together, and the rows they hold
  static_assert(kTile % W == 0);
  const uint64_t cutoff = Generator::uniform_cutoff(s.p);
  const T scale = s.p >= 1.0 ? T(0) : static_cast<T>(1.0 / (1.0 - s.p));
  using bits_t = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
  const bits_t scale_bits = std::bit_cast<bits_t>(scale);
  for (int64_t x0 = 0; x0 < kTile; x0 += W) {
    u64v v0[G], v1[G], v2[G], v3[G];  // the four state words of 8 G rows
    for (int g = 0; g < G; ++g)
      for (int l = 0; l < 8; ++l) {
        const Generator::State st = row_stream(s.draw, r, i0 + x0 + 8 * g + l, s.T).state();
        v0[g][l] = st[0], v1[g][l] = st[1], v2[g][l] = st[2], v3[g][l] = st[3];
      }
    // these rows see no key past their last one's (later draws are never used)
    const int64_t n = s.causal ? std::min(nk, i0 + x0 + W) : nk;
    for (int64_t j = 0; j < n; ++j) {
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        const u64v u = Generator::step(v0[g], v1[g], v2[g], v3[g]);
        const auto dropped = (u >> 11) < cutoff;  // all ones where uniform() < p
        T* dst = keep + j * kTile + x0 + 8 * g;
        if constexpr (sizeof(T) == 8) {
          const u64v k = ~reinterpret_cast<const u64v&>(dropped) & scale_bits;
          std::memcpy(dst, &k, sizeof(k));
        } else {
          const i32v k = ~__builtin_convertvector(dropped, i32v) & static_cast<int32_t>(scale_bits);
          std::memcpy(dst, &k, sizeof(k));
        }
      }
    }
  }
}

// ---- forward

// Per-thread scratch of the forward, sized once: a key-major tile, its mask, the tile's
// scaled q^T, and padded copies where Dv is not a multiple of the lanes.
template <typename T>
struct ForwardScratch {
  explicit ForwardScratch(const Spec& s)
      : Dvp(round_up(s.Dv, kLanes<T>)),
        st(round_up(s.S, kStrip) * kTile),
        keep(s.p > 0 ? s.S * kTile : 0),
        qt(s.D * kTile),
        vpad(Dvp != s.Dv ? s.S * Dvp : 0),
        opad(Dvp != s.Dv ? kTile * Dvp : 0),
        words(s) {}
  int64_t Dvp;
  std::vector<T> st, keep, qt, vpad, opad;
  UnitWords words;
  alignas(64) T mx[kTile], total[kTile];
};

// Causally, scores of hidden keys become -inf (exp gives exactly 0) where the lane passes
// go, 0 where they do not; both overwrite the stale values of lanes key_major_tile skipped.
template <typename T>
void hide_future(bool causal, int64_t i0, int64_t nk, T* st) {
  if (!causal) return;
  for (int64_t j = i0 + 1; j < nk; ++j) {
    T* sj = st + j * kTile;
    const int64_t h = hidden_lanes<T>(causal, i0, j);
    std::fill(sj, sj + h, T(0));
    std::fill(sj + h, sj + std::min(j - i0, kTile), -std::numeric_limits<T>::infinity());
  }
}

// The scores st of one tile become exp(s - m_x) keep, with m_x = max_j s (mx) and
// total_x = sum_j exp(s - m_x) before dropout. Lanes past the tile's queries are never
// read back, so they need no masking.
template <typename T>
void tile_softmax(const Spec& s, int64_t i0, int64_t nk, ForwardScratch<T>& w) {
  for (int64_t x = 0; x < kTile; ++x) w.mx[x] = -std::numeric_limits<T>::infinity(), w.total[x] = 0;
  for (int64_t j = 0; j < nk; ++j) {
    const T* sj = w.st.data() + j * kTile;
    AG_SIMD
    for (int64_t x = hidden_lanes<T>(s.causal, i0, j); x < kTile; ++x)
      w.mx[x] = sj[x] > w.mx[x] ? sj[x] : w.mx[x];
  }
  for (int64_t j = 0; j < nk; ++j) {
    T* sj = w.st.data() + j * kTile;
    const int64_t h = hidden_lanes<T>(s.causal, i0, j);
    AG_SIMD
    for (int64_t x = h; x < kTile; ++x) {
      const T e = detail::exp_fast(sj[x] - w.mx[x]);
      w.total[x] += e;
      sj[x] = e;
    }
    if (s.p > 0) {
      const T* kj = w.keep.data() + j * kTile;
      AG_SIMD
      for (int64_t x = h; x < kTile; ++x) sj[x] *= kj[x];
    }
  }
}

// The scores of a tile (in w.st) become its probabilities, times the dropout mask, and
// each query's log-sum-exp is stored
template <typename T>
void tile_probabilities(const Spec& s, int64_t r, int64_t i0, int64_t m, int64_t nk, T* lse,
                        ForwardScratch<T>& w) {
  if (s.p > 0) tile_mask(s, r, i0, nk, w.keep.data());
  hide_future(s.causal, i0, nk, w.st.data());
  tile_softmax(s, i0, nk, w);
  for (int64_t x = 0; x < m; ++x) lse[r * s.T + i0 + x] = w.mx[x] + std::log(w.total[x]);
}

// o of the tile's m queries at ob: the products st^T v (out, ob itself or a padded copy)
// over each query's total
template <typename T>
void normalised_out(const Spec& s, int64_t m, const T* out, const ForwardScratch<T>& w, T* ob) {
  for (int64_t x = 0; x < m; ++x) {
    const T inv = T(1) / w.total[x];
    for (int64_t c = 0; c < s.Dv; ++c) ob[x * s.Dv + c] = out[x * w.Dvp + c] * inv;
  }
}

// o and lse of the tile of row r starting at query i0
template <typename T>
void forward_tile(const Spec& s, int64_t r, int64_t i0, const T* q, const T* k, const T* v, T* o,
                  T* lse, ForwardScratch<T>& w) {
  const int64_t m = std::min(kTile, s.T - i0), nk = visible(s, i0 + m - 1);
  transpose_tile(q + (r * s.T + i0) * s.D, m, s.D, static_cast<T>(s.scale), w.qt.data());
  const int64_t kr = kv_row(s, r);
  key_major_tile(s.causal, i0, nk, k + kr * s.S * s.D, s.D, w.qt.data(), w.st.data());
  tile_probabilities(s, r, i0, m, nk, lse, w);
  round_tile(s, nk, w.st.data());
  T* ob = o + (r * s.T + i0) * s.Dv;
  const T* vb = padded(v + kr * s.S * s.Dv, nk, s.Dv, w.Dvp, w.vpad.data());
  T* out = w.Dvp == s.Dv ? ob : w.opad.data();
  query_rows(s.causal, i0, m, nk, w.st.data(), vb, w.Dvp, w.Dvp, out, w.Dvp);
  normalised_out(s, m, out, w, ob);
}

// The same on the BF16 units, from bfloat16 q, k and v: the probabilities are rounded to
// bfloat16 as they are paired
void forward_tile(const Spec& s, int64_t r, int64_t i0, const bfloat16* q, const bfloat16* k,
                  const bfloat16* v, float* o, float* lse, ForwardScratch<float>& w) {
  namespace u = tile::bf16;
  const int64_t m = std::min(kTile, s.T - i0), nk = visible(s, i0 + m - 1);
  word* a = w.words.a.data();
  word* b = w.words.b.data();
  const int64_t kr = kv_row(s, r);
  u::transposed_words(q + (r * s.T + i0) * s.D, m, s.D, b);
  u::key_major_tile(s.causal, i0, nk, u::words(k + kr * s.S * s.D), s.D / 2, b,
                    static_cast<float>(s.scale), w.st.data());
  tile_probabilities(s, r, i0, m, nk, lse, w);
  u::key_pairs(w.st.data(), nk, a);
  u::paired_rows(v + kr * s.S * s.Dv, nk, s.Dv, w.Dvp, b);
  float* ob = o + (r * s.T + i0) * s.Dv;
  float* out = w.Dvp == s.Dv ? ob : w.opad.data();
  u::query_rows(s.causal, i0, m, nk, a, b, w.Dvp, out, w.Dvp);
  normalised_out(s, m, out, w, ob);
}

// o and lse for every (r, tile); tiles are independent, so they are the unit of work
// (dynamic: causal tiles differ in cost)
template <typename T, typename In>
void sdpa_forward(const Spec& s, const In* q, const In* k, const In* v, T* o, T* lse) {
  const int64_t tiles = (s.T + kTile - 1) / kTile;
#pragma omp parallel if (detail::team_pays(attention_macs(s) / detail::kMacsPerElement))
  {
    ForwardScratch<T> w(s);
#pragma omp for schedule(dynamic)
    for (int64_t item = 0; item < s.R * tiles; ++item)
      forward_tile(s, item / tiles, (item % tiles) * kTile, q, k, v, o, lse, w);
  }
}

// ---- backward

// Per-thread scratch of the backward: key-major tiles of s and dp, the mask, the tile's
// scaled q^T and do^T, each query's lse and delta, and padded operands and accumulators
// where D or Dv is not a multiple of the lanes.
template <typename T>
struct BackwardScratch {
  explicit BackwardScratch(const Spec& s)
      : Dp(round_up(s.D, kLanes<T>)),
        Dvp(round_up(s.Dv, kLanes<T>)),
        st(round_up(s.S, kStrip) * kTile),
        dpt(round_up(s.S, kStrip) * kTile),
        keep(s.p > 0 ? s.S * kTile : 0),
        qt(s.D * kTile),
        dot(s.Dv * kTile),
        kpad(Dp != s.D ? s.S * Dp : 0),
        qpad(Dp != s.D ? kTile * Dp : 0),
        dkpad(Dp != s.D ? s.S * Dp : 0),
        dqpad(Dp != s.D ? kTile * Dp : 0),
        dopad(Dvp != s.Dv ? kTile * Dvp : 0),
        dvpad(Dvp != s.Dv ? s.S * Dvp : 0),
        words(s) {}
  int64_t Dp, Dvp;
  std::vector<T> st, dpt, keep, qt, dot, kpad, qpad, dkpad, dqpad, dopad, dvpad;
  UnitWords words;
  alignas(64) T l[kTile], delta[kTile];
};

// st becomes a = p keep and dpt becomes ds for the m queries of the tile at i0; hidden
// entries 0, by selection in the vectors the pass covers (skipped lanes of st and dpt hold
// stale values)
template <typename T>
void tile_softmax_backward(const Spec& s, int64_t i0, int64_t m, int64_t nk,
                           BackwardScratch<T>& w) {
  const T scale = static_cast<T>(s.scale);
  for (int64_t j = 0; j < nk; ++j) {
    T* sj = w.st.data() + j * kTile;
    T* gj = w.dpt.data() + j * kTile;
    const int64_t first = s.causal ? j - i0 : 0, h = hidden_lanes<T>(s.causal, i0, j);
    std::fill(sj, sj + h, T(0));
    std::fill(gj, gj + h, T(0));
    if (s.p > 0) {
      const T* kj = w.keep.data() + j * kTile;
      AG_SIMD
      for (int64_t x = h; x < kTile; ++x) {
        const bool seen = x >= first && x < m;
        const T pw = detail::exp_fast(sj[x] - w.l[x]);
        gj[x] = seen ? pw * (gj[x] * kj[x] - w.delta[x]) * scale : T(0);
        sj[x] = seen ? pw * kj[x] : T(0);
      }
    } else {
      AG_SIMD
      for (int64_t x = h; x < kTile; ++x) {
        const bool seen = x >= first && x < m;
        const T pw = detail::exp_fast(sj[x] - w.l[x]);
        gj[x] = seen ? pw * (gj[x] - w.delta[x]) * scale : T(0);
        sj[x] = seen ? pw : T(0);
      }
    }
  }
}

// Each query's lse (w.l) and delta = do . o (w.delta), for the tile of row r at i0
template <typename T, typename In>
void tile_statistics(const Spec& s, int64_t r, int64_t i0, int64_t m, const T* lse, const In* ob,
                     const In* dob, BackwardScratch<T>& w) {
  for (int64_t x = 0; x < kTile; ++x) {
    w.l[x] = x < m ? lse[r * s.T + i0 + x] : T(0);
    T dd = 0;
    if (x < m) {
#pragma omp simd reduction(+ : dd)
      for (int64_t c = 0; c < s.Dv; ++c) dd += T(dob[x * s.Dv + c]) * T(ob[x * s.Dv + c]);
    }
    w.delta[x] = dd;
  }
}

// One tile of row r at query i0: dq of its queries, and its share of dk and dv added into
// the row's accumulators (written where the keys are fresh, see key_rows)
template <typename T>
void backward_tile(const Spec& s, int64_t r, int64_t i0, int64_t fresh, const T* q, const T* k,
                   const T* v, const T* o, const T* lse, const T* dout, const T* kb, T* dq,
                   T* dk_acc, T* dv_acc, BackwardScratch<T>& w) {
  const int64_t m = std::min(kTile, s.T - i0), nk = visible(s, i0 + m - 1);
  const T* qb = q + (r * s.T + i0) * s.D;
  const T* dob = dout + (r * s.T + i0) * s.Dv;
  transpose_tile(qb, m, s.D, static_cast<T>(s.scale), w.qt.data());
  transpose_tile(dob, m, s.Dv, T(1), w.dot.data());
  const int64_t kr = kv_row(s, r);
  key_major_tile(s.causal, i0, nk, k + kr * s.S * s.D, s.D, w.qt.data(), w.st.data());
  key_major_tile(s.causal, i0, nk, v + kr * s.S * s.Dv, s.Dv, w.dot.data(), w.dpt.data());
  if (s.p > 0) tile_mask(s, r, i0, nk, w.keep.data());
  tile_statistics(s, r, i0, m, lse, o + (r * s.T + i0) * s.Dv, dob, w);
  tile_softmax_backward(s, i0, m, nk, w);
  round_tile(s, nk, w.st.data());
  round_tile(s, nk, w.dpt.data());
  key_rows(s.causal, i0, m, nk, fresh, w.st.data(), padded(dob, m, s.Dv, w.Dvp, w.dopad.data()),
           w.Dvp, w.Dvp, dv_acc, w.Dvp);
  key_rows(s.causal, i0, m, nk, fresh, w.dpt.data(), padded(qb, m, s.D, w.Dp, w.qpad.data()), w.Dp,
           w.Dp, dk_acc, w.Dp);
  T* dqb = dq + (r * s.T + i0) * s.D;
  T* dq_out = w.Dp == s.D ? dqb : w.dqpad.data();
  query_rows(s.causal, i0, m, nk, w.dpt.data(), kb, w.Dp, w.Dp, dq_out, w.Dp);
  unpad(dq_out, m, s.D, w.Dp, dqb);
}

// The same on the BF16 units, from bfloat16 q, k, v, o and do (the row's keys paired in
// w.words.kv by row_keys); a and ds are rounded to bfloat16 as they are paired
void backward_tile(const Spec& s, int64_t r, int64_t i0, int64_t fresh, const bfloat16* q,
                   const bfloat16* k, const bfloat16* v, const bfloat16* o, const float* lse,
                   const bfloat16* dout, const float*, float* dq, float* dk_acc, float* dv_acc,
                   BackwardScratch<float>& w) {
  namespace u = tile::bf16;
  const int64_t m = std::min(kTile, s.T - i0), nk = visible(s, i0 + m - 1);
  const bfloat16* qb = q + (r * s.T + i0) * s.D;
  const bfloat16* dob = dout + (r * s.T + i0) * s.Dv;
  word* a = w.words.a.data();
  word* b = w.words.b.data();
  const int64_t kr = kv_row(s, r);
  u::transposed_words(qb, m, s.D, b);
  u::key_major_tile(s.causal, i0, nk, u::words(k + kr * s.S * s.D), s.D / 2, b,
                    static_cast<float>(s.scale), w.st.data());
  u::transposed_words(dob, m, s.Dv, b);
  u::key_major_tile(s.causal, i0, nk, u::words(v + kr * s.S * s.Dv), s.Dv / 2, b, 1.0f,
                    w.dpt.data());
  if (s.p > 0) tile_mask(s, r, i0, nk, w.keep.data());
  tile_statistics(s, r, i0, m, lse, o + (r * s.T + i0) * s.Dv, dob, w);
  tile_softmax_backward(s, i0, m, nk, w);
  u::lane_pairs(w.st.data(), nk, a);
  u::paired_rows(dob, m, s.Dv, w.Dvp, b);
  u::key_rows(s.causal, i0, m, nk, fresh, a, b, w.Dvp, dv_acc, w.Dvp);
  u::lane_pairs(w.dpt.data(), nk, a);
  u::paired_rows(qb, m, s.D, w.Dp, b);
  u::key_rows(s.causal, i0, m, nk, fresh, a, b, w.Dp, dk_acc, w.Dp);
  u::key_pairs(w.dpt.data(), nk, a);
  float* dqb = dq + (r * s.T + i0) * s.D;
  float* dq_out = w.Dp == s.D ? dqb : w.dqpad.data();
  u::query_rows(s.causal, i0, m, nk, a, w.words.kv.data(), w.Dp, dq_out, w.Dp);
  unpad(dq_out, m, s.D, w.Dp, dqb);
}

// The keys of row r as dq's product reads them: padded to whole vectors for the FMA
// kernels, or paired into w.words.kv for the BF16 units (which then read no kb)
template <typename T>
const T* row_keys(const Spec& s, const T* kr, BackwardScratch<T>& w) {
  return padded(kr, s.S, s.D, w.Dp, w.kpad.data());
}

const float* row_keys(const Spec& s, const bfloat16* kr, BackwardScratch<float>& w) {
  tile::bf16::paired_rows(kr, s.S, s.D, w.Dp, w.words.kv.data());
  return nullptr;
}

// dq, dk, dv; a key row kr is the unit of work: its group of query rows in order, their
// tiles accumulating into dk and dv in order (the same sums on any number of threads)
template <typename T, typename In>
void sdpa_backward(const Spec& s, const In* q, const In* k, const In* v, const In* o, const T* lse,
                   const In* dout, T* dq, T* dk, T* dv) {
#pragma omp parallel if (detail::team_pays(2 * attention_macs(s) / detail::kMacsPerElement))
  {
    BackwardScratch<T> w(s);
#pragma omp for schedule(dynamic)
    for (int64_t kr = 0; kr < s.R / s.group; ++kr) {
      T* dkr = dk + kr * s.S * s.D;
      T* dvr = dv + kr * s.S * s.Dv;
      const T* kb = row_keys(s, k + kr * s.S * s.D, w);
      T* dk_acc = w.Dp == s.D ? dkr : w.dkpad.data();
      T* dv_acc = w.Dvp == s.Dv ? dvr : w.dvpad.data();
      for (int64_t r = kr * s.group; r < (kr + 1) * s.group; ++r) {
        // keys before `fresh` have dk, dv rows from an earlier tile or query row
        int64_t fresh = r == kr * s.group ? 0 : s.S;
        for (int64_t i0 = 0; i0 < s.T; i0 += kTile) {
          backward_tile(s, r, i0, fresh, q, k, v, o, lse, dout, kb, dq, dk_acc, dv_acc, w);
          fresh = std::max(fresh, visible(s, std::min(i0 + kTile, s.T) - 1));
        }
        // keys no query sees (causal, S > T)
        std::fill(dk_acc + fresh * w.Dp, dk_acc + s.S * w.Dp, T(0));
        std::fill(dv_acc + fresh * w.Dvp, dv_acc + s.S * w.Dvp, T(0));
      }
      unpad(dk_acc, s.S, s.D, w.Dp, dkr);
      unpad(dv_acc, s.S, s.Dv, w.Dvp, dvr);
    }
  }
}

// ---- which kernels take the bf16 products: measured (ops/gemm_tuning.h)

// The rows of s a class is timed on: as many as one call of the blocked oneDNN kernel takes
// for the whole problem (what it brings is one call for them all), for every candidate
int64_t sample_rows(const Spec& s) {
  return detail::attention::blocking_of(s).kv_rows * s.group;
}

// Seconds the sample rows of s (forward, then backward) take on the calling thread on
// `products`, on made-up operands (the work does not depend on the values)
template <typename In>
double seconds_of_sample(Spec s, Products products) {
  s.R = sample_rows(s), s.call_rows = s.R / s.group, s.p = 0, s.units = products == Products::units,
  s.onednn = products == Products::onednn;
  auto values = [](int64_t n) {
    std::vector<In> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = In(static_cast<float>((i * 37) % 17 - 8) / 16.0f);
    return v;
  };
  const int64_t R = s.R, KV = s.R / s.group;
  const auto q = values(R * s.T * s.D), k = values(KV * s.S * s.D), v = values(KV * s.S * s.Dv),
             o_in = values(R * s.T * s.Dv), dout = values(R * s.T * s.Dv);
  std::vector<float> o(R * s.T * s.Dv), lse(R * s.T), dq(R * s.T * s.D), dk(KV * s.S * s.D),
      dv(KV * s.S * s.Dv);
  OmpThreadsScope one_thread(1);
  const auto start = std::chrono::steady_clock::now();
  if constexpr (std::is_same_v<In, bfloat16>) {
    if (s.onednn) {
      detail::attention::blocked_forward(s, q.data(), k.data(), v.data(), o.data(), lse.data());
      detail::attention::blocked_backward(s, q.data(), k.data(), v.data(), o_in.data(), lse.data(),
                                          dout.data(), dq.data(), dk.data(), dv.data());
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  }
  sdpa_forward(s, q.data(), k.data(), v.data(), o.data(), lse.data());
  sdpa_backward(s, q.data(), k.data(), v.data(), o_in.data(), lse.data(), dout.data(), dq.data(),
                dk.data(), dv.data());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The kernels for s's bf16 products: as forced, else the fastest of those this CPU has for
// s's size class, measured once (the rule where nothing may be measured: the BF16 units on
// AMD CPUs that have them, the FMA kernels elsewhere); or none, the attention in float32,
// where the same row in float32 was measured faster than that (gemm_tuning.h's
// bf16_class_pays). The BF16 units pair values along the sums, so they need even D and Dv.
Products chosen_products(const Spec& s) {
  using detail::GemmKernel;
  using tile::bf16::Forced;
  const bool units = s.D % 2 == 0 && s.Dv % 2 == 0 && tile::bf16::units_available();
  const bool onednn = detail::attention::onednn_available(s);
  switch (tile::bf16::forced()) {
    case Forced::fma: return Products::fma;
    case Forced::units: return units ? Products::units : Products::fma;
    case Forced::onednn:
      if (!onednn)
        throw std::invalid_argument(
            "ATTOGRAD_ATTENTION_BF16=onednn: oneDNN has no bfloat16 kernel for the attention's "
            "products on this CPU");
      return Products::onednn;
    case Forced::none: break;
  }
  std::vector<GemmKernel> candidates{GemmKernel::attention_fma};
  if (units) candidates.push_back(GemmKernel::attention_bf16);
  if (onednn) candidates.push_back(GemmKernel::attention_onednn);
  const GemmKernel rule =
      units && tile::bf16::rule_units() ? GemmKernel::attention_bf16 : GemmKernel::attention_fma;
  Spec sample = s;
  sample.R = sample_rows(s);
  const double macs = 3 * attention_macs(sample);  // forward, and backward's twice as many
  const detail::GemmClass cls =
      detail::attention_class(s.causal, s.T, s.S, s.D, s.D % 2 != 0 || s.Dv % 2 != 0);
  const GemmKernel chosen = detail::tuned_kernel(cls, candidates, rule, macs, [&](GemmKernel k) {
    return k == GemmKernel::attention_fma    ? seconds_of_sample<float>(s, Products::fma)
           : k == GemmKernel::attention_bf16 ? seconds_of_sample<bfloat16>(s, Products::units)
                                             : seconds_of_sample<bfloat16>(s, Products::onednn);
  });
  if (detail::bf16_fallback_enabled()) {  // the same row in float32, to weigh bf16 against
    detail::GemmClass in_f32 = cls;
    in_f32.bf16 = false;
    static constexpr GemmKernel kF32[] = {GemmKernel::attention_f32};
    Spec f32_row = s;
    f32_row.bf16 = false;
    detail::tuned_kernel(in_f32, kF32, GemmKernel::attention_f32, macs, [&](GemmKernel) {
      return seconds_of_sample<float>(f32_row, Products::fma);
    });
    if (!detail::bf16_class_pays(cls)) return Products::f32;
  }
  return chosen == GemmKernel::attention_bf16     ? Products::units
         : chosen == GemmKernel::attention_onednn ? Products::onednn
                                                  : Products::fma;
}

// ---- the ops

Spec check_attention_inputs(const Tensor& q, const Tensor& k, const Tensor& v) {
  auto fail = [&](const std::string& why) {
    return std::invalid_argument(fmt::format("scaled_dot_product_attention: {} (q {}, k {}, v {})",
                                             why, shape_str(q.shape()), shape_str(k.shape()),
                                             shape_str(v.shape())));
  };
  if (q.dim() < 2 || k.dim() != q.dim() || v.dim() != q.dim())
    throw fail("q, k and v need the same rank, at least 2");
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype()) throw fail("dtypes differ");
  const int64_t r = q.dim();
  for (int64_t x = 0; x < r - 2; ++x)
    if (k.shape()[x] != q.shape()[x] || v.shape()[x] != q.shape()[x])
      throw fail("leading dims differ");
  Spec s{};
  s.T = q.shape()[r - 2];
  s.D = q.shape()[r - 1];
  s.S = k.shape()[r - 2];
  s.Dv = v.shape()[r - 1];
  s.R = shape_numel(Shape(q.shape().begin(), q.shape().end() - 2));
  if (k.shape()[r - 1] != s.D) throw fail("q and k differ in their last dim");
  if (v.shape()[r - 2] != s.S) throw fail("k and v differ in their number of keys");
  if (s.S == 0 && s.T > 0) throw fail("there are no keys to attend to");
  return s;
}

// t's values rounded to bfloat16 when s.bf16, else t: in place when t is a packed copy of
// ours (fresh), in a new tensor otherwise (t may be the caller's)
Tensor bf16_values(const Spec& s, const Tensor& t, bool fresh) {
  if (!s.bf16) return t;
  Tensor c = t.contiguous();
  Tensor out = fresh ? c : empty(c.shape(), c.dtype());
  round_to_bfloat16(c.data<float>(), out.data<float>(), c.numel());
  return out;
}

// t as the kernels read it: a bfloat16 copy for the BF16 units and oneDNN; else
// bf16_values(t) (float32 holding bfloat16 values under autocast, t itself otherwise), in a
// new tensor
Tensor kernel_operand(const Spec& s, const Tensor& t) {
  return bf16_operands(s) ? to_bfloat16(t) : bf16_values(s, t.contiguous(), false);
}

// The operand type of the kernels for an op on `dtype`
DType kernel_dtype(const Spec& s, DType dtype) {
  return bf16_operands(s) ? DType::BFloat16 : dtype;
}

// What backward keeps of a float32 operand: under autocast, its bfloat16 values in half
// the memory (exact for q, k and v, which hold bfloat16 values already; o is rounded, which
// changes backward's delta = do . o by a bfloat16 rounding); the tensor itself otherwise.
// kept_operand undoes it for the FMA kernels (the BF16 units and oneDNN read bfloat16).
Tensor kept(const Spec& s, const Tensor& t) {
  return s.bf16 && t.dtype() == DType::Float32 ? to_bfloat16(t) : t;
}

Tensor kept_operand(const Spec& s, const Tensor& t) {
  return !bf16_operands(s) && t.dtype() == DType::BFloat16 ? t.to(DType::Float32) : t;
}

// The kernel of s's products, for the step's breakdown (profile.h)
const char* products_name(const Spec& s) {
  using detail::GemmKernel;
  return detail::kernel_name(s.onednn  ? GemmKernel::attention_onednn
                             : s.units ? GemmKernel::attention_bf16
                             : s.bf16  ? GemmKernel::attention_fma
                                       : GemmKernel::attention_f32);
}

// sdpa_forward on the kernels' operands (kernel_operand), o and lse of the op's dtype
void run_forward(const Spec& s, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o,
                 Tensor& lse) {
  profile::Timer timer("attention forward");
  if (timer.on()) timer.describe("attention forward", products_name(s), 2 * attention_macs(s));
  if (s.onednn)
    return detail::attention::blocked_forward(s, q.data<bfloat16>(), k.data<bfloat16>(),
                                              v.data<bfloat16>(), o.data<float>(),
                                              lse.data<float>());
  if (s.blocked_twin)
    return detail::attention::blocked_forward(s, q.data<double>(), k.data<double>(),
                                              v.data<double>(), o.data<double>(),
                                              lse.data<double>());
  if (s.units)
    return sdpa_forward(s, q.data<bfloat16>(), k.data<bfloat16>(), v.data<bfloat16>(),
                        o.data<float>(), lse.data<float>());
  AG_DISPATCH_FLOAT(o.dtype(), "scaled_dot_product_attention", [&] {
    sdpa_forward(s, q.data<scalar_t>(), k.data<scalar_t>(), v.data<scalar_t>(), o.data<scalar_t>(),
                 lse.data<scalar_t>());
  });
}

// sdpa_backward likewise: dq, dk and dv (of lse's dtype) from the kernels' operands and do
void run_backward(const Spec& s, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                  const Tensor& lse, const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv) {
  profile::Timer timer("attention backward");
  if (timer.on()) timer.describe("attention backward", products_name(s), 4 * attention_macs(s));
  if (s.onednn)
    return detail::attention::blocked_backward(
        s, q.data<bfloat16>(), k.data<bfloat16>(), v.data<bfloat16>(), o.data<bfloat16>(),
        lse.data<float>(), dout.data<bfloat16>(), dq.data<float>(), dk.data<float>(),
        dv.data<float>());
  if (s.blocked_twin)
    return detail::attention::blocked_backward(
        s, q.data<double>(), k.data<double>(), v.data<double>(), o.data<double>(),
        lse.data<double>(), dout.data<double>(), dq.data<double>(), dk.data<double>(),
        dv.data<double>());
  if (s.units)
    return sdpa_backward(s, q.data<bfloat16>(), k.data<bfloat16>(), v.data<bfloat16>(),
                         o.data<bfloat16>(), lse.data<float>(), dout.data<bfloat16>(),
                         dq.data<float>(), dk.data<float>(), dv.data<float>());
  AG_DISPATCH_FLOAT(lse.dtype(), "scaled_dot_product_attention backward", [&] {
    sdpa_backward(s, q.data<scalar_t>(), k.data<scalar_t>(), v.data<scalar_t>(), o.data<scalar_t>(),
                  lse.data<scalar_t>(), dout.data<scalar_t>(), dq.data<scalar_t>(),
                  dk.data<scalar_t>(), dv.data<scalar_t>());
  });
}

// Columns [offset, offset + C) of x [B, T, stride] split into heads, into dst [B, H, T, D] of
// the kernels' operand type (kernel_dtype): rounded to bfloat16 on the way, or under
// autocast on the FMA kernels rounded in place after
void gather_heads(const Spec& s, const Tensor& x, int64_t offset, int64_t stride, int64_t B,
                  int64_t H, const Tensor& dst) {
  if (dst.dtype() == DType::BFloat16)
    return detail::gather_heads_rounded(dst.data<bfloat16>(), x.data<float>() + offset, B, s.T, H,
                                        s.D, stride);
  AG_DISPATCH_FLOAT(x.dtype(), "causal_self_attention", [&] {
    detail::copy_heads(detail::HeadCopy::gather, dst.data<scalar_t>(), x.data<scalar_t>() + offset,
                       B, s.T, H, s.D, stride);
  });
  bf16_values(s, dst, true);
}

// Checks the dropout arguments of op `who` and fills in s.p and s.draw, taking the op's
// one draw from gen when it drops anything
void take_dropout(const char* who, double dropout_p, Generator* gen, Spec& s) {
  if (!(dropout_p >= 0.0 && dropout_p <= 1.0))
    throw std::invalid_argument(
        fmt::format("{}: dropout_p must be in [0, 1], got {}", who, dropout_p));
  if (dropout_p > 0 && gen == nullptr)
    throw std::invalid_argument(
        fmt::format("{}: dropout_p > 0 needs a generator for the mask", who));
  s.p = dropout_p;
  s.draw = dropout_p > 0 ? gen->next_u64() : 0;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    double dropout_p, Generator* gen, double scale) {
  const profile::Timer timer("scaled_dot_product_attention");
  Spec s = check_attention_inputs(q, k, v);
  take_dropout("scaled_dot_product_attention", dropout_p, gen, s);
  s.causal = causal;
  s.scale = scale != 0 ? scale : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(s.D, 1)));
  set_precision(s, q.dtype());
  Tensor qc = kernel_operand(s, q.detach()), kc = kernel_operand(s, k.detach()),
         vc = kernel_operand(s, v.detach());
  Shape out_shape = q.shape();
  out_shape.back() = s.Dv;
  Tensor out = empty(out_shape, q.dtype());
  Tensor lse = empty({s.R, s.T}, q.dtype());
  run_forward(s, qc, kc, vc, out, lse);
  if (needs_recording({q, k, v}))
    attach_backward(out, "ScaledDotProductAttentionBackward", {q, k, v},
                    [q16 = kept(s, qc), k16 = kept(s, kc), v16 = kept(s, vc),
                     o16 = kept(s, out.detach()), lse, s](const Tensor& g) -> std::vector<Tensor> {
                      const Tensor qc = kept_operand(s, q16), kc = kept_operand(s, k16),
                                   vc = kept_operand(s, v16), o = kept_operand(s, o16);
                      const Tensor gc = kernel_operand(s, g);
                      Tensor dq = empty(qc.shape(), lse.dtype()),
                             dk = empty(kc.shape(), lse.dtype()),
                             dv = empty(vc.shape(), lse.dtype());
                      run_backward(s, qc, kc, vc, o, lse, gc, dq, dk, dv);
                      return {dq, dk, dv};
                    });
  return out;
}

// qkv [B, T, (H + 2 KV) D] = [q | k | v]: q of H heads, k and v of KV heads, each head D
// wide; out [B, T, H D] with the heads side by side: what MultiHeadAttention needs, with no
// transposes in the graph. The same kernels and masks as scaled_dot_product_attention(q,
// k, v, causal = true), row r = b * H + h reading key row b * KV + h / (H / KV); the heads
// are packed into rows on the way in and back on the way out.
Tensor causal_self_attention(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads,
                             double dropout_p, Generator* gen) {
  const profile::Timer timer("causal_self_attention");
  const int64_t H = num_heads, KV = num_kv_heads;
  if (qkv.dim() != 3 || H <= 0 || KV <= 0 || H % KV != 0 || qkv.shape()[2] % (H + 2 * KV) != 0)
    throw std::invalid_argument(fmt::format(
        "causal_self_attention: qkv must be [batch, tokens, (heads + 2 * kv_heads) * head_dim] "
        "for {} heads and {} key/value heads (a divisor of the heads), got {}",
        H, KV, shape_str(qkv.shape())));
  if (!is_floating(qkv.dtype()))
    throw std::invalid_argument("causal_self_attention: qkv must be float32 or float64");
  const int64_t B = qkv.shape()[0], Tn = qkv.shape()[1], D = qkv.shape()[2] / (H + 2 * KV);
  const int64_t W = qkv.shape()[2], Cq = H * D, Ck = KV * D;
  Spec s{B * H, Tn, Tn, D, D, true, 0.0, 0, 0.0};
  s.group = H / KV;
  take_dropout("causal_self_attention", dropout_p, gen, s);
  s.scale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(s.D, 1)));
  set_precision(s, qkv.dtype());
  Tensor x = qkv.detach().contiguous();
  const DType kd = kernel_dtype(s, x.dtype());
  Tensor q = empty({B, H, Tn, D}, kd), k = empty({B, KV, Tn, D}, kd), v = empty(k.shape(), kd);
  Tensor o = empty(q.shape(), x.dtype()), out = empty({B, Tn, Cq}, x.dtype());
  Tensor lse = empty({s.R, Tn}, x.dtype());
  gather_heads(s, x, 0, W, B, H, q);
  gather_heads(s, x, Cq, W, B, KV, k);
  gather_heads(s, x, Cq + Ck, W, B, KV, v);
  run_forward(s, q, k, v, o, lse);
  using detail::HeadCopy, detail::copy_heads;
  void* const y = out.raw_data();  // taken before the copy is attached, which it would retire
  if (const Tensor out16 = detail::attach_bf16_copy(out); out16.defined())
    detail::scatter_heads_with_copy(static_cast<float*>(y), out16.data<bfloat16>(),
                                    o.const_data<float>(), B, Tn, H, D, Cq);
  else
    AG_DISPATCH_FLOAT(x.dtype(), "causal_self_attention", [&] {
      copy_heads(HeadCopy::scatter, static_cast<scalar_t*>(y), o.data<scalar_t>(), B, Tn, H, D, Cq);
    });
  if (needs_recording({qkv}))
    attach_backward(out, "CausalSelfAttentionBackward", {qkv},
                    [q16 = kept(s, q), k16 = kept(s, k), v16 = kept(s, v), o16 = kept(s, o), lse, s,
                     B, H, KV, W](const Tensor& g) -> std::vector<Tensor> {
                      const Tensor q = kept_operand(s, q16), k = kept_operand(s, k16),
                                   v = kept_operand(s, v16), o = kept_operand(s, o16);
                      const DType dtype = lse.dtype();
                      Tensor go = empty(q.shape(), q.dtype()), dq = empty(q.shape(), dtype),
                             dk = empty(k.shape(), dtype), dv = empty(k.shape(), dtype);
                      gather_heads(s, g.contiguous(), 0, H * s.D, B, H, go);
                      run_backward(s, q, k, v, o, lse, go, dq, dk, dv);
                      Tensor dqkv = empty({B, s.T, W}, dtype);
                      AG_DISPATCH_FLOAT(dtype, "causal_self_attention backward", [&] {
                        scalar_t* p = dqkv.data<scalar_t>();
                        copy_heads(HeadCopy::scatter, p, dq.data<scalar_t>(), B, s.T, H, s.D, W);
                        copy_heads(HeadCopy::scatter, p + H * s.D, dk.data<scalar_t>(), B, s.T, KV,
                                   s.D, W);
                        copy_heads(HeadCopy::scatter, p + (H + KV) * s.D, dv.data<scalar_t>(), B,
                                   s.T, KV, s.D, W);
                      });
                      return {dqkv};
                    });
  return out;
}

Tensor causal_self_attention(const Tensor& qkv, int64_t num_heads, double dropout_p,
                             Generator* gen) {
  return causal_self_attention(qkv, num_heads, num_heads, dropout_p, gen);
}

}  // namespace ag
