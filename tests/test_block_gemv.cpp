// The decoder's GEMVs over Q8_0 blocks (nn/block_gemv.h), by float32 activations and by
// activations rounded to Q8_0 (and Q4_K's by Q8_K activations, grouped as its dot product), against
// their documented arithmetic, computed here lane by lane in scalar code from the plain blocks: bit
// for bit, for outputs that are and are not a multiple of the four rows a pass takes, several rows
// of x, with and without bias and accumulation, quantized rows and rows of random bytes (any half
// as a scale).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/generator.h"
#include "autograd/half.h"
#include "autograd/quant/block_formats.h"
#include "autograd/quant/unpack_kernels.h"
#include "nn/block_gemv.h"
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

// Block b of x rounded to Q8_0 as block_gemv.h documents: its scale, and its levels in p.
float rounded_block(const float* x, int32_t* p) {
  float m = 0;
  bool finite = true;
  for (int i = 0; i < 32; ++i) {
    finite = finite && std::isfinite(x[i]);
    m = std::max(m, std::fabs(x[i]));
  }
  const float dx = finite ? ag::half_to_float(ag::half_from_float(m / 127.0f))
                          : std::numeric_limits<float>::quiet_NaN();
  for (int i = 0; i < 32; ++i)
    p[i] = finite && dx != 0.0f ? static_cast<int32_t>(std::nearbyint(x[i] * (127.0f / m))) : 0;
  return dx;
}

// x . one row of plain Q8_0 blocks by x rounded to Q8_0, in the documented order: block
// b = 16 g + l in lane l, a lane past the last block adding fma(0, 0, acc).
float documented_q8_0_q8(const float* x, const uint8_t* row, int64_t in) {
  const int64_t blocks = in / 32;
  float acc[16] = {};
  for (int64_t g = 0; 16 * g < blocks; ++g)
    for (int64_t l = 0; l < 16; ++l) {
      const int64_t b = 16 * g + l;
      if (b >= blocks) {
        acc[l] = std::fma(0.0f, 0.0f, acc[l]);
        continue;
      }
      int32_t p[32], sum = 0;
      const float dx = rounded_block(x + 32 * b, p);
      for (int i = 0; i < 32; ++i) sum += static_cast<int8_t>(row[34 * b + 2 + i]) * p[i];
      uint16_t h;
      std::memcpy(&h, row + 34 * b, 2);
      acc[l] = std::fma(static_cast<float>(sum), ag::half_to_float(h) * dx, acc[l]);
    }
  float s = 0;
  for (float v : acc) s += v;
  return s;
}

// How far x . W may move when x is rounded to Q8_0: each x within m (1/254 + 1/2048) of
// p dx (half a level, and dx's rounding to a half), m its block's largest |x|; and 1e-5 of
// the sum of |products| for the float sums' own rounding.
double rounding_bound(const float* x, const uint8_t* row, int64_t in) {
  double bound = 0, magnitude = 0;
  for (int64_t b = 0; b < in / 32; ++b) {
    double m = 0;
    for (int i = 0; i < 32; ++i) m = std::max(m, std::fabs(static_cast<double>(x[32 * b + i])));
    uint16_t h;
    std::memcpy(&h, row + 34 * b, 2);
    for (int i = 0; i < 32; ++i) {
      const double w = ag::half_to_float(h) * static_cast<int8_t>(row[34 * b + 2 + i]);
      bound += std::fabs(w) * m * (1.0 / 254 + 1.0 / 2048);
      magnitude += std::fabs(w * x[32 * b + i]);
    }
  }
  return bound + 1e-5 * magnitude;
}

bool same_float_bits(float a, float b) {
  if (std::isnan(a)) return std::isnan(b);  // (a NaN's payload follows the operands' order)
  return std::memcmp(&a, &b, 4) == 0;
}

