// ggml's quantised block formats (autograd/quant/block_formats.h): blocks whose bytes are
// written here by hand dequantize to the floats worked out by hand from ggml's layouts
// (negative scales, minimums, the K formats' packed 6-bit scales, the fifth and sixth bits);
// the table agrees with ggml's type ids and block sizes; quantizing what a block can hold
// exactly gives it back exactly, and anything else within a step. (Byte equality with
// llama.cpp's reference quantizers: reference.quant_blocks, against a numpy twin.)
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "autograd/half.h"
#include "autograd/quant/block_formats.h"

namespace quant = ag::quant;
using quant::BlockFormat;

namespace {

std::vector<float> dequantized(BlockFormat f, const std::vector<uint8_t>& block) {
  const quant::BlockLayout& l = quant::layout(f);
  REQUIRE(static_cast<int64_t>(block.size()) == l.bytes);
  std::vector<float> y(static_cast<size_t>(l.elements));
  quant::dequantize_row(l, block.data(), l.elements, y.data());
  return y;
}

std::vector<uint8_t> block_of(BlockFormat f) {
  return std::vector<uint8_t>(static_cast<size_t>(quant::layout(f).bytes), 0);
}

void put_half(std::vector<uint8_t>& b, size_t at, uint16_t bits) {
  std::memcpy(b.data() + at, &bits, 2);
}

}  // namespace

TEST_CASE("the block table holds ggml's type ids and block sizes") {
  struct Row {
    BlockFormat f;
    uint32_t type;
    int64_t elements, bytes;
  };
  for (const Row& r : {Row{BlockFormat::q4_0, 2, 32, 18}, Row{BlockFormat::q4_1, 3, 32, 20},
                       Row{BlockFormat::q5_0, 6, 32, 22}, Row{BlockFormat::q5_1, 7, 32, 24},
                       Row{BlockFormat::q8_0, 8, 32, 34}, Row{BlockFormat::q4_k, 12, 256, 144},
                       Row{BlockFormat::q5_k, 13, 256, 176}, Row{BlockFormat::q6_k, 14, 256, 210},
                       Row{BlockFormat::q8_k, 15, 256, 292}}) {
    const quant::BlockLayout& l = quant::layout(r.f);
    CHECK(l.ggml_type == r.type);
    CHECK(l.elements == r.elements);
    CHECK(l.bytes == r.bytes);
    CHECK(quant::layout_of_ggml_type(r.type) == &l);
    CHECK(quant::layout_named(l.name) == &l);
  }
  CHECK(quant::layout_of_ggml_type(10) == nullptr);             // Q2_K: not read
  CHECK(quant::layout(BlockFormat::q8_k).quantize == nullptr);  // never in a model file
}

TEST_CASE("hand-made Q8_0, Q4_0 and Q5_0 blocks dequantize to their scale times their levels") {
  auto q8 = block_of(BlockFormat::q8_0);
  put_half(q8, 0, 0x3800);                             // d = 0.5
  q8[2] = 1, q8[3] = 0xfe, q8[4] = 127, q8[5] = 0x80;  // 1, -2, 127, -128
  const auto y8 = dequantized(BlockFormat::q8_0, q8);
  CHECK(y8[0] == 0.5f);
  CHECK(y8[1] == -1.0f);
  CHECK(y8[2] == 63.5f);
  CHECK(y8[3] == -64.0f);
  CHECK(y8[31] == 0.0f);

  auto q4 = block_of(BlockFormat::q4_0);
  put_half(q4, 0, 0xc000);  // d = -2: a negative scale
  q4[2] = 0x3a;             // element 0: 10, element 16: 3 (levels are stored + 8)
  const auto y4 = dequantized(BlockFormat::q4_0, q4);
  CHECK(y4[0] == -4.0f);   // (10 - 8) * -2
  CHECK(y4[16] == 10.0f);  // (3 - 8) * -2
  CHECK(y4[1] == 16.0f);   // (0 - 8) * -2

  auto q5 = block_of(BlockFormat::q5_0);
  put_half(q5, 0, 0x3c00);     // d = 1
  q5[2] = 0x01, q5[4] = 0x02;  // fifth bits of elements 0 and 17
  q5[7] = 0x5f;                // element 1: 15, element 17: 5
  const auto y5 = dequantized(BlockFormat::q5_0, q5);
  CHECK(y5[0] == 0.0f);     // (0 | 16) - 16
  CHECK(y5[16] == -16.0f);  // 0 - 16
  CHECK(y5[1] == -1.0f);    // 15 - 16
  CHECK(y5[17] == 5.0f);    // (5 | 16) - 16
}

