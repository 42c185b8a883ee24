#pragma once
// Runtime element types. Kernels are templates on the C++ element type; AG_DISPATCH_FLOAT
// (and AG_DISPATCH_ALL) turns a runtime DType into a call of that template.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "autograd/bfloat16.h"

namespace ag {

// BFloat16 is a storage type (autograd/bfloat16.h): made, viewed, copied and converted, fed
// by autocast to the GEMMs and the attention kernel; no arithmetic op takes it.
enum class DType : uint8_t { Float32, Float64, Int64, Bool, BFloat16 };

inline size_t dtype_size(DType d) {
  switch (d) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
    case DType::BFloat16: return 2;
  }
  return 0;
}

inline const char* dtype_name(DType d) {
  switch (d) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
    case DType::BFloat16: return "bfloat16";
  }
  return "?";
}

inline bool is_floating(DType d) {
  return d == DType::Float32 || d == DType::Float64;
}

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::Float32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::Float64;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::Int64;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::Bool;
}
template <>
constexpr DType dtype_of<bfloat16>() {
  return DType::BFloat16;
}

}  // namespace ag

// One case of a dispatch switch: binds `scalar_t` to TYPE and runs the lambda.
#define AG_DISPATCH_CASE(ENUM, TYPE, ...) \
  case ::ag::DType::ENUM: {               \
    using scalar_t = TYPE;                \
    return __VA_ARGS__();                 \
  }

// Runs the lambda with `scalar_t` bound to the element type of a floating DType.
#define AG_DISPATCH_FLOAT(DT, WHAT, ...)                                             \
  [&] {                                                                              \
    switch (DT) {                                                                    \
      AG_DISPATCH_CASE(Float32, float, __VA_ARGS__)                                  \
      AG_DISPATCH_CASE(Float64, double, __VA_ARGS__)                                 \
      default:                                                                       \
        throw std::invalid_argument(std::string(WHAT) +                              \
                                    ": expected a float32 or float64 tensor, got " + \
                                    ::ag::dtype_name(DT));                           \
    }                                                                                \
  }()

// Same, over every DType (bool is stored as one byte, bfloat16 converts through float).
#define AG_DISPATCH_ALL(DT, WHAT, ...)                                  \
  [&] {                                                                 \
    switch (DT) {                                                       \
      AG_DISPATCH_CASE(Float32, float, __VA_ARGS__)                     \
      AG_DISPATCH_CASE(Float64, double, __VA_ARGS__)                    \
      AG_DISPATCH_CASE(Int64, int64_t, __VA_ARGS__)                     \
      AG_DISPATCH_CASE(Bool, bool, __VA_ARGS__)                         \
      AG_DISPATCH_CASE(BFloat16, ::ag::bfloat16, __VA_ARGS__)           \
    }                                                                   \
    throw std::invalid_argument(std::string(WHAT) + ": unknown dtype"); \
  }()

// `#pragma` cannot appear inside a macro argument (the dispatched lambdas are ones).
#define AG_SIMD _Pragma("omp simd")
#define AG_PRAGMA_STRING(x) #x
// A vectorised sum into `var` (needs the reduction clause: without it the compiler
// keeps a sum's order and so its scalar loop).
#define AG_SIMD_SUM(var) _Pragma(AG_PRAGMA_STRING(omp simd reduction(+ : var)))
