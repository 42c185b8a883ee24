#pragma once
// A frozen weight held packed: a [rows, width] float32 parameter whose storage holds only
// its rows as blocks of a block format (block_formats.h: every format ggml's model files
// hold, Q8_K aside) or as bfloat16 values,
// never as float32 (docs/quantization.md, "Training over a quantized base"). The tensor
// keeps its shape, dtype (float32: what its values are) and its place among a module's
// parameters; what reads it goes through this header:
//   ag::linear (ops/matmul.cpp)  dequantizes the whole (stacked) matrix into a scratch
//                                tensor for the forward's GEMM, and again for backward's
//                                dx = dy W, then lets it go: the GEMMs are the ones the
//                                dequantized float weight runs, so the results are equal
//                                bit for bit, and thread-count invariant as they are
//   ag::embedding                dequantizes the rows the ids look up
// A packed tensor takes no gradient (requires_grad_ refuses it); any other read of its
// elements is a std::logic_error naming the format.
//
//   ag::quant::pack_in_place(linear.weight, *ag::quant::packed_format(BasePrecision::q8_0));
//   ag::Tensor y = ag::linear(x, linear.weight);   // as over the dequantized floats
#include <cstdint>
#include <span>
#include <string>

#include "autograd/tensor.h"

namespace ag::quant {

// How a run holds its frozen base weights (train's --base-precision): as float32 (packed
// not at all), bfloat16 values, or ggml blocks; `own`: as its --init-from file holds each
// (a GGUF's mix of formats kept block for block, float32 where the file has floats).
// The values from bf16 to q6_k index packed_formats(); new formats go before `own`.
enum class BasePrecision : uint8_t {
  fp32,
  bf16,
  q8_0,
  q4_k,
  q4_0,
  q4_1,
  q5_0,
  q5_1,
  q5_k,
  q6_k,
  own
};

// One row of the packed formats' table: the block rows of block_formats() that a base may
// take, and bfloat16 (a "block" of one weight in two bytes).
struct PackedFormat {
  const char* name;  // "bf16", "q8_0", "q4_k": as the options and checkpoints spell it
  int64_t elements;  // weights a block
  int64_t bytes;     // bytes a block
  // n weights (a multiple of elements) packed, and unpacked to float32 (exact)
  void (*pack)(const float* x, int64_t n, uint8_t* out);
  void (*unpack)(const uint8_t* in, int64_t n, float* out);
  // the same unpacked to bfloat16 (unpack's floats rounded), without a float32 row between
  void (*unpack_bf16)(const uint8_t* in, int64_t n, bfloat16* out);
};

std::span<const PackedFormat> packed_formats();
// The row of a base precision; null for fp32 (nothing packed) and own (each weight as its
// file holds it: no one format).
const PackedFormat* packed_format(BasePrecision precision);
// The row named; null when none is.
const PackedFormat* packed_format_named(const std::string& name);

// Weights of a packed matrix unpacked at once: a linear over a larger one (a Llama-3.2-1B
// head's 262 M) unpacks tiles of rows of at most this many (64 MB as bfloat16), its
// forward's output and backward's sums then computed tile by tile.
inline constexpr int64_t kUnpackTileWeights = int64_t{1} << 25;
// The tile's weights in force (kUnpackTileWeights unless a test set fewer, to tile small
// matrices); set_unpack_tile_weights(0) restores the default.
int64_t unpack_tile_weights();
void set_unpack_tile_weights(int64_t weights);

// Whether a row of `width` weights is a whole number of the format's blocks.
inline bool fits(const PackedFormat& f, int64_t width) {
  return width > 0 && width % f.elements == 0;
}
// Bytes of one row of `width` weights (fits() holds).
inline int64_t packed_row_bytes(const PackedFormat& f, int64_t width) {
  return width / f.elements * f.bytes;
}

// Replaces, in place, the storage of t (a float32 [rows, width] leaf that requires no
// grad, width a whole number of blocks) by its rows packed: every handle on t's impl
// (a tied head's) then reads the packed weight, and the float32 storage is let go.
void pack_in_place(Tensor& t, const PackedFormat& format);
// The same with the values of `values` (float32, t's shape) instead of t's own: t's float32
// storage, never written, is let go unread (a model's initial draws packed as drawn).
void pack_into(Tensor& t, const Tensor& values, const PackedFormat& format);
// Rows [r0, r0 + n) of `packed` (packed_empty's, [rows, width]) set to `values` (float32
// [n, width]) packed, each row as pack_into packs it: a matrix packed a chunk of rows at a
// time, never held whole as float32.
void pack_rows(Tensor& packed, int64_t r0, const Tensor& values);
// A packed tensor of `shape` [rows, width] over the given bytes (exactly its rows' bytes:
// std::invalid_argument otherwise), as a checkpoint's blocks are read back.
Tensor packed_tensor(const Shape& shape, const PackedFormat& format,
                     std::span<const uint8_t> bytes);
// A packed tensor of `shape` whose blocks are still to be written (through
// packed_data), as a checkpoint's blocks are read in pieces: std::invalid_argument unless
// shape is [rows, width] with rows a whole number of blocks.
Tensor packed_empty(const Shape& shape, const PackedFormat& format);
// t (a float32 parameter of packed's shape) rebound, in place, to packed's storage: every
// handle on t's impl (a tied head's) reads those very blocks, nothing re-quantized; t then
// requires no grad. A checkpoint's blocks taken by the model as they are.
void adopt_packed(Tensor& t, const Tensor& packed);
// Back to float32 storage, in place (the values unpacked): for what needs float elements
// (merging an adapter, the decoder).
void unpack_in_place(Tensor& t);
// The rows [r0, r1) of a packed tensor unpacked into `out` as dtype (float32, float64 or
// bfloat16), row after row; rows shared among the threads (each row's values whatever
// the count).
void unpack_rows(const Tensor& t, int64_t r0, int64_t r1, DType dtype, void* out);
// The whole matrix unpacked, as a new contiguous tensor of dtype.
Tensor unpacked(const Tensor& t, DType dtype);
// The packed bytes of t (its rows', row after row).
std::span<const uint8_t> packed_bytes(const Tensor& t);
std::span<uint8_t> packed_data(Tensor& t);
// The bytes of one element of a format's blocks as a file stores them: a weight's for a
// format of one-weight blocks (bfloat16: a uint16 each), else a byte (ggml's blocks are
// byte strings). Decided from the table's row, not by name.
inline int64_t packed_word_bytes(const PackedFormat& f) {
  return f.elements == 1 ? f.bytes : 1;
}

}  // namespace ag::quant
