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
// Tiles are key-major, s[j][x] with the tile's queries across: the softmax statistics of
// the 64 queries are then lane-wise vector operations down the keys, the 64 rows' dropout
// generators advance lane-wise too, and only the tile's q and do need transposing (keys
// are read as stored). Work is split by (r, tile) forward and by r backward, and each
// tile's arithmetic is the same whichever thread runs it, so results do not depend on the
// thread count. The products run on register-blocked kernels (strips of 8 rows by 2
// vectors) rather than cblas_sgemm: the per-tile products are small (64 x 256 x 32), where
// OpenBLAS's packing copies and per-call work are a good part of the cost, and a strip can
// start or stop at the causal boundary, skipping most of the hidden half of each diagonal
// tile (a blocked version with a cblas_sgemm per tile product was 1.5x slower at
// [8, 8, 256, 32]).
// float64 takes the same path, with std::exp, so it stays exact.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/vec_math.h"

namespace ag {

namespace {

// Row (r, i) draws its dropout mask from its own stream, derived from the op's one draw,
// so rows can run in any order (or thread) and backward can replay any row alone.
Generator row_stream(uint64_t draw, int64_t r, int64_t i, int64_t T) {
  return Generator::substream(draw, static_cast<uint64_t>(r * T + i));
}

struct Dims {
  int64_t R, T, S, D, Dv;
};

// visible keys of query row i
inline int64_t visible(const Dims& d, bool causal, int64_t i) {
  return causal ? std::min(i + 1, d.S) : d.S;
}

// keep[j] = 0 or 1/(1-p) for the n visible keys of row (r, i); the definition of the mask,
// which tile_mask reproduces and attention_dropout_mask replays
template <typename T>
void row_mask(uint64_t draw, int64_t r, int64_t i, int64_t Tq, double p, int64_t n, T* keep) {
  Generator g = row_stream(draw, r, i, Tq);
  const T scale = p >= 1.0 ? T(0) : static_cast<T>(1.0 / (1.0 - p));
  for (int64_t j = 0; j < n; ++j) keep[j] = g.uniform() < p ? T(0) : scale;
}

constexpr int64_t kTile = 64;  // queries per tile: the lanes of every key-major tile row

inline int64_t round_up(int64_t n, int64_t to) {
  return (n + to - 1) / to * to;
}

// ---- register-blocked products

// GCC's vector extension: one 64-byte register of T (AVX-512; narrower targets split it).
// Plain loops over an accumulator array leave it in memory, at a fiftieth of the speed.
template <typename T>
struct simd_of;
template <>
struct simd_of<float> {
  typedef float type __attribute__((vector_size(64)));
};
template <>
struct simd_of<double> {
  typedef double type __attribute__((vector_size(64)));
};
template <typename T>
using simd_t = typename simd_of<T>::type;
template <typename T>
constexpr int64_t kLanes = 64 / sizeof(T);

// ---- dropout mask of a tile

// keep[j * kTile + x] = row_mask of query row i0 + x at key j, for j < nk and every x that
// sees key j (other entries hold 0, 1/(1-p) or stale values of those, never NaN). One
// stream alone is a serial chain; the tile's rows advance side by side instead, 8 to a
// vector and 4 vectors at once to hide the step's latency. The step is Generator::next_u64's
// (xoshiro256**), and uniform() < p is the exact integer test (u >> 11) < ceil(p 2^53).
// attention_dropout_mask keeps replaying Generator itself, so the tests that compare the
// fused op with the composed ops guard that the two agree.
template <typename T>
void tile_mask(uint64_t draw, int64_t r, int64_t i0, int64_t Tq, bool causal, double p, int64_t nk,
               T* keep) {
  typedef uint64_t u64v __attribute__((vector_size(64)));
  typedef int32_t i32v __attribute__((vector_size(32)));
  constexpr int G = 4, W = 8 * G;  // vectors advanced together, and the rows they hold
  static_assert(kTile % W == 0);
  const uint64_t threshold = static_cast<uint64_t>(std::ceil(std::ldexp(p, 53)));
  const T scale = p >= 1.0 ? T(0) : static_cast<T>(1.0 / (1.0 - p));
  using bits_t = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
  const bits_t scale_bits = std::bit_cast<bits_t>(scale);
  for (int64_t x0 = 0; x0 < kTile; x0 += W) {
    u64v v0[G], v1[G], v2[G], v3[G];  // the four state words of 8 G rows
    for (int g = 0; g < G; ++g)
      for (int l = 0; l < 8; ++l) {
        const Generator::State st = row_stream(draw, r, i0 + x0 + 8 * g + l, Tq).state();
        v0[g][l] = st[0], v1[g][l] = st[1], v2[g][l] = st[2], v3[g][l] = st[3];
      }
    // these rows see no key past their last one's (later draws are never used)
    const int64_t n = causal ? std::min(nk, i0 + x0 + W) : nk;
    for (int64_t j = 0; j < n; ++j) {
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        const u64v a = v1[g] * 5, out = ((a << 7) | (a >> 57)) * 9, t = v1[g] << 17;
        v2[g] ^= v0[g];
        v3[g] ^= v1[g];
        v1[g] ^= v2[g];
        v0[g] ^= v3[g];
        v2[g] ^= t;
        v3[g] = (v3[g] << 45) | (v3[g] >> 19);
        const auto dropped = (out >> 11) < threshold;  // all ones where u < p
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

// c[x][0, NV lanes) (+)= sum_{p0 <= t < p1} a[x ars + t acs] b[t ldb + 0, NV lanes), for the
// x < rows (<= MR) rows of one strip; rows past `rows` re-read the last one (never stored),
// so strips at the end of a range need no separate kernel.
template <typename T, int MR, int NV>
inline void strip(int64_t rows, int64_t p0, int64_t p1, const T* a, int64_t ars, int64_t acs,
                  const T* b, int64_t ldb, T* c, int64_t ldc, bool add) {
  using V = simd_t<T>;
  constexpr int64_t L = kLanes<T>;
  const T* ar[MR];
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int x = 0; x < MR; ++x) {
    ar[x] = a + std::min<int64_t>(x, rows - 1) * ars;
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) acc[x][u] = V{};
  }
  for (int64_t t = p0; t < p1; ++t) {
    V bv[NV];
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) std::memcpy(&bv[u], b + t * ldb + u * L, sizeof(V));
#pragma GCC unroll 16
    for (int x = 0; x < MR; ++x) {
      const T ax = ar[x][t * acs];
#pragma GCC unroll 4
      for (int u = 0; u < NV; ++u) acc[x][u] += ax * bv[u];
    }
  }
#pragma GCC unroll 16
  for (int x = 0; x < MR; ++x) {
    if (x >= rows) break;
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) {
      T* cp = c + x * ldc + u * L;
      V cur = acc[x][u];
      if (add) {
        V old;
        std::memcpy(&old, cp, sizeof(V));
        cur += old;
      }
      std::memcpy(cp, &cur, sizeof(V));
    }
  }
}

constexpr int kStrip = 8;  // rows per strip: 8 x 2 vectors = 16 accumulators

// strip over a panel w wide (a multiple of the lanes): two vectors at a time, then one
template <typename T>
void strip_panel(int64_t rows, int64_t p0, int64_t p1, const T* a, int64_t ars, int64_t acs,
                 const T* b, int64_t ldb, int64_t w, T* c, int64_t ldc, bool add) {
  constexpr int64_t L = kLanes<T>;
  int64_t col = 0;
  for (; col + 2 * L <= w; col += 2 * L)
    strip<T, kStrip, 2>(rows, p0, p1, a, ars, acs, b + col, ldb, c + col, ldc, add);
  if (col < w) strip<T, kStrip, 1>(rows, p0, p1, a, ars, acs, b + col, ldb, c + col, ldc, add);
}

// st[j][x] = sum_c rows[j][c] bt[c][x] for keys j < nk (rows n long) and the kTile query
// lanes of bt (n x kTile): the key-major score (or dp) tile. Causally, the keys of strip j0
// are hidden from the queries before j0 - i0, so whole vectors of those lanes are not
// computed; they keep stale values until hide_future or the backward pass overwrites them.
template <typename T>
void key_major_tile(bool causal, int64_t i0, int64_t nk, const T* rows, int64_t n, const T* bt,
                    T* st) {
  constexpr int64_t W = kLanes<T>;
  for (int64_t j0 = 0; j0 < nk; j0 += kStrip) {
    const int64_t col = causal ? std::clamp<int64_t>(j0 - i0, 0, kTile) / W * W : 0;
    strip_panel(std::min<int64_t>(kStrip, nk - j0), 0, n, rows + j0 * n, n, 1, bt + col, kTile,
                kTile - col, st + j0 * kTile + col, kTile, false);
  }
}

// Causally, key j is hidden from the tile's queries before j - i0. The lane passes over row
// j start at the vector holding lane j - i0 (hidden_lanes), and the whole vectors before it
// are zero for the products that read them.
template <typename T>
int64_t hidden_lanes(bool causal, int64_t i0, int64_t j) {
  return causal ? std::clamp<int64_t>(j - i0, 0, kTile) / kLanes<T> * kLanes<T> : 0;
}

// Forward: scores of hidden keys become -inf (exp gives exactly 0) where the passes go, 0
// where they do not; both overwrite the stale values of lanes key_major_tile skipped.
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

// out[x][0, w) = sum_j tile[j][x] b[j][0, w) for the m queries of the tile, each strip only
// over the keys its last query sees (later tile entries of its queries are zero)
template <typename T>
void query_rows(const Dims& d, bool causal, int64_t i0, int64_t m, int64_t nk, const T* tile,
                const T* b, int64_t ldb, int64_t w, T* out, int64_t ldo) {
  for (int64_t x0 = 0; x0 < m; x0 += kStrip) {
    const int64_t rows = std::min<int64_t>(kStrip, m - x0);
    const int64_t keys = std::min(nk, visible(d, causal, i0 + x0 + rows - 1));
    strip_panel(rows, 0, keys, tile + x0, 1, kTile, b, ldb, w, out + x0 * ldo, ldo, false);
  }
}

// acc[j][0, w) += sum_x tile[j][x] b[x][0, w) for keys j < nk, each strip only over the
// queries that see its first key. Keys from `fresh` on have had no tile before this one
// (tiles come in order and nk never shrinks): their rows are written, not added to, which
// saves zeroing the accumulators up front. A strip never starts inside the fresh range.
template <typename T>
void key_rows(bool causal, int64_t i0, int64_t m, int64_t nk, int64_t fresh, const T* tile,
              const T* b, int64_t ldb, int64_t w, T* acc, int64_t lda) {
  for (int64_t j0 = 0; j0 < nk; j0 += kStrip) {
    const int64_t x0 = causal ? std::clamp<int64_t>(j0 - i0, 0, m) : 0;
    strip_panel(std::min<int64_t>(kStrip, nk - j0), x0, m, tile + j0 * kTile, kTile, 1, b, ldb, w,
                acc + j0 * lda, lda, j0 < fresh);
  }
}

// Exchange the off-diagonal s x s blocks of rows a and b = a + s of an L x L block held in L
// vectors; doing it for s = L/2, ..., 1 transposes the block, in L log2 L two-vector
// shuffles where element-wise copies are L^2 strided loads or stores.
template <int s, typename V, size_t... e>
inline void swap_blocks(V& a, V& b, std::index_sequence<e...>) {
  constexpr int L = sizeof...(e);
  const V lo = __builtin_shufflevector(a, b, ((e & s) ? L + e - s : e)...);
  const V hi = __builtin_shufflevector(a, b, ((e & s) ? L + e : e + s)...);
  a = lo, b = hi;
}

template <int s, typename T>
inline void swap_all_blocks(simd_t<T>* v) {
  if constexpr (s > 0) {
#pragma GCC unroll 16
    for (int i = 0; i < kLanes<T>; ++i)
      if ((i & s) == 0) swap_blocks<s>(v[i], v[i + s], std::make_index_sequence<kLanes<T>>());
    swap_all_blocks<s / 2, T>(v);
  }
}

// bt[c][x] = alpha src[x][c] (src rows n long) for x < m, zero for the tile's lanes past m
template <typename T>
void transpose_tile(const T* src, int64_t m, int64_t n, T alpha, T* bt) {
  using V = simd_t<T>;
  constexpr int64_t L = kLanes<T>;
  const int64_t mf = m / L * L, nf = n / L * L;  // the part in whole L x L blocks
  for (int64_t x0 = 0; x0 < mf; x0 += L)
    for (int64_t c0 = 0; c0 < nf; c0 += L) {
      V v[L];
#pragma GCC unroll 16
      for (int64_t i = 0; i < L; ++i) {
        std::memcpy(&v[i], src + (x0 + i) * n + c0, sizeof(V));
        v[i] *= alpha;
      }
      swap_all_blocks<L / 2, T>(v);
#pragma GCC unroll 16
      for (int64_t i = 0; i < L; ++i) std::memcpy(bt + (c0 + i) * kTile + x0, &v[i], sizeof(V));
    }
  for (int64_t c = nf; c < n; ++c)
    for (int64_t x = 0; x < mf; ++x) bt[c * kTile + x] = alpha * src[x * n + c];
  for (int64_t c = 0; c < n; ++c)
    for (int64_t x = mf; x < kTile; ++x) bt[c * kTile + x] = x < m ? alpha * src[x * n + c] : T(0);
}

// rows x n at src (stride n) into dst (stride w >= n), zero padded: the kernels read whole
// vectors, so operands whose width is not a multiple of the lanes get a padded copy
template <typename T>
const T* padded(const T* src, int64_t rows, int64_t n, int64_t w, T* dst) {
  if (n == w) return src;
  for (int64_t x = 0; x < rows; ++x)
    for (int64_t c = 0; c < w; ++c) dst[x * w + c] = c < n ? src[x * n + c] : T(0);
  return dst;
}

// o and lse for every (r, tile); tiles are independent, so they are the unit of work
// (dynamic: causal tiles differ in cost)
template <typename T>
void sdpa_forward(const Dims& d, bool causal, double p, uint64_t draw, T scale, const T* q,
                  const T* k, const T* v, T* o, T* lse) {
  constexpr int64_t L = kLanes<T>;
  const int64_t tiles = (d.T + kTile - 1) / kTile, Dvp = round_up(d.Dv, L);
  const T ninf = -std::numeric_limits<T>::infinity();
#pragma omp parallel
  {
    // per-thread scratch, sized once: a key-major tile, its mask, the tile's scaled q^T,
    // and padded copies where Dv is not a multiple of the lanes
    std::vector<T> st(round_up(d.S, kStrip) * kTile), keep(p > 0 ? d.S * kTile : 0),
        qt(d.D * kTile), vpad(Dvp != d.Dv ? d.S * Dvp : 0), opad(Dvp != d.Dv ? kTile * Dvp : 0);
    alignas(64) T mx[kTile], total[kTile];
#pragma omp for schedule(dynamic)
    for (int64_t item = 0; item < d.R * tiles; ++item) {
      const int64_t r = item / tiles, i0 = (item % tiles) * kTile;
      const int64_t m = std::min(kTile, d.T - i0), nk = visible(d, causal, i0 + m - 1);
      const T* kr = k + r * d.S * d.D;
      T* ob = o + (r * d.T + i0) * d.Dv;
      transpose_tile(q + (r * d.T + i0) * d.D, m, d.D, scale, qt.data());
      key_major_tile(causal, i0, nk, kr, d.D, qt.data(), st.data());
      if (p > 0) tile_mask(draw, r, i0, d.T, causal, p, nk, keep.data());

      hide_future(causal, i0, nk, st.data());
      // lanes past m are never read back, so they need no masking
      for (int64_t x = 0; x < kTile; ++x) mx[x] = ninf, total[x] = 0;
      for (int64_t j = 0; j < nk; ++j) {
        const T* sj = st.data() + j * kTile;
        AG_SIMD
        for (int64_t x = hidden_lanes<T>(causal, i0, j); x < kTile; ++x)
          mx[x] = sj[x] > mx[x] ? sj[x] : mx[x];
      }
      for (int64_t j = 0; j < nk; ++j) {
        T* sj = st.data() + j * kTile;
        const int64_t h = hidden_lanes<T>(causal, i0, j);
        AG_SIMD
        for (int64_t x = h; x < kTile; ++x) {
          const T e = detail::exp_fast(sj[x] - mx[x]);
          total[x] += e;
          sj[x] = e;
        }
        if (p > 0) {
          const T* kj = keep.data() + j * kTile;
          AG_SIMD
          for (int64_t x = h; x < kTile; ++x) sj[x] *= kj[x];
        }
      }
      for (int64_t x = 0; x < m; ++x) lse[r * d.T + i0 + x] = mx[x] + std::log(total[x]);

      // o = (st^T v) / total, the normalisation folded into the copy out
      const T* vb = padded(v + r * d.S * d.Dv, nk, d.Dv, Dvp, vpad.data());
      T* out = Dvp == d.Dv ? ob : opad.data();
      query_rows(d, causal, i0, m, nk, st.data(), vb, Dvp, Dvp, out, Dvp);
      for (int64_t x = 0; x < m; ++x) {
        const T inv = T(1) / total[x];
        for (int64_t c = 0; c < d.Dv; ++c) ob[x * d.Dv + c] = out[x * Dvp + c] * inv;
      }
    }
  }
}

// dq, dk, dv; a row r is the unit of work, its tiles accumulating into dk and dv in order
template <typename T>
void sdpa_backward(const Dims& d, bool causal, double p, uint64_t draw, T scale, const T* q,
                   const T* k, const T* v, const T* o, const T* lse, const T* dout, T* dq, T* dk,
                   T* dv) {
  constexpr int64_t L = kLanes<T>;
  const int64_t Dp = round_up(d.D, L), Dvp = round_up(d.Dv, L);
#pragma omp parallel
  {
    const int64_t S8 = round_up(d.S, kStrip);
    std::vector<T> st(S8 * kTile), dpt(S8 * kTile), keep(p > 0 ? d.S * kTile : 0), qt(d.D * kTile),
        dot(d.Dv * kTile);
    // padded operands and accumulators, only where D or Dv is not a multiple of the lanes
    std::vector<T> kpad(Dp != d.D ? d.S * Dp : 0), qpad(Dp != d.D ? kTile * Dp : 0),
        dkpad(Dp != d.D ? d.S * Dp : 0), dqpad(Dp != d.D ? kTile * Dp : 0),
        dopad(Dvp != d.Dv ? kTile * Dvp : 0), dvpad(Dvp != d.Dv ? d.S * Dvp : 0);
    alignas(64) T l[kTile], delta[kTile];
#pragma omp for schedule(dynamic)
    for (int64_t r = 0; r < d.R; ++r) {
      const T* kr = k + r * d.S * d.D;
      const T* vr = v + r * d.S * d.Dv;
      T* dkr = dk + r * d.S * d.D;
      T* dvr = dv + r * d.S * d.Dv;
      const T* kb = padded(kr, d.S, d.D, Dp, kpad.data());
      T* dk_acc = Dp == d.D ? dkr : dkpad.data();
      T* dv_acc = Dvp == d.Dv ? dvr : dvpad.data();
      int64_t fresh = 0;  // keys before this have dk, dv rows from an earlier tile
      for (int64_t i0 = 0; i0 < d.T; i0 += kTile) {
        const int64_t m = std::min(kTile, d.T - i0), nk = visible(d, causal, i0 + m - 1);
        const T* qb = q + (r * d.T + i0) * d.D;
        const T* ob = o + (r * d.T + i0) * d.Dv;
        const T* dob = dout + (r * d.T + i0) * d.Dv;
        transpose_tile(qb, m, d.D, scale, qt.data());
        transpose_tile(dob, m, d.Dv, T(1), dot.data());
        key_major_tile(causal, i0, nk, kr, d.D, qt.data(), st.data());
        key_major_tile(causal, i0, nk, vr, d.Dv, dot.data(), dpt.data());
        if (p > 0) tile_mask(draw, r, i0, d.T, causal, p, nk, keep.data());

        for (int64_t x = 0; x < kTile; ++x) {
          l[x] = x < m ? lse[r * d.T + i0 + x] : T(0);
          T dd = 0;
          if (x < m) {
#pragma omp simd reduction(+ : dd)
            for (int64_t c = 0; c < d.Dv; ++c) dd += dob[x * d.Dv + c] * ob[x * d.Dv + c];
          }
          delta[x] = dd;
        }
        // st becomes a = p keep, dpt becomes ds; hidden entries 0, by selection in the
        // vectors the pass covers (skipped lanes of st and dpt hold stale values)
        for (int64_t j = 0; j < nk; ++j) {
          T* sj = st.data() + j * kTile;
          T* gj = dpt.data() + j * kTile;
          const int64_t first = causal ? j - i0 : 0, h = hidden_lanes<T>(causal, i0, j);
          std::fill(sj, sj + h, T(0));
          std::fill(gj, gj + h, T(0));
          if (p > 0) {
            const T* kj = keep.data() + j * kTile;
            AG_SIMD
            for (int64_t x = h; x < kTile; ++x) {
              const bool seen = x >= first && x < m;
              const T pw = detail::exp_fast(sj[x] - l[x]);
              gj[x] = seen ? pw * (gj[x] * kj[x] - delta[x]) * scale : T(0);
              sj[x] = seen ? pw * kj[x] : T(0);
            }
          } else {
            AG_SIMD
            for (int64_t x = h; x < kTile; ++x) {
              const bool seen = x >= first && x < m;
              const T pw = detail::exp_fast(sj[x] - l[x]);
              gj[x] = seen ? pw * (gj[x] - delta[x]) * scale : T(0);
              sj[x] = seen ? pw : T(0);
            }
          }
        }
        key_rows(causal, i0, m, nk, fresh, st.data(), padded(dob, m, d.Dv, Dvp, dopad.data()), Dvp,
                 Dvp, dv_acc, Dvp);
        key_rows(causal, i0, m, nk, fresh, dpt.data(), padded(qb, m, d.D, Dp, qpad.data()), Dp, Dp,
                 dk_acc, Dp);
        fresh = nk;
        T* dqb = dq + (r * d.T + i0) * d.D;
        T* dq_out = Dp == d.D ? dqb : dqpad.data();
        query_rows(d, causal, i0, m, nk, dpt.data(), kb, Dp, Dp, dq_out, Dp);
        if (dq_out != dqb)
          for (int64_t x = 0; x < m; ++x)
            for (int64_t c = 0; c < d.D; ++c) dqb[x * d.D + c] = dq_out[x * Dp + c];
      }
      // keys no query sees (causal, S > T)
      std::fill(dk_acc + fresh * Dp, dk_acc + d.S * Dp, T(0));
      std::fill(dv_acc + fresh * Dvp, dv_acc + d.S * Dvp, T(0));
      if (dk_acc != dkr)
        for (int64_t j = 0; j < d.S; ++j)
          for (int64_t c = 0; c < d.D; ++c) dkr[j * d.D + c] = dk_acc[j * Dp + c];
      if (dv_acc != dvr)
        for (int64_t j = 0; j < d.S; ++j)
          for (int64_t c = 0; c < d.Dv; ++c) dvr[j * d.Dv + c] = dv_acc[j * Dvp + c];
    }
  }
}

Dims check_attention_inputs(const Tensor& q, const Tensor& k, const Tensor& v) {
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
  Dims d;
  d.T = q.shape()[r - 2];
  d.D = q.shape()[r - 1];
  d.S = k.shape()[r - 2];
  d.Dv = v.shape()[r - 1];
  d.R = shape_numel(Shape(q.shape().begin(), q.shape().end() - 2));
  if (k.shape()[r - 1] != d.D) throw fail("q and k differ in their last dim");
  if (v.shape()[r - 2] != d.S) throw fail("k and v differ in their number of keys");
  if (d.S == 0 && d.T > 0) throw fail("there are no keys to attend to");
  return d;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    double dropout_p, Generator* gen, double scale) {
  const Dims d = check_attention_inputs(q, k, v);
  if (!(dropout_p >= 0.0 && dropout_p <= 1.0))
    throw std::invalid_argument(fmt::format(
        "scaled_dot_product_attention: dropout_p must be in [0, 1], got {}", dropout_p));
  if (dropout_p > 0 && gen == nullptr)
    throw std::invalid_argument(
        "scaled_dot_product_attention: dropout_p > 0 needs a generator for the mask");
  const uint64_t draw = dropout_p > 0 ? gen->next_u64() : 0;
  const double s =
      scale != 0 ? scale : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(d.D, 1)));
  Tensor qc = q.detach().contiguous(), kc = k.detach().contiguous(), vc = v.detach().contiguous();
  Shape out_shape = q.shape();
  out_shape.back() = d.Dv;
  Tensor out = empty(out_shape, q.dtype());
  Tensor lse = empty({d.R, d.T}, q.dtype());
  AG_DISPATCH_FLOAT(q.dtype(), "scaled_dot_product_attention", [&] {
    sdpa_forward<scalar_t>(d, causal, dropout_p, draw, static_cast<scalar_t>(s),
                           qc.data<scalar_t>(), kc.data<scalar_t>(), vc.data<scalar_t>(),
                           out.data<scalar_t>(), lse.data<scalar_t>());
  });
  if (needs_recording({q, k, v}))
    attach_backward(out, "ScaledDotProductAttentionBackward", {q, k, v},
                    [qc, kc, vc, o = out.detach(), lse, d, causal, dropout_p, draw,
                     s](const Tensor& g) -> std::vector<Tensor> {
                      Tensor gc = g.contiguous();
                      Tensor dq = empty(qc.shape(), qc.dtype()), dk = empty(kc.shape(), kc.dtype()),
                             dv = empty(vc.shape(), vc.dtype());
                      AG_DISPATCH_FLOAT(qc.dtype(), "scaled_dot_product_attention backward", [&] {
                        sdpa_backward<scalar_t>(
                            d, causal, dropout_p, draw, static_cast<scalar_t>(s),
                            qc.data<scalar_t>(), kc.data<scalar_t>(), vc.data<scalar_t>(),
                            o.data<scalar_t>(), lse.data<scalar_t>(), gc.data<scalar_t>(),
                            dq.data<scalar_t>(), dk.data<scalar_t>(), dv.data<scalar_t>());
                      });
                      return {dq, dk, dv};
                    });
  return out;
}

