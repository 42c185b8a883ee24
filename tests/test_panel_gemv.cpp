// The decoder's GEMV over input-major panels (nn/panel_gemv.h) against its documented
// order, computed here output by output in scalar code from W's rows: bit for bit, for row
// counts that take every group (blocks of 8 to 12, then 1 to 7 rows in one pass), outputs that fill
// no whole panel, shares that start inside a panel (a thread's heads), with and without bias and
// accumulation.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "autograd/autograd.h"
#include "nn/inference_kernels.h"
#include "nn/panel_gemv.h"

namespace {

// y[r][o] (+)= (fma chain of W[o][i] x[r][i] over i from +0) + bias[o], as documented.
void documented(const std::vector<float>& x, int64_t rows, int64_t in, const std::vector<float>& w,
                const float* bias, int64_t first, int64_t out, std::vector<float>& y,
                bool accumulate) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      float acc = 0;
      for (int64_t i = 0; i < in; ++i)
        acc = std::fma(w[static_cast<size_t>((first + o) * in + i)],
                       x[static_cast<size_t>(r * in + i)], acc);
      const float s = acc + (bias ? bias[o] : 0.0f);
      float& to = y[static_cast<size_t>(r * out + o)];
      to = accumulate ? to + s : s;
    }
}

std::vector<float> randoms(int64_t n, ag::Generator& gen) {
  const ag::Tensor t = ag::randn({n}, gen);
  return std::vector<float>(t.const_data<float>(), t.const_data<float>() + n);
}

}  // namespace

TEST_CASE("panels hold W's columns a panel of 16 at a time, input after input, zero-padded",
          "[decode]") {
  const int64_t out = 19, in = 3;
  std::vector<float> w(static_cast<size_t>(out * in));
  for (size_t k = 0; k < w.size(); ++k) w[k] = static_cast<float>(k + 1);
  REQUIRE(nn::inference::panel_floats(out, in) == 32 * in);
  std::vector<float> panels(static_cast<size_t>(nn::inference::panel_floats(out, in)), -1.0f);
  nn::inference::pack_panels(w.data(), out, in, panels.data());
  CHECK(panels[0] == w[0]);              // panel 0, input 0, lane 0: W[0][0]
  CHECK(panels[1] == w[in]);             // lane 1: W[1][0]
  CHECK(panels[16] == w[1]);             // input 1, lane 0: W[0][1]
  CHECK(panels[16 * in] == w[16 * in]);  // panel 1, input 0, lane 0: W[16][0]
  CHECK(panels[16 * in + 3] == 0.0f);    // W[19] does not exist: padding
  CHECK(panels.back() == 0.0f);
}

TEST_CASE("the panel GEMV sums each output as one chain of fused multiply-adds", "[decode]") {
  ag::Generator gen(17);
  for (const int64_t in : {1, 7, 128}) {
    const int64_t total = 70, most = 30;  // up to three blocks of 8-12 rows
    const std::vector<float> w = randoms(total * in, gen), x = randoms(most * in, gen),
                             bias = randoms(total, gen);
    std::vector<float> panels(static_cast<size_t>(nn::inference::panel_floats(total, in)));
    nn::inference::pack_panels(w.data(), total, in, panels.data());
    // a whole matrix, a share that starts inside a panel, one that starts on a panel's start
    // and ends inside one, a single output, an empty share (a thread's: nothing written)
    for (const auto& [first, out] :
         {std::pair<int64_t, int64_t>{0, total}, {5, 37}, {16, 21}, {69, 1}, {37, 0}})
      for (int64_t rows = 1; rows <= most; ++rows)
        for (const bool with_bias : {false, true})
          for (const bool accumulate : {false, true}) {
            INFO("in " << in << ", outputs " << first << ".." << first + out << ", rows " << rows
                       << ", bias " << with_bias << ", accumulate " << accumulate);
            const float* b = with_bias ? bias.data() + first : nullptr;
            std::vector<float> want(static_cast<size_t>(rows * out), 0.25f), got = want;
            documented(x, rows, in, w, b, first, out, want, accumulate);
            nn::inference::panel_linear(x.data(), rows, in, panels.data(), first, b, out,
                                        got.data(), out, accumulate);
            CHECK(got == want);
          }
  }
}

TEST_CASE("the decoder's linear reads the panels where W has them, over its share's outputs",
          "[decode]") {
  ag::Generator gen(18);
  const int64_t out = 40, in = 32, rows = 9;
  const std::vector<float> w = randoms(out * in, gen), x = randoms(rows * in, gen);
  std::vector<float> panels(static_cast<size_t>(nn::inference::panel_floats(out, in)));
  nn::inference::pack_panels(w.data(), out, in, panels.data());
  nn::inference::Weights weights;
  weights.f32 = w.data(), weights.panels = panels.data();
  // a thread's share of outputs 10..40, through Weights::rows_from as the layers take it
  const int64_t from = 10;
  std::vector<float> want(static_cast<size_t>(rows * out), 0.0f), got = want;
  for (int64_t r = 0; r < rows; ++r) {  // one row at a time, the whole matrix
    std::vector<float> one(static_cast<size_t>(out));
    nn::inference::linear(x.data() + r * in, 1, in, weights, nullptr, out, out, one.data(), out,
                          false);
    std::copy(one.begin() + from, one.end(), want.begin() + r * out + from);
  }
  nn::inference::linear(x.data(), rows, in, weights.rows_from(from, in), nullptr, out - from, out,
                        got.data() + from, out, false, /*vector_rows=*/rows);
  CHECK(got == want);
  std::vector<float> documented_rows(static_cast<size_t>(rows * (out - from)));
  documented(x, rows, in, w, nullptr, from, out - from, documented_rows, false);
  for (int64_t r = 0; r < rows; ++r)
    CHECK(std::equal(documented_rows.begin() + r * (out - from),
                     documented_rows.begin() + (r + 1) * (out - from),
                     got.begin() + r * out + from));
}
