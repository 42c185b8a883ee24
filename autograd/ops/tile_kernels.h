#pragma once
// Internal: the SIMD micro-kernels of the fused attention (ops/attention.cpp). They work on
// tiles of kTile queries held key-major, t[j][x] with key j down and the tile's queries
// across as lanes, so that per-query statistics are lane-wise vector operations.
//
// The products run on register-blocked kernels (strips of 8 rows by 2 vectors) rather than
// cblas_sgemm: the per-tile products are small (64 x 256 x 32), where OpenBLAS's packing
// copies and per-call work are a good part of the cost, and a strip can start or stop at
// the causal boundary, skipping most of the hidden half of each diagonal tile (a blocked
// version with a cblas_sgemm per tile product was 1.5x slower at [8, 8, 256, 32]).
// Every kernel does the same arithmetic in the same order whichever thread runs it.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "autograd/hold_in_register.h"

namespace ag::tile {

constexpr int64_t kTile = 64;  // queries per tile: the lanes of every key-major tile row

// The register the kernels compute in: AVX-512's 64 bytes where the build targets it, else
// AVX's 32 (SSE's 16). A vector type wider than the registers is split across several, and
// a strip's accumulators then outnumber them: with 64-byte vectors on an AVX2 CPU (AMD EPYC
// Zen 3) the strips below spilled to the stack and the attention ran at 3.7 GFLOP/s.
#if defined(__AVX512F__)
inline constexpr int kRegisterBytes = 64;
#elif defined(__AVX__)
inline constexpr int kRegisterBytes = 32;
#else
inline constexpr int kRegisterBytes = 16;
#endif
// rows per strip: 8 x 2 vectors = 16 accumulators of AVX-512's 32 registers; 4 x 2 = 8 of
// the 16 that AVX and SSE have (beside two loaded vectors and a broadcast). A divisor of
// kTile: key_rows writes or adds whole strips, and a strip across a tile's end would add
// onto keys no tile has written yet.
constexpr int kStrip = kRegisterBytes == 64 ? 8 : 4;
static_assert(kTile % kStrip == 0);

inline int64_t round_up(int64_t n, int64_t to) {
  return (n + to - 1) / to * to;
}

// GCC's vector extension: one register of T (kRegisterBytes). Plain loops over an
// accumulator array leave it in memory, at a fiftieth of the speed.
template <typename T>
struct simd_of;
template <>
struct simd_of<float> {
  typedef float type __attribute__((vector_size(kRegisterBytes)));
};
template <>
struct simd_of<double> {
  typedef double type __attribute__((vector_size(kRegisterBytes)));
};
template <typename T>
using simd_t = typename simd_of<T>::type;
// The lanes of one register
template <typename T>
constexpr int64_t kVectorLanes = kRegisterBytes / sizeof(T);
// What operands are padded to: 64 bytes on every target, a whole number of registers, and
// the vector the BF16 units' kernels read (tile_kernels_bf16.cpp, compiled for AVX-512
// whatever the build targets)
template <typename T>
constexpr int64_t kLanes = 64 / sizeof(T);

// ---- register-blocked products

// c[x][0, NV lanes) (+)= sum_{p0 <= t < p1} a[x ars + t acs] b[t ldb + 0, NV lanes), for the
// x < rows (<= MR) rows of one strip; rows past `rows` re-read the last one (never stored),
// so strips at the end of a range need no separate kernel.
template <typename T, int MR, int NV>
inline void strip(int64_t rows, int64_t p0, int64_t p1, const T* a, int64_t ars, int64_t acs,
                  const T* b, int64_t ldb, T* c, int64_t ldc, bool add) {
  using V = simd_t<T>;
  constexpr int64_t L = kVectorLanes<T>;
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
    for (int u = 0; u < NV; ++u) {
      std::memcpy(&bv[u], b + t * ldb + u * L, sizeof(V));
      detail::hold_in_register(bv[u]);  // (used by MR multiply-adds)
    }
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

// strip over a panel w wide (a multiple of the lanes): two vectors at a time, then one
template <typename T>
void strip_panel(int64_t rows, int64_t p0, int64_t p1, const T* a, int64_t ars, int64_t acs,
                 const T* b, int64_t ldb, int64_t w, T* c, int64_t ldc, bool add) {
  constexpr int64_t L = kVectorLanes<T>;
  int64_t col = 0;
  for (; col + 2 * L <= w; col += 2 * L)
    strip<T, kStrip, 2>(rows, p0, p1, a, ars, acs, b + col, ldb, c + col, ldc, add);
  if (col < w) strip<T, kStrip, 1>(rows, p0, p1, a, ars, acs, b + col, ldb, c + col, ldc, add);
}

// st[j][x] = sum_c rows[j][c] bt[c][x] for keys j < nk (rows n long) and the kTile query
// lanes of bt (n x kTile): the key-major score (or dp) tile. Causally, the keys of strip j0
// are hidden from the queries before j0 - i0, so whole vectors of those lanes are not
// computed; they keep stale values until the caller overwrites them.
template <typename T>
void key_major_tile(bool causal, int64_t i0, int64_t nk, const T* rows, int64_t n, const T* bt,
                    T* st) {
  constexpr int64_t W = kVectorLanes<T>;
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
  return causal ? std::clamp<int64_t>(j - i0, 0, kTile) / kVectorLanes<T> * kVectorLanes<T> : 0;
}

// out[x][0, w) = sum_j tile[j][x] b[j][0, w) for the m queries of the tile, each strip only
// over the keys its last query sees (later tile entries of its queries are zero)
template <typename T>
void query_rows(bool causal, int64_t i0, int64_t m, int64_t nk, const T* tile, const T* b,
                int64_t ldb, int64_t w, T* out, int64_t ldo) {
  for (int64_t x0 = 0; x0 < m; x0 += kStrip) {
    const int64_t rows = std::min<int64_t>(kStrip, m - x0);
    const int64_t keys = causal ? std::min(nk, i0 + x0 + rows) : nk;
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

// ---- transposes and padding

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
    for (int i = 0; i < kVectorLanes<T>; ++i)
      if ((i & s) == 0) swap_blocks<s>(v[i], v[i + s], std::make_index_sequence<kVectorLanes<T>>());
    swap_all_blocks<s / 2, T>(v);
  }
}

// bt[c][x] = alpha src[x][c] (src rows n long) for x < m, zero for the tile's lanes past m
template <typename T>
void transpose_tile(const T* src, int64_t m, int64_t n, T alpha, T* bt) {
  using V = simd_t<T>;
  constexpr int64_t L = kVectorLanes<T>;
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

// The reverse: rows x n of src (stride w) into dst (stride n), when src is a padded copy
template <typename T>
void unpad(const T* src, int64_t rows, int64_t n, int64_t w, T* dst) {
  if (src == dst) return;
  for (int64_t x = 0; x < rows; ++x)
    for (int64_t c = 0; c < n; ++c) dst[x * n + c] = src[x * w + c];
}

}  // namespace ag::tile
