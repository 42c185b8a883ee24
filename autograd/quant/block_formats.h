#pragma once
// ggml's quantised block formats, one row of a table each (block_formats()): how many
// weights a block holds, its bytes, its ggml type id, and the two functions that make a
// block from floats and floats from a block. GGUF's reader and writer (interop/gguf*.cpp),
// the decoder's block GEMV (nn/inference_kernels.cpp) and, later, a GEMM over a frozen
// quantised base all go through a row of this table, never through a switch of their own.
//
// Each layout is written from ggml's documented block structs (ggml-common.h): little-endian,
// scales as IEEE halves (ag::half_from_float, rounded to nearest even as F16C does), weights
// along a row of a matrix, a row a whole number of blocks.
//
//   Q8_0  32 weights, 34 bytes:  d; qs[32] int8                       w = qs * d
//   Q4_0  32 weights, 18 bytes:  d; qs[16] nibbles (low: 0..15, high: 16..31)   w = (q - 8) d
//   Q4_1  32 weights, 20 bytes:  d, m; qs[16]                          w = q d + m
//   Q5_0  32 weights, 22 bytes:  d; qh (32 fifth bits); qs[16]         w = (q - 16) d
//   Q5_1  32 weights, 24 bytes:  d, m; qh; qs[16]                      w = q d + m
//   Q4_K 256 weights, 144 bytes: d, dmin; 12 bytes of 8 six-bit scales and mins; qs[128]
//                                w = d sc q - dmin m, by sub-block of 32
//   Q5_K 256 weights, 176 bytes: as Q4_K with qh[32] (the fifth bits) before qs
//   Q6_K 256 weights, 210 bytes: ql[128] (low 4 bits), qh[64] (high 2), scales[16] int8, d
//                                w = d sc (q - 32), by sub-block of 16
//   Q8_K 256 weights, 292 bytes: d (a float32); qs[256] int8; bsums[16] int16   w = d qs
//        (llama.cpp quantises activations to Q8_K for its K-format dot products; no model
//        file of llama-quantize holds it: read if a file has it, never written)
//
// Quantising follows llama.cpp's reference quantizers (quantize_row_*_ref, which
// llama-quantize runs when it has no importance matrix) step for step in float32, so the
// bytes are the same; the K formats' searches for a scale (make_qkx2_quants, make_qx_quants)
// are kept exactly, in source order, compiled without contracting a*b+c into one rounding
// (-ffp-contract=off: a build of llama.cpp that fuses them may pick another scale).
#include <cstdint>
#include <span>
#include <string>

namespace ag::quant {

enum class BlockFormat : uint8_t { q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k, q8_k };

struct BlockLayout {
  BlockFormat format;
  const char* name;    // as attograd's options spell it: "q8_0", "q4_k"
  const char* ggml;    // as ggml names it: "Q8_0", "Q4_K"
  uint32_t ggml_type;  // the GGUF tensor type id
  int64_t elements;    // weights in a block
  int64_t bytes;       // bytes of a block
  // one block from `elements` floats (null: not written, Q8_K)
  void (*quantize)(const float* x, uint8_t* block);
  // `elements` floats from one block (exact: the arithmetic ggml's dequantize_row_* does)
  void (*dequantize)(const uint8_t* block, float* y);
};

// Every format, one row each.
std::span<const BlockLayout> block_formats();
const BlockLayout& layout(BlockFormat format);
// The row of a GGUF tensor type id; null for a type that is not one of these.
const BlockLayout* layout_of_ggml_type(uint32_t type);
// The row named (attograd's spelling); null when none is.
const BlockLayout* layout_named(const std::string& name);

// Bytes of `elements` weights (a whole number of blocks: the caller checks).
inline int64_t row_bytes(const BlockLayout& l, int64_t elements) {
  return elements / l.elements * l.bytes;
}
// n weights (a multiple of the block) to blocks, and blocks back to floats.
void quantize_row(const BlockLayout& l, const float* x, int64_t n, uint8_t* out);
void dequantize_row(const BlockLayout& l, const uint8_t* in, int64_t n, float* out);
// rows x width weights (width a multiple of the block), row after row, to blocks: the rows
// shared among the threads (each row's bytes whatever the thread count).
void quantize_rows(const BlockLayout& l, const float* x, int64_t rows, int64_t width, uint8_t* out);

}  // namespace ag::quant
