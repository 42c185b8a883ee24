// The fast unpacking kernels (autograd/quant/unpack_kernels.h) against the format table's
// reference dequantization (ggml's arithmetic, block_formats.h), bit for bit: random blocks
// (every byte random, so d and dmin are any half: subnormals, infinities, NaNs), every one of
// the 65,536 halves as d and as dmin, the extreme 6-bit scales and minimums; to float32 and
// to bfloat16 (the reference's floats rounded as ag::bfloat16 rounds them). Each kernel
// this CPU can run is checked; the AVX2 and AVX-512 ones are skipped, saying so, where the
// CPU lacks them.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/bfloat16.h"
#include "autograd/generator.h"
#include "autograd/half.h"
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

namespace {

// x rounded to Q8_K as unpack_kernels.h documents, computed here in double where it can be:
// per 256 values the scale m / 127 and levels x (127 / m) rounded to nearest even.
quant::Q8KRow documented_q8_k(const std::vector<float>& x) {
  quant::Q8KRow r;
  const size_t blocks = x.size() / 256;
  r.levels.assign(x.size(), 0);
  r.sub_sums.assign(8 * blocks, 0);
  r.scales.assign(blocks, 0.0f);
  for (size_t b = 0; b < blocks; ++b) {
    float m = 0;
    bool finite = true;
    for (size_t i = 0; i < 256; ++i) {
      finite = finite && std::isfinite(x[256 * b + i]);
      m = std::max(m, std::fabs(x[256 * b + i]));
    }
    r.scales[b] = finite ? m / 127.0f : std::numeric_limits<float>::quiet_NaN();
    if (!finite || m == 0.0f) continue;
    for (size_t i = 0; i < 256; ++i) {
      const auto p = static_cast<int8_t>(std::nearbyint(x[256 * b + i] * (127.0f / m)));
      r.levels[256 * b + i] = p;
      r.sub_sums[8 * b + i / 32] += p;
    }
  }
  return r;
}

// Q4_K's sub-block j's 6-bit scale and min from the block's 12 scale bytes q, as ggml's
// block_q4_K documents them (written here again, apart from the library's).
void scale_and_min(const uint8_t* q, int j, int& sc, int& m) {
  sc = j < 4 ? q[j] & 63 : (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
  m = j < 4 ? q[j + 4] & 63 : (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
}

// x . one row of Q4_K blocks by x's Q8_K levels in the documented order (8 lanes).
float documented_q4_k_q8(const quant::Q8KRow& x, const uint8_t* row, int64_t n) {
  float lo[8] = {}, hi[8] = {};
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* block = row + 144 * b;
    uint16_t d, dmin;
    std::memcpy(&d, block, 2);
    std::memcpy(&dmin, block + 2, 2);
    const float dx = x.scales[b];
    for (int l = 0; l < 8; ++l) {
      int64_t isum = 0;
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        scale_and_min(block + 4, j, sc, m);
        for (int i = 4 * l; i < 4 * l + 4; ++i) {
          const uint8_t byte = block[16 + 32 * (j / 2) + i];
          isum += sc * (j % 2 ? byte >> 4 : byte & 15) * x.levels[256 * b + 32 * j + i];
        }
      }
      int sc, m;
      scale_and_min(block + 4, l, sc, m);
      const int64_t msum = m * x.sub_sums[8 * b + l];
      lo[l] = std::fma(static_cast<float>(isum), ag::half_to_float(d) * dx, lo[l]);
      hi[l] = std::fma(static_cast<float>(-msum), ag::half_to_float(dmin) * dx, hi[l]);
    }
  }
  float s = 0;
  for (int l = 0; l < 8; ++l) s += lo[l] + hi[l];
  return s;
}

// round_to_q8_k by kernel k gives `want` (documented_q8_k's) for x.
void check_q8_k(const std::vector<float>& x, const quant::Q8KRow& want, UnpackKernel k) {
  quant::Q8KRow got;
  quant::round_to_q8_k(x.data(), static_cast<int64_t>(x.size()), got, k);
  CHECK(got.levels == want.levels);
  CHECK(got.sub_sums == want.sub_sums);
  REQUIRE(got.scales.size() == want.scales.size());
  for (size_t b = 0; b < want.scales.size(); ++b) {
    INFO("block " << b);
    if (std::isnan(want.scales[b]))
      CHECK(std::isnan(got.scales[b]));
    else
      CHECK(got.scales[b] == want.scales[b]);
  }
}

// Four rows of n weights (quantized; the third of random bytes in odd rounds) by x rounded to
// Q8_K: every kernel's dot products, 1, 3 and 4 rows at a time, are the documented order's;
// the first row's sum is within the activations' rounding of the float32 activations' sum
// (counted in checked, and in differently where it is not that sum's bits).
void check_q4_k_q8_row(int64_t n, int round, ag::Generator& gen, int64_t& checked,
                       int64_t& differently) {
  const quant::BlockLayout& l = quant::layout(BlockFormat::q4_k);
  const int64_t row_bytes = quant::row_bytes(l, n);
  std::vector<float> x(static_cast<size_t>(n)), wide(static_cast<size_t>(n));
  for (auto& v : x) v = static_cast<float>(gen.normal());
  if (round == 5) x[static_cast<size_t>(n - 1)] = std::numeric_limits<float>::quiet_NaN();
  std::vector<uint8_t> blocks(static_cast<size_t>(4 * row_bytes));
  for (int j = 0; j < 4; ++j) {
    for (auto& v : wide) v = static_cast<float>(gen.normal());
    quant::quantize_row(l, wide.data(), n, blocks.data() + j * row_bytes);
  }
  if (round % 2) {
    const std::vector<uint8_t> noise = random_bytes(static_cast<size_t>(row_bytes), gen);
    std::copy(noise.begin(), noise.end(), blocks.begin() + 2 * row_bytes);
  }
  quant::Q8KRow q8;
  quant::round_to_q8_k(x.data(), n, q8);
  for (UnpackKernel k : kernels())
    for (int rows : {1, 3, 4}) {
      float s[4] = {-1, -1, -1, -1};
      quant::dot_q4_k_q8_rows(q8, blocks.data(), row_bytes, n, rows, 4 * row_bytes, s, k);
      for (int j = 0; j < 4; ++j) {
        INFO("n " << n << " round " << round << " kernel " << static_cast<int>(k) << " rows "
                  << rows << " weight row " << j);
        if (j >= rows) {
          CHECK(s[j] == -1);
          continue;
        }
        const float want = documented_q4_k_q8(q8, blocks.data() + j * row_bytes, n);
        if (std::isnan(want))
          REQUIRE(std::isnan(s[j]));
        else
          REQUIRE(std::memcmp(&s[j], &want, 4) == 0);
      }
    }
  float s;
  quant::dot_q4_k_q8_rows(q8, blocks.data(), row_bytes, n, 1, 0, &s);
  if (round == 5) {
    CHECK(std::isnan(s));  // a NaN in x: never a finite sum
    return;
  }
  const float exact = quant::dot_q4_k(x.data(), blocks.data(), n);
  std::vector<float> w(static_cast<size_t>(n));
  quant::dequantize_row(l, blocks.data(), n, w.data());
  double bound = 0;  // half a level of each x, and the float sums' own rounding
  for (int64_t b = 0; b < n / 256; ++b) {
    double m = 0;
    for (int i = 0; i < 256; ++i) m = std::max(m, std::fabs(double{x[256 * b + i]}));
    for (int i = 0; i < 256; ++i)
      bound += std::fabs(double{w[256 * b + i]}) * (m / 254 + 1e-5 * std::fabs(x[256 * b + i]));
  }
  CHECK(std::fabs(double{s} - exact) <= bound);
  differently += std::memcmp(&s, &exact, 4) != 0;
  ++checked;
}

}  // namespace

