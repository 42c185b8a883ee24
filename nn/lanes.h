#pragma once
// Sixteen floats as one value, for the decoder's kernels (inference_kernels.cpp,
// block_gemv.cpp, panel_gemv.cpp): one AVX-512 register (two AVX2 ones), loaded and
// stored through memcpy (no alignment asked), and summed in lane order, so that a sum's
// bits do not depend on the instructions the compiler picks.
#include <cstdint>
#include <cstring>

namespace nn::inference {

typedef float v16 __attribute__((vector_size(64)));
inline constexpr int64_t kLanes = 16;

inline v16 load(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, v16 v) {
  std::memcpy(p, &v, sizeof v);
}

// s = 0 + v[0] + v[1] + ... + v[15], in that order.
inline float sum_lanes(v16 v) {
  float s = 0;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}

}  // namespace nn::inference
