// The fast unpacking kernels (autograd/quant/unpack_kernels.h) against the format table's
// reference dequantization (ggml's arithmetic, block_formats.h), bit for bit: random blocks
// (every byte random, so d and dmin are any half: subnormals, infinities, NaNs), every one of
// the 65,536 halves as d and as dmin, the extreme 6-bit scales and minimums; to float32 and
// to bfloat16 (the reference's floats rounded as ag::bfloat16 rounds them). Each kernel
// this CPU can run is checked; the AVX2 and AVX-512 ones are skipped, saying so, where the
// CPU lacks them.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "autograd/bfloat16.h"
#include "autograd/generator.h"
#include "autograd/quant/block_formats.h"
#include "autograd/quant/unpack_kernels.h"

namespace quant = ag::quant;
using quant::BlockFormat;
using quant::UnpackKernel;

namespace {

std::vector<uint8_t> random_bytes(size_t n, ag::Generator& gen) {
  std::vector<uint8_t> b(n);
  for (auto& byte : b) byte = static_cast<uint8_t>(gen.next_u64());
  return b;
}

std::vector<UnpackKernel> kernels() {
  std::vector<UnpackKernel> k{UnpackKernel::reference};
  for (UnpackKernel fast : {UnpackKernel::avx2, UnpackKernel::avx512}) {
    if (quant::can_run(fast))
      k.push_back(fast);
    else
      WARN("this CPU cannot run the " << (fast == UnpackKernel::avx2 ? "AVX2" : "AVX-512")
                                      << " kernel: it is not checked");
  }
  return k;
}

// Unpacks `blocks` of format f with kernel k to float32 and to bfloat16, and compares the
// bits with the table's dequantize_row (and its floats rounded): the first difference fails.
void check_blocks(BlockFormat f, const std::vector<uint8_t>& blocks, UnpackKernel k) {
  const quant::BlockLayout& l = quant::layout(f);
  const int64_t n = static_cast<int64_t>(blocks.size()) / l.bytes * l.elements;
  std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
  std::vector<ag::bfloat16> got16(static_cast<size_t>(n));
  quant::dequantize_row(l, blocks.data(), n, want.data());
  if (f == BlockFormat::q4_k) {
    quant::unpack_q4_k(blocks.data(), n, got.data(), k);
    quant::unpack_q4_k(blocks.data(), n, got16.data(), k);
  } else {
    quant::unpack_q8_0(blocks.data(), n, got.data(), k);
    quant::unpack_q8_0(blocks.data(), n, got16.data(), k);
  }
  for (int64_t i = 0; i < n; ++i) {
    uint32_t a, b;
    std::memcpy(&a, &want[i], 4);
    std::memcpy(&b, &got[i], 4);
    const uint16_t want16 = ag::bfloat16(want[i]).bits;
    if (a != b || want16 != got16[i].bits) {
      INFO(l.ggml << " kernel " << static_cast<int>(k) << " weight " << i << " of block "
                  << i / l.elements << ": float bits " << std::hex << b << " want " << a
                  << ", bfloat16 " << got16[i].bits << " want " << want16);
      REQUIRE(false);
    }
  }
}

// `count` random blocks of f, each with the half `bits` at byte `at` (every half in turn).
std::vector<uint8_t> blocks_with_every_half(BlockFormat f, size_t at, ag::Generator& gen) {
  const auto bytes = static_cast<size_t>(quant::layout(f).bytes);
  std::vector<uint8_t> b = random_bytes(65536 * bytes, gen);
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    std::memcpy(b.data() + h * bytes + at, &bits, 2);
  }
  return b;
}

}  // namespace

TEST_CASE("Q4_K unpacking kernels give the reference's bits for random blocks", "[quant][unpack]") {
  ag::Generator gen(42);
  const std::vector<uint8_t> blocks = random_bytes(2000 * 144, gen);
  for (UnpackKernel k : kernels()) check_blocks(BlockFormat::q4_k, blocks, k);
}

TEST_CASE("Q4_K unpacking kernels give the reference's bits for every half d and dmin",
          "[quant][unpack]") {
  ag::Generator gen(7);
  for (size_t at : {size_t{0}, size_t{2}}) {  // d, dmin
    const std::vector<uint8_t> blocks = blocks_with_every_half(BlockFormat::q4_k, at, gen);
    for (UnpackKernel k : kernels()) check_blocks(BlockFormat::q4_k, blocks, k);
  }
}

TEST_CASE("Q4_K unpacking kernels give the reference's bits at the extreme scales and mins",
          "[quant][unpack]") {
  ag::Generator gen(3);
  // the 12 scale bytes all ones (every sc and m 63), all zeros, and each alone set
  std::vector<uint8_t> blocks;
  for (int pattern = 0; pattern < 2 + 12 * 8; ++pattern) {
    std::vector<uint8_t> b = random_bytes(144, gen);
    const uint16_t d = 0x7bff, dmin = pattern % 2 ? 0x0001 : 0xfbff;  // largest, tiny, -largest
    std::memcpy(b.data(), &d, 2);
    std::memcpy(b.data() + 2, &dmin, 2);
    for (int i = 0; i < 12; ++i)
      b[4 + i] = pattern == 0   ? 0xff
                 : pattern == 1 ? 0
                                : (i == (pattern - 2) / 8 ? 1 << (pattern - 2) % 8 : 0);
    for (int i = 16; i < 144; ++i) b[i] = pattern % 3 ? 0xff : b[i];  // levels 15 too
    blocks.insert(blocks.end(), b.begin(), b.end());
  }
  for (UnpackKernel k : kernels()) check_blocks(BlockFormat::q4_k, blocks, k);
}

