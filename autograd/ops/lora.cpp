// LoRA's adapters added to a projection's output, forward and backward side by side:
// out = y + sum_t scale_t (x A_t^T) B_t^T, each term into its own columns of y.
//
// An adapter's rank is small (4 to 64), so its products are thin: as six GEMMs of rank
// width each re-read an operand of M rows and ran at 15-50 GFLOP/s, and the term was
// then added to y in another pass. Here the rows are cut into chunks and one pass over a
// chunk does everything its rows need: forward reads x and y once and writes out; backward
// reads g and x once, writes dx, and leaves the chunk's share of dA and dB as a partial
// sum. The partials are added in chunk order, and the chunks depend on M alone, so the
// bits do not depend on the thread count (parallel.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/ops/tile_kernels.h"
#include "autograd/parallel.h"
#include "autograd/profile.h"

namespace ag {

namespace {

// The terms as the kernels read them: every A stacked [rank, in], so one pass over a
// row of x makes every term's u; each B transposed, [rank_t, out_t], so that a term's
// share of an output row is a sum of rank_t rows of it. Rank rows are indexed j.
template <typename T>
struct Adapters {
  int64_t in = 0, width = 0, rank = 0;  // x's columns, y's, the terms' ranks summed
  struct Term {
    int64_t j0, rank, col, out;  // its rank rows [j0, j0 + rank), columns [col, col + out)
    int64_t bt;                  // where its B^T starts in bt
    T scale;
  };
  std::vector<Term> terms;
  std::vector<T> a, bt;
};

template <typename T>
Adapters<T> lay_out(const std::vector<LoraTerm>& terms, int64_t in, int64_t width) {
  Adapters<T> l{in, width, 0, {}, {}, {}};
  for (const LoraTerm& t : terms) {
    const int64_t r = t.a.shape()[0], out = t.b.shape()[0];
    l.terms.push_back(
        {l.rank, r, t.col, out, static_cast<int64_t>(l.bt.size()), static_cast<T>(t.scale)});
    const Tensor a = t.a.detach().contiguous(), b = t.b.detach().contiguous();
    const T *pa = a.const_data<T>(), *pb = b.const_data<T>();
    l.a.insert(l.a.end(), pa, pa + r * in);
    for (int64_t j = 0; j < r; ++j)
      for (int64_t n = 0; n < out; ++n) l.bt.push_back(pb[n * r + j]);
    l.rank += r;
  }
  return l;
}

// res[i * ldres + j] = scale * (row i . mat row j) for the n <= 4 rows at `rows` (ld
// apart) and the R rows of mat [R, K]: each mat row is loaded once for the four.
template <typename T>
void dots4(const T* rows, int64_t ld, int64_t n, const T* mat, int64_t R, int64_t K, T scale,
           T* res, int64_t ldres) {
  const T* r0 = rows;
  const T* r1 = rows + std::min<int64_t>(1, n - 1) * ld;
  const T* r2 = rows + std::min<int64_t>(2, n - 1) * ld;
  const T* r3 = rows + std::min<int64_t>(3, n - 1) * ld;
  for (int64_t j = 0; j < R; ++j) {
    const T* m = mat + j * K;
    T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int64_t k = 0; k < K; ++k) {
      const T v = m[k];
      s0 += r0[k] * v, s1 += r1[k] * v, s2 += r2[k] * v, s3 += r3[k] * v;
    }
    const T s[4] = {s0, s1, s2, s3};
    for (int64_t i = 0; i < n; ++i) res[i * ldres + j] = scale * s[i];
  }
}

// A register of the build target (tile_kernels.h's simd_t), loaded and stored unaligned
template <typename T>
using Vec = tile::simd_t<T>;

template <typename T>
Vec<T> load(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
void store(T* p, const Vec<T>& v) {
  std::memcpy(p, &v, sizeof v);
}

// For each of the n <= 4 rows i: out_i[k] = (init_i[k], or 0 without init) + sum_j
// coef_i[j] mat[j * K + k], for k < K, the terms added in order of j. A vector of out_i is
// held in a register through the R terms, and each vector of mat is loaded once for the n
// rows: one pass over out, where adding a rank row at a time read and wrote it R times.
template <typename T>
void combine_rows(const T* coef, int64_t ldc, const T* mat, int64_t R, int64_t K, const T* init,
                  int64_t ldi, T* out, int64_t ldo, int64_t n) {
  constexpr int64_t L = tile::kVectorLanes<T>;
  int64_t k = 0;
  for (; k + L <= K; k += L) {
    Vec<T> acc[4];
    for (int64_t i = 0; i < n; ++i) acc[i] = init ? load(init + i * ldi + k) : Vec<T>{};
    for (int64_t j = 0; j < R; ++j) {
      const Vec<T> m = load(mat + j * K + k);
      for (int64_t i = 0; i < n; ++i) acc[i] += coef[i * ldc + j] * m;
    }
    for (int64_t i = 0; i < n; ++i) store(out + i * ldo + k, acc[i]);
  }
  for (; k < K; ++k)
    for (int64_t i = 0; i < n; ++i) {
      T acc = init ? init[i * ldi + k] : T(0);
      for (int64_t j = 0; j < R; ++j) acc += coef[i * ldc + j] * mat[j * K + k];
      out[i * ldo + k] = acc;
    }
}

// part[j * K + k] = sum over the n rows i of coef[i * ldc + j] * rows[i * ldr + k]: the
// rows' share of an outer-product gradient (dA = du^T x, dB^T = u^T g). Four j by two
// vectors of k at a time, their eight sums held in registers across the rows.
template <typename T>
void outer_sums(const T* coef, int64_t ldc, const T* rows, int64_t ldr, int64_t n, int64_t R,
                int64_t K, T* part) {
  constexpr int64_t L = tile::kVectorLanes<T>;
  for (int64_t j0 = 0; j0 < R; j0 += 4) {
    const int64_t jn = std::min<int64_t>(4, R - j0);
    int64_t k0 = 0;
    for (; k0 + 2 * L <= K; k0 += 2 * L) {
      Vec<T> s00{}, s01{}, s10{}, s11{}, s20{}, s21{}, s30{}, s31{};
      for (int64_t i = 0; i < n; ++i) {
        const T* c = coef + i * ldc + j0;
        const T c0 = c[0], c1 = jn > 1 ? c[1] : T(0), c2 = jn > 2 ? c[2] : T(0),
                c3 = jn > 3 ? c[3] : T(0);
        Vec<T> x0 = load(rows + i * ldr + k0), x1 = load(rows + i * ldr + k0 + L);
        detail::hold_in_register(x0), detail::hold_in_register(x1);  // (four multiply-adds each)
        s00 += x0 * c0, s01 += x1 * c0, s10 += x0 * c1, s11 += x1 * c1;
        s20 += x0 * c2, s21 += x1 * c2, s30 += x0 * c3, s31 += x1 * c3;
      }
      const Vec<T> sums[4][2] = {{s00, s01}, {s10, s11}, {s20, s21}, {s30, s31}};
      for (int64_t j = 0; j < jn; ++j) {
        store(part + (j0 + j) * K + k0, sums[j][0]);
        store(part + (j0 + j) * K + k0 + L, sums[j][1]);
      }
    }
    for (int64_t j = j0; j < j0 + jn; ++j)
      for (int64_t k = k0; k < K; ++k) {
        T s = 0;
        for (int64_t i = 0; i < n; ++i) s += coef[i * ldc + j] * rows[i * ldr + k];
        part[j * K + k] = s;
      }
  }
}

// Rows are cut into at most kMaxChunks chunks of at least kChunkRows: the partial sums of
// backward, one set a chunk, stay a small multiple of the gradients' size.
constexpr int64_t kChunkRows = 32, kMaxChunks = 64;

int64_t chunk_rows(int64_t M) {
  return std::max(kChunkRows, (M + kMaxChunks - 1) / kMaxChunks);
}

// Forward over rows [r0, r1): u (scaled) and out
template <typename T>
void forward_rows(const Adapters<T>& l, const T* x, const T* y, T* u, T* out, int64_t r0,
                  int64_t r1) {
  const int64_t K = l.in, N = l.width, R = l.rank;
  for (int64_t i = r0; i < r1; i += 4)
    for (const auto& t : l.terms)
      dots4(x + i * K, K, std::min<int64_t>(4, r1 - i), l.a.data() + t.j0 * K, t.rank, K, t.scale,
            u + i * R + t.j0, R);
  for (int64_t i = r0; i < r1; i += 4) {
    const int64_t n = std::min<int64_t>(4, r1 - i);
    int64_t col = 0;  // y's columns outside every term are copied
    for (const auto& t : l.terms) {
      for (int64_t r = 0; r < n; ++r)
        std::copy(y + (i + r) * N + col, y + (i + r) * N + t.col, out + (i + r) * N + col);
      combine_rows(u + i * R + t.j0, R, l.bt.data() + t.bt, t.rank, t.out, y + i * N + t.col, N,
                   out + i * N + t.col, N, n);
      col = t.col + t.out;
    }
    for (int64_t r = 0; r < n; ++r)
      std::copy(y + (i + r) * N + col, y + (i + r + 1) * N, out + (i + r) * N + col);
  }
}

// What backward is asked for, and where it goes
template <typename T>
struct Gradients {
  T* dx = nullptr;      // [M, in], or none
  T* part_a = nullptr;  // a chunk's dA partial [rank, in] each, or none
  T* part_b = nullptr;  // a chunk's dB^T partials (bt's layout) each, or none
};

// Backward over chunk c's rows [r0, r1): du into du, then dx's rows and the chunk's partials
template <typename T>
void backward_rows(const Adapters<T>& l, const T* g, const T* x, const T* u, T* du,
                   const Gradients<T>& d, int64_t c, int64_t r0, int64_t r1) {
  const int64_t K = l.in, N = l.width, R = l.rank, n = r1 - r0;
  if (d.dx || d.part_a)
    for (int64_t i = r0; i < r1; i += 4)
      for (const auto& t : l.terms)
        dots4(g + i * N + t.col, N, std::min<int64_t>(4, r1 - i), l.bt.data() + t.bt, t.rank, t.out,
              t.scale, du + i * R + t.j0, R);
  if (d.dx)
    for (int64_t i = r0; i < r1; i += 4)
      combine_rows(du + i * R, R, l.a.data(), R, K, static_cast<const T*>(nullptr), 0, d.dx + i * K,
                   K, std::min<int64_t>(4, r1 - i));
  if (d.part_a) outer_sums(du + r0 * R, R, x + r0 * K, K, n, R, K, d.part_a + c * R * K);
  if (d.part_b)
    for (const auto& t : l.terms)
      outer_sums(u + r0 * R + t.j0, R, g + r0 * N + t.col, N, n, t.rank, t.out,
                 d.part_b + c * static_cast<int64_t>(l.bt.size()) + t.bt);
}

// sum[e] = the chunks' parts added in chunk order, for the `size` elements of each
template <typename T>
std::vector<T> add_parts(const T* parts, int64_t chunks, int64_t size) {
  std::vector<T> sum(size);
  detail::add_chunk_partials(parts, chunks, size, [&](int64_t e, T s) { sum[e] = s; });
  return sum;
}

void check_terms(const Tensor& y, const Tensor& x, const std::vector<LoraTerm>& terms) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("lora_add: output {} and input {}: {}",
                                            shape_str(y.shape()), shape_str(x.shape()), why));
  };
  if (x.dim() < 1 || y.dim() != x.dim() ||
      !std::equal(x.shape().begin(), x.shape().end() - 1, y.shape().begin()))
    fail("they must differ in their last dimension only");
  if (!is_floating(x.dtype()) || x.dtype() == DType::BFloat16 || y.dtype() != x.dtype())
    fail("both must be float32 or float64 alike");
  int64_t end = 0;
  for (const LoraTerm& t : terms) {
    if (t.a.dim() != 2 || t.b.dim() != 2 || t.a.shape()[1] != x.shape().back() ||
        t.b.shape()[1] != t.a.shape()[0])
      fail(fmt::format("A {} and B {} do not fit (A [rank, in], B [out, rank])",
                       shape_str(t.a.shape()), shape_str(t.b.shape())));
    if (t.a.dtype() != x.dtype() || t.b.dtype() != x.dtype())
      fail("A and B must have the input's dtype");
    if (t.col < end || t.col + t.b.shape()[0] > y.shape().back())
      fail(fmt::format("the term at column {} of width {} overlaps another or the end", t.col,
                       t.b.shape()[0]));
    end = t.col + t.b.shape()[0];
  }
}