namespace {

// [B, T, H, D] rows (stride `row_stride` between tokens, heads D apart) <-> [B, H, T, D]
// contiguous, the layout the kernels read: one pass of D-element copies per (b, h, t).
enum class HeadCopy { gather, scatter };

template <typename T>
void copy_heads(HeadCopy direction, T* dst, const T* src, int64_t B, int64_t Tn, int64_t H,
                int64_t D, int64_t row_stride) {
  detail::parallel_for(B * H, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / H, h = r % H;
      for (int64_t t = 0; t < Tn; ++t) {
        const int64_t rows = (b * Tn + t) * row_stride + h * D, heads = (r * Tn + t) * D;
        if (direction == HeadCopy::gather)
          std::memcpy(dst + heads, src + rows, D * sizeof(T));
        else
          std::memcpy(dst + rows, src + heads, D * sizeof(T));
      }
    }
  });
}

}  // namespace

// qkv [B, T, 3C] = [q | k | v], each C = H * D split into heads; out [B, T, C] with the
// heads side by side: what MultiHeadAttention needs, with no transposes in the graph.
// The same kernels and masks as scaled_dot_product_attention(q, k, v, causal = true),
// row r = b * H + h.
Tensor causal_self_attention(const Tensor& qkv, int64_t num_heads, double dropout_p,
                             Generator* gen) {
  if (qkv.dim() != 3 || num_heads <= 0 || qkv.shape()[2] % (3 * num_heads) != 0)
    throw std::invalid_argument(fmt::format(
        "causal_self_attention: qkv must be [batch, tokens, 3 * heads * head_dim] for {} heads, "
        "got {}",
        num_heads, shape_str(qkv.shape())));
  if (!is_floating(qkv.dtype()))
    throw std::invalid_argument("causal_self_attention: qkv must be float32 or float64");
  if (!(dropout_p >= 0.0 && dropout_p <= 1.0))
    throw std::invalid_argument(
        fmt::format("causal_self_attention: dropout_p must be in [0, 1], got {}", dropout_p));
  if (dropout_p > 0 && gen == nullptr)
    throw std::invalid_argument(
        "causal_self_attention: dropout_p > 0 needs a generator for the mask");
  const int64_t B = qkv.shape()[0], Tn = qkv.shape()[1], C = qkv.shape()[2] / 3, H = num_heads;
  const Dims d{B * H, Tn, Tn, C / H, C / H};
  const uint64_t draw = dropout_p > 0 ? gen->next_u64() : 0;
  const double scale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(d.D, 1)));
  Tensor x = qkv.detach().contiguous();
  Tensor q = empty({B, H, Tn, d.D}, x.dtype()), k = empty(q.shape(), x.dtype()),
         v = empty(q.shape(), x.dtype()), o = empty(q.shape(), x.dtype());
  Tensor out = empty({B, Tn, C}, x.dtype());
  Tensor lse = empty({d.R, Tn}, x.dtype());
  AG_DISPATCH_FLOAT(x.dtype(), "causal_self_attention", [&] {
    const scalar_t* p = x.data<scalar_t>();
    copy_heads(HeadCopy::gather, q.data<scalar_t>(), p, B, Tn, H, d.D, 3 * C);
    copy_heads(HeadCopy::gather, k.data<scalar_t>(), p + C, B, Tn, H, d.D, 3 * C);
    copy_heads(HeadCopy::gather, v.data<scalar_t>(), p + 2 * C, B, Tn, H, d.D, 3 * C);
    sdpa_forward<scalar_t>(d, true, dropout_p, draw, static_cast<scalar_t>(scale),
                           q.data<scalar_t>(), k.data<scalar_t>(), v.data<scalar_t>(),
                           o.data<scalar_t>(), lse.data<scalar_t>());
    copy_heads(HeadCopy::scatter, out.data<scalar_t>(), o.data<scalar_t>(), B, Tn, H, d.D, C);
  });
  if (needs_recording({qkv}))
    attach_backward(
        out, "CausalSelfAttentionBackward", {qkv},
        [q, k, v, o, lse, d, H, C, dropout_p, draw, scale](const Tensor& g) -> std::vector<Tensor> {
          const int64_t B = d.R / H, Tn = d.T;
          Tensor gc = g.contiguous();
          Tensor go = empty(q.shape(), q.dtype()), dq = empty(q.shape(), q.dtype()),
                 dk = empty(q.shape(), q.dtype()), dv = empty(q.shape(), q.dtype());
          Tensor dqkv = empty({B, Tn, 3 * C}, q.dtype());
          AG_DISPATCH_FLOAT(q.dtype(), "causal_self_attention backward", [&] {
            copy_heads(HeadCopy::gather, go.data<scalar_t>(), gc.data<scalar_t>(), B, Tn, H, d.D,
                       C);
            sdpa_backward<scalar_t>(d, true, dropout_p, draw, static_cast<scalar_t>(scale),
                                    q.data<scalar_t>(), k.data<scalar_t>(), v.data<scalar_t>(),
                                    o.data<scalar_t>(), lse.data<scalar_t>(), go.data<scalar_t>(),
                                    dq.data<scalar_t>(), dk.data<scalar_t>(), dv.data<scalar_t>());
            scalar_t* p = dqkv.data<scalar_t>();
            copy_heads(HeadCopy::scatter, p, dq.data<scalar_t>(), B, Tn, H, d.D, 3 * C);
            copy_heads(HeadCopy::scatter, p + C, dk.data<scalar_t>(), B, Tn, H, d.D, 3 * C);
            copy_heads(HeadCopy::scatter, p + 2 * C, dv.data<scalar_t>(), B, Tn, H, d.D, 3 * C);
          });
          return {dqkv};
        });
  return out;
}

Tensor attention_dropout_mask(int64_t rows, int64_t T, int64_t S, bool causal, double p,
                              uint64_t draw, DType dtype) {
  Tensor mask = zeros({rows, T, S}, dtype);
  const Dims d{rows, T, S, 0, 0};
  AG_DISPATCH_FLOAT(dtype, "attention_dropout_mask", [&] {
    scalar_t* m = mask.data<scalar_t>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < T; ++i)
        row_mask(draw, r, i, T, p, visible(d, causal, i), m + (r * T + i) * S);
  });
  return mask;
}

}  // namespace ag