// `out` rows of Q8_0 blocks of `in` weights: normal values quantized, and every fourth row
// random bytes (any half as a scale: subnormal, infinite, NaN; any level, -128 too).
std::vector<uint8_t> q8_0_rows(ag::Generator& gen, int64_t out, int64_t in) {
  const quant::BlockLayout& l = quant::layout(quant::BlockFormat::q8_0);
  const int64_t row_bytes = quant::row_bytes(l, in);
  std::vector<uint8_t> w(static_cast<size_t>(out * row_bytes));
  std::vector<float> wide(static_cast<size_t>(in));
  for (int64_t o = 0; o < out; ++o) {
    uint8_t* row = w.data() + o * row_bytes;
    for (auto& v : wide) v = static_cast<float>(gen.normal());
    quant::quantize_row(l, wide.data(), in, row);
    if (o % 4 == 3)
      for (int64_t i = 0; i < row_bytes; ++i) row[i] = static_cast<uint8_t>(gen.next_u64());
  }
  return w;
}

// linear() over W, with and without bias and accumulation (onto 0.25), gives
// dot(r, o) + bias bit for bit for every row r of x and output o.
template <class Dot>
void check_linear(const std::vector<float>& x, int64_t rows, int64_t in, nn::inference::Weights W,
                  int64_t out, ag::Generator& gen, Dot dot) {
  std::vector<float> bias(static_cast<size_t>(out));
  for (auto& v : bias) v = static_cast<float>(gen.normal());
  for (const bool with_bias : {false, true})
    for (const bool accumulate : {false, true}) {
      std::vector<float> y(static_cast<size_t>(rows * out), 0.25f);
      nn::inference::linear(x.data(), rows, in, W, with_bias ? bias.data() : nullptr, out, out,
                            y.data(), out, accumulate, /*vector_rows=*/rows);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < out; ++o) {
          const float v = dot(r, o) + (with_bias ? bias[o] : 0.0f);
          const float want = accumulate ? 0.25f + v : v;
          INFO("in " << in << " out " << out << " row " << r << " output " << o << ": "
                     << y[r * out + o] << " want " << want);
          REQUIRE(same_float_bits(y[r * out + o], want));
        }
    }
}

// x . W in plain left-to-right order, each weight dequantized.
float plain_q8_0(const float* x, const uint8_t* row, int64_t in) {
  float plain = 0;
  for (int64_t i = 0; i < in; ++i) {
    const uint8_t* block = row + 34 * (i / 32);
    uint16_t h;
    std::memcpy(&h, block, 2);
    plain +=
        static_cast<float>(static_cast<int8_t>(block[2 + i % 32])) * ag::half_to_float(h) * x[i];
  }
  return plain;
}

}  // namespace

TEST_CASE("the Q8_0 GEMV is its documented order, bit for bit, in any group of rows",
          "[decode][quant]") {
  ag::Generator gen(11);
  int64_t differ_in_plain_order = 0, checked = 0;
  for (const int64_t in : {32, 64, 2048, 8192}) {  // (rows of 2048 or more: four a pass)
    for (const int64_t out : {1, 3, 4, 5, 8, 37}) {
      const int64_t rows = out == 37 ? 5 : 2, row_bytes = in / 32 * 34;
      std::vector<float> x(static_cast<size_t>(rows * in));
      for (auto& v : x) v = static_cast<float>(gen.normal());
      const std::vector<uint8_t> w = q8_0_rows(gen, out, in);
      nn::inference::Weights W;
      W.q8_0 = w.data();
      auto dot = [&](int64_t r, int64_t o) {
        return documented_q8_0(x.data() + r * in, w.data() + o * row_bytes, in);
      };
      check_linear(x, rows, in, W, out, gen, dot);
      for (int64_t r = 0; in >= 64 && r < rows; ++r)
        for (int64_t o = 0; o < out; ++o) {
          differ_in_plain_order += !same_float_bits(
              plain_q8_0(x.data() + r * in, w.data() + o * row_bytes, in), dot(r, o));
          ++checked;
        }
    }
  }
  // the comparison sees the order: a plain left-to-right sum differs in most rows
  CHECK(differ_in_plain_order > checked / 2);
}