template <typename T>
std::vector<Tensor> lora_backward(const Adapters<T>& l, const Tensor& g, const Tensor& x2,
                                  const Tensor& u, int64_t M, bool gx, bool gw,
                                  const Shape& x_shape) {
  const int64_t R = l.rank, K = l.in, rows = chunk_rows(M), chunks = (M + rows - 1) / rows;
  const int64_t bt_size = static_cast<int64_t>(l.bt.size());
  const Tensor g2 = g.contiguous();
  // scratch from the tensor allocator, whose blocks the next step takes again
  const DType type = x2.dtype();
  Tensor dx = gx ? empty(x_shape, type) : Tensor(), du = empty({M, R}, type),
         part_a = gw ? empty({chunks, R * K}, type) : Tensor(),
         part_b = gw ? empty({chunks, bt_size}, type) : Tensor();
  const Gradients<T> d{gx ? dx.data<T>() : nullptr, gw ? part_a.data<T>() : nullptr,
                       gw ? part_b.data<T>() : nullptr};
  const T *pg = g2.const_data<T>(), *px = x2.const_data<T>(), *pu = u.const_data<T>();
  if (gx || gw)
    detail::parallel_for_items(
        chunks, 1, static_cast<double>(rows) * (K + l.width) * R, [&](int64_t c0, int64_t c1) {
          for (int64_t c = c0; c < c1; ++c)
            backward_rows(l, pg, px, pu, du.data<T>(), d, c, c * rows, std::min(M, (c + 1) * rows));
        });
  std::vector<Tensor> grads{g, dx};
  const std::vector<T> da =
                           gw ? add_parts(part_a.const_data<T>(), chunks, R * K) : std::vector<T>(),
                       dbt = gw ? add_parts(part_b.const_data<T>(), chunks, bt_size)
                                : std::vector<T>();
  for (const auto& t : l.terms) {
    if (!gw) {
      grads.insert(grads.end(), {Tensor(), Tensor()});
      continue;
    }
    Tensor ga = empty({t.rank, K}, x2.dtype()), gb = empty({t.out, t.rank}, x2.dtype());
    std::copy(da.begin() + t.j0 * K, da.begin() + (t.j0 + t.rank) * K, ga.data<T>());
    T* pb = gb.data<T>();
    for (int64_t j = 0; j < t.rank; ++j)
      for (int64_t n = 0; n < t.out; ++n) pb[n * t.rank + j] = dbt[t.bt + j * t.out + n];
    grads.insert(grads.end(), {ga, gb});
  }
  return grads;
}

