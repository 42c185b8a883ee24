#include "nn/decode_kernels.h"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "autograd/dtype.h"
#include "autograd/vec_math.h"

namespace nn::decode {

namespace {

// Sixteen floats: one AVX-512 register (two AVX2 ones). The loops below keep several
// independent sums in registers: one chain of multiply-adds waits four cycles a step.
typedef float v16 __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16;

inline v16 load(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, v16 v) {
  std::memcpy(p, &v, sizeof v);
}

inline float sum_lanes(v16 v) {
  float s = 0;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}

// y[r][o..o+4) (+)= bias + x[r] . W[o..o+4): four weight rows at a time, each read once
// from memory for every row of x (they stay in the L1 cache), four sums in registers.
void four_outputs(const float* x, int64_t rows, int64_t in, const float* W, const float* bias,
                  int64_t o, float* y, int64_t ldy, bool accumulate) {
  const float *w0 = W + o * in, *w1 = w0 + in, *w2 = w1 + in, *w3 = w2 + in;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * in;
    v16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
    int64_t i = 0;
    for (; i + kLanes <= in; i += kLanes) {
      const v16 xv = load(xr + i);
      a0 += load(w0 + i) * xv, a1 += load(w1 + i) * xv;
      a2 += load(w2 + i) * xv, a3 += load(w3 + i) * xv;
    }
    float s[4] = {sum_lanes(a0), sum_lanes(a1), sum_lanes(a2), sum_lanes(a3)};
    for (; i < in; ++i)
      s[0] += w0[i] * xr[i], s[1] += w1[i] * xr[i], s[2] += w2[i] * xr[i], s[3] += w3[i] * xr[i];
    float* yr = y + r * ldy + o;
    for (int k = 0; k < 4; ++k) {
      const float v = s[k] + (bias ? bias[o + k] : 0.0f);
      yr[k] = accumulate ? yr[k] + v : v;
    }
  }
}

// The same for one output (the last out % 4).
void one_output(const float* x, int64_t rows, int64_t in, const float* W, const float* bias,
                int64_t o, float* y, int64_t ldy, bool accumulate) {
  const float* w = W + o * in;
  for (int64_t r = 0; r < rows; ++r) {
    float s = 0;
    for (int64_t i = 0; i < in; ++i) s += w[i] * x[r * in + i];
    const float v = s + (bias ? bias[o] : 0.0f);
    y[r * ldy + o] = accumulate ? y[r * ldy + o] + v : v;
  }
}

// Rows this many or fewer go through the kernels above (a step: one row per sample);
// more through BLAS's GEMM, which reuses each weight for more rows at a time.
constexpr int64_t kVectorRows = 4;

}  // namespace

void linear(const float* x, int64_t rows, int64_t in, const float* W, const float* bias,
            int64_t out, float* y, int64_t ldy, bool accumulate) {
  if (rows <= kVectorRows) {  // never BLAS's threads: a step shares its rows out itself
    int64_t o = 0;
    for (; o + 4 <= out; o += 4) four_outputs(x, rows, in, W, bias, o, y, ldy, accumulate);
    for (; o < out; ++o) one_output(x, rows, in, W, bias, o, y, ldy, accumulate);
    return;
  }
  if (bias)
    for (int64_t r = 0; r < rows; ++r) {
      float* yr = y + r * ldy;
      if (accumulate) {
        AG_SIMD
        for (int64_t i = 0; i < out; ++i) yr[i] += bias[i];
      } else {
        std::memcpy(yr, bias, static_cast<size_t>(out) * sizeof(float));
      }
    }
  const float beta = bias || accumulate ? 1.0f : 0.0f;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows),
              static_cast<blasint>(out), static_cast<blasint>(in), 1.0f, x,
              static_cast<blasint>(in), W, static_cast<blasint>(in), beta, y,
              static_cast<blasint>(ldy));
}

void layer_norm(const float* x, int64_t rows, int64_t C, const float* w, const float* b, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * C;
    double m = 0, v = 0;
    AG_SIMD_SUM(m)
    for (int64_t i = 0; i < C; ++i) m += row[i];
    m /= static_cast<double>(C);
    AG_SIMD_SUM(v)
    for (int64_t i = 0; i < C; ++i) v += (row[i] - m) * (row[i] - m);
    v /= static_cast<double>(C);
    const float mt = static_cast<float>(m), rs = static_cast<float>(1.0 / std::sqrt(v + 1e-5));
    float* yr = y + r * C;
    AG_SIMD
    for (int64_t i = 0; i < C; ++i) yr[i] = (row[i] - mt) * rs * w[i] + b[i];
  }
}

void gelu(float* y, int64_t n) {
  AG_SIMD
  for (int64_t i = 0; i < n; ++i) y[i] = ag::detail::gelu_value(y[i]);
}

namespace {

// s[0..t) = softmax(s[0..t)) unnormalised; returns the sum to divide by.
float exp_shifted(float* s, int64_t t) {
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < t; ++j) m = std::max(m, s[j]);
  float sum = 0;
  AG_SIMD_SUM(sum)
  for (int64_t j = 0; j < t; ++j) sum += (s[j] = ag::detail::exp_fast(s[j] - m));
  return sum;
}

}  // namespace