TEST_CASE("the Q8_0-by-Q8_0 GEMV is llama.cpp's rounding of x in its documented order, bit for bit",
          "[decode][quant]") {
  ag::Generator gen(12);
  int64_t rounded_differently = 0, checked = 0;
  // (rows of 1, 15, 16, 17 and 256 blocks: a group short, whole, and one past)
  for (const int64_t in : {32, 480, 512, 544, 8192}) {
    for (const int64_t out : {1, 5, 37}) {
      const int64_t rows = 4, row_bytes = in / 32 * 34;
      std::vector<float> x(static_cast<size_t>(rows * in));
      for (auto& v : x) v = static_cast<float>(gen.normal());
      x[static_cast<size_t>(in)] = std::numeric_limits<float>::infinity();  // row 1: infinite
      x[static_cast<size_t>(2 * in + 3)] = std::numeric_limits<float>::quiet_NaN();  // row 2
      for (int64_t i = 0; i < 32; ++i)  // row 3's first block: its scale rounds to a zero half
        x[static_cast<size_t>(3 * in + i)] = 1e-9f * static_cast<float>(i);
      const std::vector<uint8_t> w = q8_0_rows(gen, out, in);
      std::vector<uint8_t> interleaved(w.size());
      nn::inference::interleave_q8_0(w.data(), out, in, interleaved.data());
      nn::inference::Weights W;
      W.q8_0_q8 = interleaved.data();
      auto dot = [&](int64_t r, int64_t o) {
        return documented_q8_0_q8(x.data() + r * in, w.data() + o * row_bytes, in);
      };
      check_linear(x, rows, in, W, out, gen, dot);
      for (int64_t o = 0; o < out; ++o) {
        const uint8_t* row = w.data() + o * row_bytes;
        for (int64_t r : {1, 2}) CHECK(std::isnan(dot(r, o)));  // never a finite sum
        if (o % 4 == 3) continue;
        // near the float32 activations' sum, and not it: x was rounded
        const float exact = documented_q8_0(x.data(), row, in);
        CHECK(std::fabs(dot(0, o) - exact) <= rounding_bound(x.data(), row, in));
        rounded_differently += !same_float_bits(dot(0, o), exact);
        ++checked;
      }
    }
  }
  CHECK(rounded_differently > checked * 3 / 4);
}

TEST_CASE("the Q4_K-by-Q8_K GEMV gives each output its row's dot product, in any group of rows",
          "[decode][quant]") {
  // (the dot product against its documented order: tests/test_unpack_kernels.cpp)
  ag::Generator gen(14);
  const quant::BlockLayout& l = quant::layout(quant::BlockFormat::q4_k);
  for (const int64_t in : {256, 2048}) {
    for (const int64_t out : {1, 3, 4, 5, 9}) {
      const int64_t rows = 3, row_bytes = quant::row_bytes(l, in);
      std::vector<float> x(static_cast<size_t>(rows * in)), wide(static_cast<size_t>(in));
      for (auto& v : x) v = static_cast<float>(gen.normal());
      std::vector<uint8_t> w(static_cast<size_t>(out * row_bytes));
      for (int64_t o = 0; o < out; ++o) {
        for (auto& v : wide) v = static_cast<float>(gen.normal());
        quant::quantize_row(l, wide.data(), in, w.data() + o * row_bytes);
      }
      std::vector<quant::Q8KRow> q8(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r)
        quant::round_to_q8_k(x.data() + r * in, in, q8[static_cast<size_t>(r)]);
      nn::inference::Weights W;
      W.q4_k_q8 = w.data();
      auto dot = [&](int64_t r, int64_t o) {
        float s;
        quant::dot_q4_k_q8_rows(q8[static_cast<size_t>(r)], w.data() + o * row_bytes, row_bytes, in,
                                1, 0, &s);
        return s;
      };
      check_linear(x, rows, in, W, out, gen, dot);
    }
  }
}