TEST_CASE("Q8_0 unpacking kernels give the reference's bits for random blocks and every d",
          "[quant][unpack]") {
  ag::Generator gen(11);
  const std::vector<uint8_t> random = random_bytes(5000 * 34, gen);
  const std::vector<uint8_t> every_d = blocks_with_every_half(BlockFormat::q8_0, 0, gen);
  for (UnpackKernel k : kernels()) {
    check_blocks(BlockFormat::q8_0, random, k);
    check_blocks(BlockFormat::q8_0, every_d, k);
  }
}

namespace {

// x . w as the float32 GEMV of dot_q4_k's documented order over the reference's floats:
// lane i of low takes weights 32 k + i, of high 32 k + 16 + i, one fused multiply-add
// each, sub-block k after k; then low[i] + high[i] added from i = 0.
float documented_order(const float* x, const float* w, int64_t n) {
  float low[16] = {}, high[16] = {};
  for (int64_t k = 0; k < n / 32; ++k)
    for (int i = 0; i < 16; ++i) {
      low[i] = std::fma(w[32 * k + i], x[32 * k + i], low[i]);
      high[i] = std::fma(w[32 * k + 16 + i], x[32 * k + 16 + i], high[i]);
    }
  float s = 0;
  for (int i = 0; i < 16; ++i) s += low[i] + high[i];
  return s;
}

}  // namespace

TEST_CASE("the Q4_K dot product is the float32 GEMV over the dequantized weights, bit for bit",
          "[quant][unpack]") {
  ag::Generator gen(5);
  const quant::BlockLayout& l = quant::layout(BlockFormat::q4_k);
  constexpr int64_t n = 2048;  // 8 blocks a row
  std::vector<float> x(n), w(n), wide(n);
  for (auto& v : wide) v = static_cast<float>(gen.normal());
  int64_t differ_in_plain_order = 0;
  for (int row = 0; row < 200; ++row) {
    for (auto& v : x) v = static_cast<float>(gen.normal());
    // quantized weights (finite, as a model's), every fourth row of random bytes instead
    std::vector<uint8_t> blocks(static_cast<size_t>(quant::row_bytes(l, n)));
    if (row % 4 == 3)
      blocks = random_bytes(blocks.size(), gen);
    else
      quant::quantize_row(l, wide.data(), n, blocks.data());
    for (auto& v : wide) v = static_cast<float>(gen.normal());
    quant::dequantize_row(l, blocks.data(), n, w.data());
    const float want = documented_order(x.data(), w.data(), n);
    for (UnpackKernel k : kernels()) {
      const float got = quant::dot_q4_k(x.data(), blocks.data(), n, k);
      INFO("row " << row << " kernel " << static_cast<int>(k) << ": " << got << " want " << want);
      if (std::isnan(want))  // (a NaN's payload follows the operands' order in the instruction)
        REQUIRE(std::isnan(got));
      else
        REQUIRE(std::memcmp(&got, &want, 4) == 0);
    }
    float plain = 0;
    for (int64_t i = 0; i < n; ++i) plain += w[i] * x[i];
    differ_in_plain_order += plain != want;
  }
  // the comparison sees the order: a plain left-to-right sum differs in most rows
  CHECK(differ_in_plain_order > 100);
}

TEST_CASE("Q4_K rows taken side by side give each row its own dot product's bits",
          "[quant][unpack]") {
  ag::Generator gen(9);
  const quant::BlockLayout& l = quant::layout(BlockFormat::q4_k);
  for (int64_t n : {256, 2048, 8192}) {
    const int64_t row_bytes = quant::row_bytes(l, n);
    std::vector<float> x(static_cast<size_t>(n)), wide(static_cast<size_t>(n));
    for (auto& v : x) v = static_cast<float>(gen.normal());
    // four rows: quantized weights, and a row of random bytes among them
    std::vector<uint8_t> blocks(static_cast<size_t>(4 * row_bytes));
    for (int j = 0; j < 4; ++j) {
      for (auto& v : wide) v = static_cast<float>(gen.normal()) * (j + 1);
      quant::quantize_row(l, wide.data(), n, blocks.data() + j * row_bytes);
    }
    const std::vector<uint8_t> noise = random_bytes(static_cast<size_t>(row_bytes), gen);
    std::copy(noise.begin(), noise.end(), blocks.begin() + 2 * row_bytes);
    for (UnpackKernel k : kernels())
      for (int rows = 1; rows <= 4; ++rows)
        for (int64_t ahead : {int64_t{0}, 4 * row_bytes, int64_t{2304}}) {
          float s[4] = {-1, -1, -1, -1};
          quant::dot_q4_k_rows(x.data(), blocks.data(), row_bytes, n, rows, ahead, s, k);
          for (int j = 0; j < 4; ++j) {
            INFO("n " << n << " kernel " << static_cast<int>(k) << " rows " << rows << " row "
                      << j);
            if (j >= rows) {
              CHECK(s[j] == -1);  // nothing past the rows asked for
              continue;
            }
            const float want = quant::dot_q4_k(x.data(), blocks.data() + j * row_bytes, n, k);
            if (std::isnan(want))
              CHECK(std::isnan(s[j]));
            else
              CHECK(std::memcmp(&s[j], &want, 4) == 0);
          }
        }
  }
}