void causal_softmax(float* scores, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float* s = scores + i * n;
    const float inv = 1.0f / exp_shifted(s, i + 1);
    AG_SIMD
    for (int64_t j = 0; j <= i; ++j) s[j] *= inv;
    std::fill(s + i + 1, s + n, 0.0f);
  }
}

namespace {

// s[0..t) = scale q . k_j, 64 positions at a time summed over the dimensions in four
// registers (the keys are transposed: dimension d of position j at kt[d * ldk + j]).
void scores(const float* q, const float* kt, int64_t ldk, int64_t t, int64_t D, float scale,
            float* s) {
  int64_t j0 = 0;
  for (; j0 + 4 * kLanes <= t; j0 += 4 * kLanes) {
    v16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
    for (int64_t d = 0; d < D; ++d) {
      const float qd = q[d] * scale;
      const float* kd = kt + d * ldk + j0;
      a0 += qd * load(kd), a1 += qd * load(kd + kLanes);
      a2 += qd * load(kd + 2 * kLanes), a3 += qd * load(kd + 3 * kLanes);
    }
    store(s + j0, a0), store(s + j0 + kLanes, a1);
    store(s + j0 + 2 * kLanes, a2), store(s + j0 + 3 * kLanes, a3);
  }
  for (; j0 + kLanes <= t; j0 += kLanes) {
    v16 a = {};
    for (int64_t d = 0; d < D; ++d) a += q[d] * scale * load(kt + d * ldk + j0);
    store(s + j0, a);
  }
  for (int64_t j = j0; j < t; ++j) {
    float a = 0;
    for (int64_t d = 0; d < D; ++d) a += q[d] * scale * kt[d * ldk + j];
    s[j] = a;
  }
}

// out[0..D) = sum_j w[j] v_j: sixteen dimensions at a time, four positions side by side.
void weighted_values(const float* w, const float* v, int64_t ldv, int64_t t, int64_t D,
                     float* out) {
  int64_t d0 = 0;
  for (; d0 + kLanes <= D; d0 += kLanes) {
    v16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
    const float* vd = v + d0;
    int64_t j = 0;
    for (; j + 4 <= t; j += 4) {
      a0 += w[j] * load(vd + j * ldv), a1 += w[j + 1] * load(vd + (j + 1) * ldv);
      a2 += w[j + 2] * load(vd + (j + 2) * ldv), a3 += w[j + 3] * load(vd + (j + 3) * ldv);
    }
    for (; j < t; ++j) a0 += w[j] * load(vd + j * ldv);
    store(out + d0, (a0 + a1) + (a2 + a3));
  }
  for (int64_t d = d0; d < D; ++d) {
    float a = 0;
    for (int64_t j = 0; j < t; ++j) a += w[j] * v[j * ldv + d];
    out[d] = a;
  }
}

}  // namespace

void attend(const float* q, const float* kt, int64_t ldk, const float* v, int64_t ldv, int64_t t,
            int64_t D, float scale, float* s, float* out) {
  scores(q, kt, ldk, t, D, scale, s);
  const float inv = 1.0f / exp_shifted(s, t);
  weighted_values(s, v, ldv, t, D, out);
  AG_SIMD
  for (int64_t d = 0; d < D; ++d) out[d] *= inv;
}

void transpose_into(const float* k, int64_t n, int64_t ld, int64_t c0, int64_t c1, float* kt,
                    int64_t T, int64_t t0) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = c0; c < c1; ++c) kt[c * T + t0 + t] = k[t * ld + c];
}

void SpinBarrier::wait(int threads) {
  if (threads <= 1) return;
  const unsigned generation = generation_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) == threads - 1) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    return;
  }
  for (int spins = 0; generation_.load(std::memory_order_acquire) == generation; ++spins) {
    if (spins >= 2000) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
    else
      __builtin_ia32_pause();
#endif
  }
}

bool StepPace::threaded() {
  ++steps_;
  if (timed_[1] < 2) return true;  // each is timed first, twice: the team, then one
  if (timed_[0] < 2) return false;
  const bool faster = average_[1] <= average_[0];
  trial_ = steps_ >= next_trial_;
  return trial_ ? !faster : faster;
}

void StepPace::record(bool threaded, double seconds) {
  const int mode = threaded ? 1 : 0;
  if (timed_[mode]++ == 0) return;  // a warm-up: the team's threads start, caches fill
  // the mode in use is averaged; a trial of the other stands for it alone (its old
  // average may be from a busier minute)
  double& avg = average_[mode];
  avg = timed_[mode] == 2 || trial_ ? seconds : 0.875 * avg + 0.125 * seconds;
  if (timed_[0] < 2 || timed_[1] < 2) return;
  if (trial_ || next_trial_ == 0) {  // the next trial of the slower: rarer the slower it is
    const double ratio = std::max(average_[0], average_[1]) / std::min(average_[0], average_[1]);
    next_trial_ = steps_ + static_cast<int64_t>(32 * std::min(ratio, 64.0));
    trial_ = false;
  }
}

Range share(int64_t n, int tid, int threads, int64_t align) {
  const int64_t units = (n + align - 1) / align;
  const int64_t per = units / threads, extra = units % threads;
  const int64_t first = tid * per + std::min<int64_t>(tid, extra);
  const int64_t count = per + (tid < extra ? 1 : 0);
  return {std::min(n, first * align), std::min(n, (first + count) * align)};
}

}  // namespace nn::decode