template <typename T>
Tensor lora_add_typed(const Tensor& y, const Tensor& x, const std::vector<LoraTerm>& terms) {
  const int64_t K = x.shape().back(), N = y.shape().back(), M = x.numel() / std::max<int64_t>(K, 1);
  auto l = std::make_shared<const Adapters<T>>(lay_out<T>(terms, K, N));
  const Tensor x2 = x.detach().contiguous(), y2 = y.detach().contiguous();
  Tensor u = empty({M, l->rank}, x.dtype()), out = empty(y.shape(), y.dtype());
  detail::parallel_for_items(M, chunk_rows(M), static_cast<double>(K + N) * l->rank,
                             [&](int64_t r0, int64_t r1) {
                               forward_rows(*l, x2.const_data<T>(), y2.const_data<T>(), u.data<T>(),
                                            out.data<T>(), r0, r1);
                             });
  std::vector<Tensor> inputs{y, x};
  bool gw = false;
  for (const LoraTerm& t : terms) {
    inputs.insert(inputs.end(), {t.a, t.b});
    gw |= t.a.requires_grad() || t.b.requires_grad();
  }
  if (!needs_recording(inputs)) return out;
  attach_backward(out, "LoraAddBackward", inputs,
                  [l, x2, u, M, gx = x.requires_grad(), gw](const Tensor& g) {
                    return lora_backward<T>(*l, g, x2, u, M, gx, gw, x2.shape());
                  });
  return out;
}

}  // namespace

Tensor lora_add(const Tensor& y, const Tensor& x, const std::vector<LoraTerm>& terms) {
  const profile::Timer timer("lora_add");
  check_terms(y, x, terms);
  if (x.dtype() == DType::Float64) return lora_add_typed<double>(y, x, terms);
  return lora_add_typed<float>(y, x, terms);
}

}  // namespace ag
