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

// tanh(u) = 1 - 2 / (exp(2u) + 1): exact +-1 at the extremes, within a few 1e-8 of tanhf.
inline float tanh_fast(float u) {
  return 1.0f - 2.0f / (exp_fast(2.0f * u) + 1.0f);
}
inline double tanh_fast(double u) {
  return std::tanh(u);
}

// gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), GPT-2's approximation;
// gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluA = 0.044715;

template <typename T>
inline T gelu_value(T x) {
  return T(0.5) * x * (T(1) + tanh_fast(T(kGeluC) * (x + T(kGeluA) * x * x * x)));
}

template <typename T>
inline T gelu_derivative(T x) {
  const T t = tanh_fast(T(kGeluC) * (x + T(kGeluA) * x * x * x));
  const T du = T(kGeluC) * (T(1) + T(3 * kGeluA) * x * x);
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
}

// Both from one tanh: the same bits as gelu_value(x) and gelu_derivative(x)
template <typename T>
inline void gelu_and_derivative(T x, T& value, T& derivative) {
  const T t = tanh_fast(T(kGeluC) * (x + T(kGeluA) * x * x * x));
  const T du = T(kGeluC) * (T(1) + T(3 * kGeluA) * x * x);
  value = T(0.5) * x * (T(1) + t);
  derivative = T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
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

}  // namespace ag::detail
