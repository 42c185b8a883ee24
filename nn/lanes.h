#pragma once
// Sixteen floats as one value, for the decoder's kernels (inference_kernels.cpp,
// block_gemv.cpp, panel_gemv.cpp): one AVX-512 register, or a pair of AVX ones, loaded and
// stored through memcpy (no alignment asked), and summed in lane order, so that a sum's
// bits do not depend on the instructions the compiler picks.
//
// Without AVX-512 the value is a struct of two 8-float vectors (lanes 0-7 and 8-15) with
// the same operators: GCC keeps a 64-byte vector type in memory where the target has no
// 64-byte registers (its loads through general registers, every sum spilled), and the
// decoder's GEMVs ran at 5-7 GFLOP/s on an AMD EPYC Zen 3. Each lane's arithmetic is the
// same either way.
#include <cstdint>
#include <cstring>

namespace nn::inference {

inline constexpr int64_t kLanes = 16;

#ifdef __AVX512F__
typedef float v16 __attribute__((vector_size(64)));

inline v16 load(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, v16 v) {
  std::memcpy(p, &v, sizeof v);
}
// Lane by lane, b where a < b, else a.
inline v16 larger(v16 a, v16 b) {
  return a < b ? b : a;
}
#else
typedef float v8 __attribute__((vector_size(32)));
struct v16 {
  v8 lo, hi;  // lanes 0-7 and 8-15
  float operator[](int i) const { return i < 8 ? lo[i] : hi[i - 8]; }
};
inline v16 operator+(v16 a, v16 b) {
  return {a.lo + b.lo, a.hi + b.hi};
}
inline v16 operator-(v16 a, float b) {
  return {a.lo - b, a.hi - b};
}
inline v16 operator*(v16 a, v16 b) {
  return {a.lo * b.lo, a.hi * b.hi};
}
inline v16 operator*(float a, v16 b) {
  return {a * b.lo, a * b.hi};
}
inline v16& operator+=(v16& a, v16 b) {
  a.lo += b.lo, a.hi += b.hi;
  return a;
}

inline v16 load(const float* p) {
  v16 v;
  std::memcpy(&v.lo, p, sizeof v.lo);
  std::memcpy(&v.hi, p + 8, sizeof v.hi);
  return v;
}
inline void store(float* p, v16 v) {
  std::memcpy(p, &v.lo, sizeof v.lo);
  std::memcpy(p + 8, &v.hi, sizeof v.hi);
}
inline v16 larger(v16 a, v16 b) {
  return {a.lo < b.lo ? b.lo : a.lo, a.hi < b.hi ? b.hi : a.hi};
}
#endif

// s = 0 + v[0] + v[1] + ... + v[15], in that order.
inline float sum_lanes(v16 v) {
  float s = 0;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}

}  // namespace nn::inference