TEST_CASE("hand-made Q4_1 and Q5_1 blocks add their minimum") {
  auto q4 = block_of(BlockFormat::q4_1);
  put_half(q4, 0, 0x3400);  // d = 0.25
  put_half(q4, 2, 0xbe00);  // m = -1.5
  q4[5] = 0xf0;             // element 1: 0, element 17: 15
  const auto y4 = dequantized(BlockFormat::q4_1, q4);
  CHECK(y4[1] == -1.5f);
  CHECK(y4[17] == 2.25f);  // 15 * 0.25 - 1.5

  auto q5 = block_of(BlockFormat::q5_1);
  put_half(q5, 0, 0x3800);  // d = 0.5
  put_half(q5, 2, 0x3c00);  // m = 1
  q5[7] = 0x80;             // qh bit 31: element 31's fifth bit
  q5[8 + 15] = 0xf7;        // element 15: 7, element 31: 15
  const auto y5 = dequantized(BlockFormat::q5_1, q5);
  CHECK(y5[15] == 4.5f);   // 7 * 0.5 + 1
  CHECK(y5[31] == 16.5f);  // (15 | 16) * 0.5 + 1
  CHECK(y5[0] == 1.0f);
}

TEST_CASE("hand-made Q4_K and Q5_K blocks unpack their 6-bit scales and mins") {
  auto q4 = block_of(BlockFormat::q4_k);
  put_half(q4, 0, 0x3c00);  // d = 1
  put_half(q4, 2, 0x3800);  // dmin = 0.5
  uint8_t* s = q4.data() + 4;
  s[0] = 3, s[4] = 2;  // sub-block 0: scale 3, min 2 (low 6 bits of bytes 0 and 4)
  // sub-block 5: low nibbles in byte 9 (scale 1, min 2), top 2 bits in bytes 1 (scale: 3)
  // and 5 (min: 1): scale 1 | 3 << 4 = 49, min 2 | 1 << 4 = 18
  s[9] = 0x21, s[1] = 0xc0, s[5] = 0x40;
  q4[16] = 0x05;       // element 0: level 5 (low nibble of the first byte)
  q4[16 + 64] = 0x70;  // element 160: high nibble of byte 64 (the third 64, second 32)
  const auto y4 = dequantized(BlockFormat::q4_k, q4);
  CHECK(y4[0] == 14.0f);     // 1 * 3 * 5 - 0.5 * 2
  CHECK(y4[1] == -1.0f);     // level 0: - 0.5 * 2
  CHECK(y4[160] == 334.0f);  // 1 * 49 * 7 - 0.5 * 18
  CHECK(y4[32] == 0.0f);     // sub-block 1: scale 0 (byte 1's low bits), min 0

  auto q5 = block_of(BlockFormat::q5_k);
  put_half(q5, 0, 0x4000);       // d = 2
  put_half(q5, 2, 0x3c00);       // dmin = 1
  q5[4 + 1] = 5, q5[4 + 5] = 3;  // sub-block 1: scale 5, min 3
  q5[48 + 1] = 0x90;             // element 33: high nibble of byte 1 of the levels: 9
  q5[16 + 1] = 0x02;             // its fifth bit: bit 33 / 32 = 1 of qh[33 % 32]
  const auto y5 = dequantized(BlockFormat::q5_k, q5);
  CHECK(y5[33] == 247.0f);  // 2 * 5 * (9 + 16) - 1 * 3
  CHECK(y5[32] == -3.0f);   // level 0
}