TEST_CASE("x rounds to Q8_K as documented: scales, levels and sub-block sums", "[quant][unpack]") {
  ag::Generator gen(13);
  std::vector<float> x(6 * 256);
  for (auto& v : x) v = static_cast<float>(gen.normal());
  x[256 + 7] = std::numeric_limits<float>::infinity();   // block 1: infinite
  x[512 + 3] = std::numeric_limits<float>::quiet_NaN();  // block 2: a NaN
  for (int i = 0; i < 256; ++i) x[768 + i] = 0.0f;       // block 3: zeros
  for (int i = 0; i < 256; ++i) x[1024 + i] = 1e-30f * static_cast<float>(i % 7);  // tiny
  const quant::Q8KRow want = documented_q8_k(x);
  CHECK(std::isnan(want.scales[1]));
  CHECK(std::isnan(want.scales[2]));
  CHECK(want.scales[3] == 0.0f);
  int largest = 0;
  for (int i = 0; i < 256; ++i) largest = std::max(largest, std::abs(int{want.levels[i]}));
  CHECK(largest == 127);  // the largest |x| takes the top level
  for (UnpackKernel k : kernels()) {
    INFO("kernel " << static_cast<int>(k));
    check_q8_k(x, want, k);
  }
}

TEST_CASE("the Q4_K-by-Q8_K dot product is its documented integer order, bit for bit",
          "[quant][unpack]") {
  ag::Generator gen(17);
  int64_t checked = 0, rounded_differently = 0;
  for (const int64_t n : {256, 2048, 8192})
    for (int round = 0; round < 24; ++round)
      check_q4_k_q8_row(n, round, gen, checked, rounded_differently);
  CHECK(rounded_differently > checked * 3 / 4);
}
