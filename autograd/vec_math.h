#pragma once
// Internal: exp for float32 kernels in a form the compiler vectorises (AVX-512: sixteen
// lanes per instruction), where std::exp is a scalar libm call per element. float64 keeps
// std::exp, so gradient checks and the float64 references see the exact function.
//
// Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, then Cephes' degree-6
// polynomial for e^r, scaled by 2^n through the exponent bits: within 2 ulp of expf over
// the whole range (tests/test_vec_math.cpp sweeps it). exp(-inf) and anything below
// -87.34 give exactly 0 (softmax over masked scores relies on it), overflow gives +inf,
// NaN stays NaN.
#include <bit>
#include <cmath>
#include <cstdint>

namespace ag::detail {

// Each translation unit keeps its own copies (an unnamed namespace): a program's inline
// functions are otherwise one copy, the linker's pick among the units that emitted one, and
// the tests compile at -O1, where GCC fuses no multiply-add. A test unit's copy of
// exp_fast then ran inside the library's kernels, and swiglu's gradient stopped matching
// silu's then mul's by a bit.
namespace {

inline float exp_fast(float x) {
  const float lo = -87.336544f, hi = 88.72283f;
  // NaN is clamped too (to lo), so the int conversion below never sees a NaN
  const float xc = x > hi ? hi : (x >= lo ? x : lo);
  // round to nearest by the 1.5 * 2^23 trick: floorf does not vectorise without
  // -fno-trapping-math, and no fast-math flag lets the compiler undo this addition
  const float shifter = 12582912.0f;
  const float n = (xc * 1.44269504088896341f + shifter) - shifter;
  float r = xc - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n in two halves, so that n = 128 (x near hi) does not overflow the exponent field
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  const float s1 = std::bit_cast<float>((n1 + 127) << 23);
  const float s2 = std::bit_cast<float>((n2 + 127) << 23);
  float y = p * s1 * s2;
  y = x < lo ? 0.0f : y;
  y = x > hi ? INFINITY : y;
  return x != x ? x : y;
}

inline double exp_fast(double x) {
  return std::exp(x);
}

// gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), GPT-2's approximation;
// gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluA = 0.044715;

// float32 computes it as 0.5 (1 + tanh(u)) = s = 1 / (1 + e^z), z = -2u: gelu = x s,
// gelu' = s + 2 x s (1 - s) du/dx, with one exp and one division, where going through
// tanh(u) = 1 - 2 / (e^2u + 1) took more of both and guarded exp's range twice (1.4-1.5x
// the time). e^z for it: exp_fast's polynomial in fused multiply-adds, z clamped to
// [-87, 89]: below, e^z < 2^-125 and s rounds to 1 as it should; above, the scale is
// 2^128 = +inf and s = 0, the limit (x = -inf gives -inf * 0 = NaN, as the tanh form
// does); a NaN is clamped to 89 (no NaN reaches the int conversion) and x carries it into
// the result. Against the tanh form in float64: within 2e-7 max(1, |gelu|) and
// 2.5e-6 max(1, |gelu'|) (tests/test_vec_math.cpp).
inline float gelu_exp(float z) {
  z = z < 89.0f ? z : 89.0f;
  z = z > -87.0f ? z : -87.0f;
  const float shifter = 12582912.0f;  // round to nearest, as in exp_fast
  const float n = std::fma(z, 1.44269504088896341f, shifter) - shifter;
  float r = std::fma(n, -0.693359375f, z);
  r = std::fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  p = std::fma(p * r, r, r + 1.0f);
  const int32_t ni = static_cast<int32_t>(n);  // in [-126, 128]: one scale suffices
  return p * std::bit_cast<float>((ni + 127) << 23);
}

// s = 0.5 (1 + tanh(u)) for float32
inline float gelu_sigmoid(float x) {
  const float z = x * std::fma(x * x, float(-2 * kGeluC * kGeluA), float(-2 * kGeluC));
  return 1.0f / (1.0f + gelu_exp(z));
}

// 2 du/dx
inline float gelu_du2(float x) {
  return std::fma(x * x, float(6 * kGeluC * kGeluA), float(2 * kGeluC));
}

inline float gelu_value(float x) {
  return x * gelu_sigmoid(x);
}
inline double gelu_value(double x) {
  return 0.5 * x * (1.0 + std::tanh(kGeluC * (x + kGeluA * x * x * x)));
}

inline float gelu_derivative(float x) {
  const float s = gelu_sigmoid(x);
  return std::fma(x * s * (1.0f - s), gelu_du2(x), s);
}
inline double gelu_derivative(double x) {
  const double t = std::tanh(kGeluC * (x + kGeluA * x * x * x));
  const double du = kGeluC * (1.0 + 3 * kGeluA * x * x);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du;
}

// Both from one exp (float32) or tanh: the same bits as gelu_value(x) and gelu_derivative(x)
inline void gelu_and_derivative(float x, float& value, float& derivative) {
  const float s = gelu_sigmoid(x);
  value = x * s;
  derivative = std::fma(x * s * (1.0f - s), gelu_du2(x), s);
}
inline void gelu_and_derivative(double x, double& value, double& derivative) {
  value = gelu_value(x);
  derivative = gelu_derivative(x);
}

// silu(x) = x sigmoid(x) = x / (1 + exp(-x)) (SwiGLU's gate, Llama's and Qwen's MLP);
// silu'(x) = s (1 + x (1 - s)), s = sigmoid(x). exp(-x) overflows to inf for x < -88:
// x / inf = -0, the limit.
template <typename T>
inline T silu_value(T x) {
  return x / (T(1) + exp_fast(-x));
}

template <typename T>
inline T silu_derivative(T x) {
  const T sig = T(1) / (T(1) + exp_fast(-x));
  return sig * (T(1) + x * (T(1) - sig));
}

// Both from one exp, the same values as the two above (SwiGLU's backward needs both).
template <typename T>
inline void silu_and_derivative(T x, T& value, T& derivative) {
  const T d = T(1) + exp_fast(-x), sig = T(1) / d;
  value = x / d;
  derivative = sig * (T(1) + x * (T(1) - sig));
}

}  // namespace

}  // namespace ag::detail
