// llama.cpp's searches for a K-format sub-block's scale (ggml-quants.c's make_qkx2_quants
// and make_qx_quants), kept exactly: every sum in float32, in source order, unfused (this
// file is compiled with -ffp-contract=off), so that the same floats give the same levels.
#include <cmath>

#include "autograd/quant/block_kernels.h"

namespace ag::quant::blocks {

namespace {

struct LevelSums {
  float l = 0, l2 = 0, xl = 0;  // weighted sums of levels, squared levels, levels x weights
};

// The levels of x - min at iscale, clamped to 0..nmax, into out, and their weighted sums.
LevelSums levels_at(int n, int nmax, const float* x, const float* w, float min, float iscale,
                    uint8_t* out) {
  LevelSums s;
  for (int i = 0; i < n; ++i) {
    const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
    out[i] = static_cast<uint8_t>(l);
    const auto fl = static_cast<float>(l);
    s.l += w[i] * fl;
    s.l2 += w[i] * fl * fl;
    s.xl += w[i] * fl * x[i];
  }
  return s;
}

float weighted_error(int n, const float* x, const float* w, const uint8_t* L, float scale,
                     float min) {
  float error = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = scale * static_cast<float>(L[i]) + min - x[i];
    error += w[i] * (diff * diff);
  }
  return error;
}

}  // namespace

float scale_and_min(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                    float* negated_min, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0], sum_w = weights[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *negated_min = -min;
    return 0.0f;
  }
  float scale = 1 / (static_cast<float>(nmax) / (max - min));
  levels_at(n, nmax, x, weights, min, static_cast<float>(nmax) / (max - min), L);
  float best_error = weighted_error(n, x, weights, L, scale, min);
  uint8_t trial[256];
  for (int is = 0; is <= nstep; ++is) {
    const float iscale =
        (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    const LevelSums s = levels_at(n, nmax, x, weights, min, iscale, trial);
    const float D = sum_w * s.l2 - s.l * s.l;
    if (!(D > 0)) continue;
    float this_scale = (sum_w * s.xl - sum_x * s.l) / D;
    float this_min = (s.l2 * sum_x - s.l * s.xl) / D;
    if (this_min > 0) this_min = 0, this_scale = s.xl / s.l2;
    const float error = weighted_error(n, x, weights, trial, this_scale, this_min);
    if (error < best_error) {
      for (int i = 0; i < n; ++i) L[i] = trial[i];
      best_error = error, scale = this_scale, min = this_min;
    }
  }
  *negated_min = -min;
  return scale;
}

namespace {

// Signed levels of x at iscale (clamped to -nmax..nmax-1), stored + nmax when out is given,
// and the x^2-weighted sums sum(w x l), sum(w l^2).
void signed_levels_at(int n, int nmax, const float* x, float iscale, int8_t* out, float& sumlx,
                      float& suml2) {
  sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
    if (out) out[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i], fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
}

}  // namespace

float signed_scale(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
  if (amax < 1e-15f) {  // ggml's GROUP_MAX_EPS: all zero
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  float sumlx, suml2;
  signed_levels_at(n, nmax, x, static_cast<float>(-nmax) / max, L, sumlx, suml2);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    signed_levels_at(n, nmax, x, iscale, nullptr, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      signed_levels_at(n, nmax, x, iscale, L, sumlx, suml2);
      scale = sumlx / suml2, best = scale * sumlx;
    }
  }
  return scale;
}

}  // namespace ag::quant::blocks
