// The decoder's GEMV over Q8_0 blocks (nn/block_gemv.h) against its documented order,
// computed here lane by lane in scalar code: bit for bit, for outputs that are and are not a
// multiple of the four rows a pass takes, several rows of x, with and without bias and
// accumulation, quantized rows and rows of random bytes (any half as a scale).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "autograd/generator.h"
#include "autograd/half.h"
#include "autograd/quant/block_formats.h"
#include "nn/inference_kernels.h"

namespace quant = ag::quant;

namespace {

// x . one row of Q8_0 blocks in the order block_gemv.h documents.
float documented_q8_0(const float* x, const uint8_t* row, int64_t in) {
  float lo[16] = {}, hi[16] = {};
  for (int64_t b = 0; b < in / 32; ++b) {
    const uint8_t* block = row + 34 * b;
    uint16_t h;
    std::memcpy(&h, block, 2);
    const float d = ag::half_to_float(h);
    for (int i = 0; i < 16; ++i) {
      const float pl = static_cast<float>(static_cast<int8_t>(block[2 + i])) * x[32 * b + i];
      const float ph = static_cast<float>(static_cast<int8_t>(block[18 + i])) * x[32 * b + 16 + i];
      lo[i] = std::fma(pl, d, lo[i]);
      hi[i] = std::fma(ph, d, hi[i]);
    }
  }
  float s = 0;
  for (int i = 0; i < 16; ++i) s += lo[i] + hi[i];
  return s;
}

bool same_bits(float a, float b) {
  if (std::isnan(a)) return std::isnan(b);  // (a NaN's payload follows the operands' order)
  return std::memcmp(&a, &b, 4) == 0;
}

}  // namespace

TEST_CASE("the Q8_0 GEMV is its documented order, bit for bit, in any group of rows",
          "[decode][quant]") {
  ag::Generator gen(11);
  const quant::BlockLayout& l = quant::layout(quant::BlockFormat::q8_0);
  int64_t differ_in_plain_order = 0, checked = 0;
  for (const int64_t in : {32, 64, 2048, 8192}) {  // (rows of 2048 or more: four a pass)
    for (const int64_t out : {1, 3, 4, 5, 8, 37}) {
      const int64_t rows = out == 37 ? 5 : 2, row_bytes = quant::row_bytes(l, in);
      std::vector<float> x(static_cast<size_t>(rows * in)), wide(static_cast<size_t>(in));
      for (auto& v : x) v = static_cast<float>(gen.normal());
      std::vector<uint8_t> w(static_cast<size_t>(out * row_bytes));
      for (int64_t o = 0; o < out; ++o) {
        uint8_t* row = w.data() + o * row_bytes;
        for (auto& v : wide) v = static_cast<float>(gen.normal());
        quant::quantize_row(l, wide.data(), in, row);
        if (o % 4 == 3)  // random bytes: any half as a scale (subnormal, infinite, NaN)
          for (int64_t i = 0; i < row_bytes; ++i) row[i] = static_cast<uint8_t>(gen.next_u64());
      }
      std::vector<float> bias(static_cast<size_t>(out));
      for (auto& v : bias) v = static_cast<float>(gen.normal());
      for (const bool with_bias : {false, true})
        for (const bool accumulate : {false, true}) {
          std::vector<float> y(static_cast<size_t>(rows * out), 0.25f);
          nn::inference::Weights W;
          W.q8_0 = w.data();
          nn::inference::linear(x.data(), rows, in, W, with_bias ? bias.data() : nullptr, out, out,
                                y.data(), out, accumulate, /*vector_rows=*/rows);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t o = 0; o < out; ++o) {
              const float dot = documented_q8_0(x.data() + r * in, w.data() + o * row_bytes, in);
              const float v = dot + (with_bias ? bias[o] : 0.0f);
              const float want = accumulate ? 0.25f + v : v;
              INFO("in " << in << " out " << out << " row " << r << " output " << o << ": "
                         << y[r * out + o] << " want " << want);
              REQUIRE(same_bits(y[r * out + o], want));
              float plain = 0;
              for (int64_t i = 0; i < in; ++i) {
                const uint8_t* block = w.data() + o * row_bytes + 34 * (i / 32);
                uint16_t h;
                std::memcpy(&h, block, 2);
                plain += static_cast<float>(static_cast<int8_t>(block[2 + i % 32])) *
                         ag::half_to_float(h) * x[r * in + i];
              }
              differ_in_plain_order += in >= 64 && !same_bits(plain, dot);
              checked += in >= 64;
            }
        }
    }
  }
  // the comparison sees the order: a plain left-to-right sum differs in most rows
  CHECK(differ_in_plain_order > checked / 2);
}
