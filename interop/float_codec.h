#pragma once
// float32 weights to and from the element types model files store them in (see interop.h
// for the map): float32 as is, bfloat16 rounded to nearest even (ag::bfloat16, as PyTorch
// rounds), float16 read exactly and written rounded to nearest even (beyond its range: inf).
// Writers hand what they write to a ByteSink a piece at a time, so no second copy of a model is
// ever made whole.
#include <cstddef>
#include <cstdint>
#include <functional>

namespace interop {

enum class StoredType { f32, f16, bf16 };

// Bytes of one element.
size_t stored_bytes(StoredType t);

// Where a writer's bytes go, in order: a file being written, or a string in tests.
using ByteSink = std::function<void(const char* data, size_t n)>;

// n floats, little-endian, as t, to out.
void write_floats(const float* src, int64_t n, StoredType t, const ByteSink& out);
// n little-endian elements of type t at src, as floats (exact for every type).
void read_floats(const char* src, int64_t n, StoredType t, float* dst);
// n zeros of type t (padding rows).
void write_zeros(int64_t n, StoredType t, const ByteSink& out);

}  // namespace interop
