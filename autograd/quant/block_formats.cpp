#include "autograd/quant/block_formats.h"

#include <stdexcept>

#include "autograd/parallel.h"
#include "autograd/quant/block_kernels.h"

namespace ag::quant {

namespace {

using namespace blocks;  // NOLINT: the table names every kernel

// ggml's type ids (ggml.h's enum ggml_type) and block sizes (ggml-common.h)
constexpr BlockLayout kFormats[] = {
    {BlockFormat::q4_0, "q4_0", "Q4_0", 2, 32, 18, quantize_q4_0, dequantize_q4_0},
    {BlockFormat::q4_1, "q4_1", "Q4_1", 3, 32, 20, quantize_q4_1, dequantize_q4_1},
    {BlockFormat::q5_0, "q5_0", "Q5_0", 6, 32, 22, quantize_q5_0, dequantize_q5_0},
    {BlockFormat::q5_1, "q5_1", "Q5_1", 7, 32, 24, quantize_q5_1, dequantize_q5_1},
    {BlockFormat::q8_0, "q8_0", "Q8_0", 8, 32, 34, quantize_q8_0, dequantize_q8_0},
    {BlockFormat::q4_k, "q4_k", "Q4_K", 12, 256, 144, quantize_q4_k, dequantize_q4_k},
    {BlockFormat::q5_k, "q5_k", "Q5_K", 13, 256, 176, quantize_q5_k, dequantize_q5_k},
    {BlockFormat::q6_k, "q6_k", "Q6_K", 14, 256, 210, quantize_q6_k, dequantize_q6_k},
    {BlockFormat::q8_k, "q8_k", "Q8_K", 15, 256, 292, nullptr, dequantize_q8_k},
};

}  // namespace

std::span<const BlockLayout> block_formats() {
  return kFormats;
}

const BlockLayout& layout(BlockFormat format) {
  for (const auto& l : kFormats)
    if (l.format == format) return l;
  throw std::logic_error("quant::layout: a format without a row");
}

const BlockLayout* layout_of_ggml_type(uint32_t type) {
  for (const auto& l : kFormats)
    if (l.ggml_type == type) return &l;
  return nullptr;
}

const BlockLayout* layout_named(const std::string& name) {
  for (const auto& l : kFormats)
    if (name == l.name) return &l;
  return nullptr;
}

void quantize_row(const BlockLayout& l, const float* x, int64_t n, uint8_t* out) {
  if (!l.quantize) throw std::logic_error(std::string("quant: ") + l.ggml + " is never written");
  for (int64_t b = 0; b < n / l.elements; ++b) l.quantize(x + b * l.elements, out + b * l.bytes);
}

void dequantize_row(const BlockLayout& l, const uint8_t* in, int64_t n, float* out) {
  for (int64_t b = 0; b < n / l.elements; ++b) l.dequantize(in + b * l.bytes, out + b * l.elements);
}

void quantize_rows(const BlockLayout& l, const float* x, int64_t rows, int64_t width,
                   uint8_t* out) {
  const int64_t bytes = row_bytes(l, width);
  // a block's search costs about 30 passes over its weights
  detail::parallel_for_items(rows, 1, 30.0 * static_cast<double>(width),
                             [&](int64_t begin, int64_t end) {
                               for (int64_t r = begin; r < end; ++r)
                                 quantize_row(l, x + r * width, width, out + r * bytes);
                             });
}

}  // namespace ag::quant