TEST_CASE("hand-made Q6_K and Q8_K blocks dequantize with signed 8-bit scales") {
  auto q6 = block_of(BlockFormat::q6_k);
  put_half(q6, 208, 0x3400);  // d = 0.25
  q6[192 + 12] = 0xfd;        // sub-block 12 (elements 192..207): scale -3
  // element 200 (second half, r = 72): low nibble in the high half of ql[64 + 8], top bits
  // at bits 4-5 of qh[32 + 8]: 10 | 2 << 4 = 42, less 32: 10
  q6[72] = 0xa0, q6[128 + 40] = 0x20;
  const auto y6 = dequantized(BlockFormat::q6_k, q6);
  CHECK(y6[200] == -7.5f);  // 0.25 * -3 * 10
  CHECK(y6[201] == 24.0f);  // level 0: 0.25 * -3 * -32

  auto q8 = block_of(BlockFormat::q8_k);
  const float d = 0.125f;
  std::memcpy(q8.data(), &d, 4);  // a float32 scale
  q8[4 + 255] = 0xf9;             // -7
  CHECK(dequantized(BlockFormat::q8_k, q8)[255] == -0.875f);
}

TEST_CASE("quantizing what a block holds exactly gives it back; other weights within a step") {
  std::vector<float> grid(256);
  for (size_t i = 0; i < grid.size(); ++i)
    grid[i] = static_cast<float>(static_cast<int>(i % 16) - 8);
  grid[5] = -8;  // the greatest magnitude, negative: Q4_0's d = -8 / -8 = 1
  for (BlockFormat f : {BlockFormat::q4_0, BlockFormat::q8_0, BlockFormat::q5_0}) {
    const quant::BlockLayout& l = quant::layout(f);
    std::vector<uint8_t> blocks(static_cast<size_t>(quant::row_bytes(l, 256)));
    std::vector<float> back(256);
    std::vector<float> x = grid;
    if (f == BlockFormat::q8_0)
      for (float& v : x) v *= 127.0f / 8.0f;  // levels of d = 1 (amax 127)
    if (f == BlockFormat::q5_0)
      for (float& v : x) v *= 2.0f;  // levels -16..14 of d = 1
    quant::quantize_row(l, x.data(), 256, blocks.data());
    quant::dequantize_row(l, blocks.data(), 256, back.data());
    INFO(l.ggml);
    for (size_t i = 0; i < 256; ++i) CHECK(back[i] == std::round(x[i]));
  }
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.37f) * 0.05f;
  for (const auto& l : quant::block_formats()) {
    if (!l.quantize) continue;
    std::vector<uint8_t> blocks(static_cast<size_t>(quant::row_bytes(l, 256)));
    std::vector<float> back(256);
    quant::quantize_row(l, x.data(), 256, blocks.data());
    quant::dequantize_row(l, blocks.data(), 256, back.data());
    // a 4-bit format's step on weights of magnitude up to 0.05 (Q4_0's levels reach 7/8 of
    // the largest on the other side: the clipped end is a whole step, amax / 8, off)
    float worst = 0;
    for (size_t i = 0; i < 256; ++i) worst = std::max(worst, std::fabs(back[i] - x[i]));
    INFO(l.ggml << ": worst error " << worst);
    CHECK(worst <= 0.05f / 8 * 1.01f);
  }
}

TEST_CASE("a block of zeros stays zeros in every format") {
  const std::vector<float> zeros(256, 0.0f);
  for (const auto& l : quant::block_formats()) {
    if (!l.quantize) continue;
    std::vector<uint8_t> blocks(static_cast<size_t>(quant::row_bytes(l, 256)));
    std::vector<float> back(256, 1.0f);
    quant::quantize_row(l, zeros.data(), 256, blocks.data());
    quant::dequantize_row(l, blocks.data(), 256, back.data());
    INFO(l.ggml);
    for (float v : back) CHECK(v == 0.0f);
  }
}
