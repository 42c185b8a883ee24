// Forward values against results worked out by hand, and the behaviour of each op at its
// edges (fully masked rows, ignored targets, dropout's p = 0 and p = 1).
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/autograd.h"
#include "support.h"

using ag::DType;
using ag::Tensor;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

using ag_test::require_values;

TEST_CASE("elementwise ops broadcast a row across a matrix", "[values]") {
  Tensor m = ag::tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, DType::Float64);
  Tensor r = ag::tensor({10.0, 20.0, 30.0}, DType::Float64);
  require_values(m + r, {11, 22, 33, 14, 25, 36}, 0);
  require_values(r - m, {9, 18, 27, 6, 15, 24}, 0);
  require_values(m * r, {10, 40, 90, 40, 100, 180}, 0);
  require_values(m / r.reshape({3}).unsqueeze(0), {0.1, 0.1, 0.1, 0.4, 0.25, 0.2}, 1e-15);
  Tensor col = ag::from_vector({1.0, 2.0}, {2, 1}, DType::Float64);
  require_values(ag::pow(m, col), {1, 2, 3, 16, 25, 36}, 1e-12);
}

TEST_CASE("unary ops match their closed forms", "[values]") {
  Tensor x = ag::tensor({-2.0, -0.5, 0.0, 0.5, 2.0}, DType::Float64);
  require_values(ag::relu(x), {0, 0, 0, 0.5, 2}, 0);
  require_values(ag::tanh(x), {std::tanh(-2.0), std::tanh(-0.5), 0, std::tanh(0.5), std::tanh(2.0)},
                 1e-15);
  // GELU, tanh approximation; reference values from the formula with sqrt(2/pi)
  require_values(ag::gelu(x), {-0.04540230, -0.15428599, 0.0, 0.34571401, 1.95459769}, 1e-7);
  require_values(ag::exp(ag::log(ag::tensor({0.25, 4.0}, DType::Float64))), {0.25, 4.0}, 1e-15);
  require_values(ag::sqrt(ag::tensor({4.0, 2.25}, DType::Float64)), {2, 1.5}, 0);
  require_values(-x, {2, 0.5, 0, -0.5, -2}, 0);
}

TEST_CASE("sum and mean and max reduce the named dims", "[values][reduce]") {
  Tensor a = ag::arange(24, DType::Float64).reshape({2, 3, 4});
  REQUIRE(ag::sum(a).item() == 276);
  require_values(ag::sum(a, {0, 2}), {60, 92, 124}, 0);
  REQUIRE(ag::sum(a, {1}, true).shape() == ag::Shape{2, 1, 4});
  require_values(ag::mean(a, {-1}), {1.5, 5.5, 9.5, 13.5, 17.5, 21.5}, 1e-15);
  require_values(ag::max(a, 1), {8, 9, 10, 11, 20, 21, 22, 23}, 0);
  REQUIRE(ag::max(a).item() == 23);
  Tensor t = ag::tensor({{1.0, 7.0, 7.0}, {-3.0, -1.0, -2.0}});
  REQUIRE(ag::argmax(t, 1).to_vector() == std::vector<double>{1, 1});  // first of a tie
}

TEST_CASE("max sends the gradient to the first maximum only", "[values][reduce]") {
  Tensor t = ag::tensor({3.0, 7.0, 7.0, 1.0}, DType::Float64).requires_grad_();
  ag::max(t, 0).backward();
  REQUIRE(t.grad().to_vector() == std::vector<double>{0, 1, 0, 0});
}

TEST_CASE("matmul handles transposed operands without copying them", "[values][matmul]") {
  Tensor a = ag::arange(6, DType::Float64).reshape({2, 3});
  Tensor b = ag::arange(6, DType::Float64).reshape({2, 3});
  require_values(ag::matmul(a, b.t()), {5, 14, 14, 50}, 0);
  require_values(ag::matmul(a.t(), b), {9, 12, 15, 12, 17, 22, 15, 22, 29}, 0);
  Tensor batched = ag::arange(12, DType::Float64).reshape({2, 2, 3});
  require_values(ag::matmul(batched, b.t()), {5, 14, 14, 50, 23, 86, 32, 122}, 0);
  REQUIRE(ag::matmul(ag::ones({2, 0}), ag::ones({0, 3})).to_vector() ==
          std::vector<double>(6, 0.0));
}

TEST_CASE("cat and stack and split are inverse to each other", "[values][join]") {
  Tensor a = ag::arange(6, DType::Float64).reshape({2, 3});
  Tensor c = ag::cat({a, a * 10.0}, 0);
  REQUIRE(c.shape() == ag::Shape{4, 3});
  require_values(c, {0, 1, 2, 3, 4, 5, 0, 10, 20, 30, 40, 50}, 0);
  auto parts = ag::split(c, 2, 0);
  REQUIRE(parts.size() == 2);
  require_values(parts[1], {0, 10, 20, 30, 40, 50}, 0);
  Tensor s = ag::stack({a, a}, 2);
  REQUIRE(s.shape() == ag::Shape{2, 3, 2});
  require_values(s.select(2, 1), a.to_vector(), 0);
}

TEST_CASE("a fully masked softmax row is zeros and not NaN", "[values][softmax]") {
  Tensor s = ag::tensor({{-ag::kInf, -ag::kInf}, {0.0, -ag::kInf}});
  require_values(ag::softmax(s, -1), {0, 0, 1, 0}, 0);
  Tensor ls = ag::log_softmax(s, -1);
  REQUIRE(ls.at({0, 0}) == -ag::kInf);
  REQUIRE(ls.at({1, 0}) == 0.0);
}

TEST_CASE("log_softmax is the log of softmax computed stably", "[values][softmax]") {
  Tensor x = ag::tensor({{1.0, 2.0, 3.0}, {1000.0, 1000.0, 1000.0}}, DType::Float64);
  Tensor ls = ag::log_softmax(x, 1);
  require_values(ag::exp(ls), ag::softmax(x, 1).to_vector(), 1e-14);
  REQUIRE_THAT(ls.at({1, 0}), WithinAbs(-std::log(3.0), 1e-15));
}

TEST_CASE("cross_entropy is the mean negative log-likelihood of the non-ignored targets",
          "[values][softmax]") {
  Tensor logits = ag::zeros({3, 4}, DType::Float64);  // uniform: each loss is ln 4
  Tensor targets = ag::from_vector(std::vector<int64_t>{0, 3, -100}, {3});
  REQUIRE_THAT(ag::cross_entropy(logits, targets).item(), WithinRel(std::log(4.0), 1e-15));
  Tensor l2 = ag::tensor({{2.0, 0.0}}, DType::Float64);
  Tensor t2 = ag::from_vector(std::vector<int64_t>{1}, {1});
  REQUIRE_THAT(ag::cross_entropy(l2, t2).item(), WithinRel(std::log(1 + std::exp(2.0)), 1e-15));
  Tensor all_ignored = ag::from_vector(std::vector<int64_t>{-100, -100, -100}, {3});
  REQUIRE(ag::cross_entropy(logits, all_ignored).item() == 0.0);
}

TEST_CASE("embedding picks rows and scatter-adds repeated ids", "[values][embedding]") {
  Tensor w = ag::arange(6, DType::Float64).reshape({3, 2}).detach().requires_grad_();
  Tensor ids = ag::from_vector(std::vector<int64_t>{2, 0, 2}, {3});
  Tensor e = ag::embedding(w, ids);
  require_values(e, {4, 5, 0, 1, 4, 5}, 0);
  ag::sum(e).backward();
  REQUIRE(w.grad().to_vector() == std::vector<double>{1, 1, 0, 0, 2, 2});
}

// A tied weight (GPT's embedding and head): the embedding's rows are added into the
// gradient the head left, row by row, with the bits of adding its dense V x C gradient.
TEST_CASE("a tied embedding's gradient adds its rows into the head's, as the dense gradient would",
          "[values][embedding]") {
  ag::Generator gen(11);
  const Tensor w0 = ag::randn({10, 16}, gen), G = ag::randn({12, 10}, gen);
  const Tensor ids =
      ag::from_vector(std::vector<int64_t>{1, 3, 3, 7, 1, 3, 0, 7, 3, 9, 1, 3}, {12});
  Tensor w = w0.clone().requires_grad_();
  ag::linear(ag::embedding(w, ids), w).backward(G);  // the head's part, then the embedding's
  // the same two parts apart: the head's on one leaf; the embedding's, dense, on another
  Tensor x = ag::embedding(w0, ids).requires_grad_(), w_head = w0.clone().requires_grad_();
  ag::linear(x, w_head).backward(G);
  Tensor w_emb = w0.clone().requires_grad_();
  ag::embedding(w_emb, ids).backward(x.grad());
  Tensor expected = w_head.grad().clone();
  ag::add_(expected, w_emb.grad());
  const std::vector<double> got = w.grad().to_vector(), want = expected.to_vector();
  REQUIRE(got == want);
  const std::vector<double> head = w_head.grad().to_vector();
  for (int64_t c = 0; c < 16; ++c) REQUIRE(got[2 * 16 + c] == head[2 * 16 + c]);  // unused row
}

TEST_CASE("layer_norm centres and scales each row", "[values][layer_norm]") {
  Tensor x = ag::tensor({{1.0, 2.0, 3.0}, {2.0, 2.0, 2.0}}, DType::Float64);
  const double s = 1.0 / std::sqrt(2.0 / 3.0 + 1e-5);
  require_values(ag::layer_norm(x, Tensor(), Tensor()), {-s, 0, s, 0, 0, 0}, 1e-12);
  Tensor w = ag::tensor({1.0, 2.0, 3.0}, DType::Float64),
         b = ag::tensor({0.5, 0.5, 0.5}, DType::Float64);
  require_values(ag::layer_norm(x, w, b), {0.5 - s, 0.5, 0.5 + 3 * s, 0.5, 0.5, 0.5}, 1e-12);
}

TEST_CASE("rms_norm scales each row by its root mean square, without centring",
          "[values][rms_norm]") {
  Tensor x = ag::tensor({{1.0, 2.0, 3.0}, {2.0, 2.0, 2.0}}, DType::Float64);
  const double r = 1.0 / std::sqrt(14.0 / 3.0 + 1e-5), q = 1.0 / std::sqrt(4.0 + 1e-5);
  require_values(ag::rms_norm(x, Tensor()), {r, 2 * r, 3 * r, 2 * q, 2 * q, 2 * q}, 1e-12);
  Tensor w = ag::tensor({1.0, 2.0, 3.0}, DType::Float64);
  require_values(ag::rms_norm(x, w), {r, 4 * r, 9 * r, 2 * q, 4 * q, 6 * q}, 1e-12);
  REQUIRE_THROWS_WITH(ag::rms_norm(x, ag::ones({2}, DType::Float64)),
                      Catch::Contains("rms_norm: weight") && Catch::Contains("[2]"));
}

TEST_CASE("rms_norm adds eps to the mean square before the root", "[values][rms_norm]") {
  Tensor x = ag::tensor({{3.0, 4.0}}, DType::Float64);  // mean square 12.5
  require_values(ag::rms_norm(x, Tensor(), 0.0), {3 / std::sqrt(12.5), 4 / std::sqrt(12.5)}, 1e-15);
  require_values(ag::rms_norm(x, Tensor(), 12.5), {0.6, 0.8}, 1e-15);  // rstd 1/5
}

TEST_CASE("rms_norm maps a row of zeros to zeros with a finite gradient", "[values][rms_norm]") {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    Tensor x = ag::zeros({2, 4}, dtype).requires_grad_();
    Tensor w = ag::tensor({1.0, -2.0, 0.5, 3.0}, dtype).requires_grad_();
    Tensor y = ag::rms_norm(x, w);
    require_values(y, std::vector<double>(8, 0.0), 0);
    ag::sum(y).backward();
    // at x = 0, y = x w / sqrt(eps): dx = w / sqrt(eps), and dw = sum of g xhat = 0
    const double s = 1 / std::sqrt(1e-5);
    require_values(x.grad(), {s, -2 * s, 0.5 * s, 3 * s, s, -2 * s, 0.5 * s, 3 * s}, 1e-3);
    require_values(w.grad(), {0, 0, 0, 0}, 0);
  }
}

// Under torch.autocast("cpu", bfloat16) the norms stay float32; here too: the same bits
// inside a bf16 scope as outside, forward and backward. bfloat16 tensors are refused.
TEST_CASE("layer_norm and rms_norm stay float32 under bf16 autocast", "[values][bf16][rms_norm]") {
  ag::Generator gen(8);
  Tensor x = ag::randn({5, 40}, gen).requires_grad_();
  Tensor w = ag::randn({40}, gen).requires_grad_(), b = ag::randn({40}, gen).requires_grad_();
  Tensor g = ag::randn({5, 40}, gen);
  for (int rms = 0; rms < 2; ++rms) {
    INFO((rms ? "rms_norm" : "layer_norm"));
    auto norm = [&] { return rms ? ag::rms_norm(x, w) : ag::layer_norm(x, w, b); };
    std::vector<std::vector<double>> runs[2];
    for (int autocast = 0; autocast < 2; ++autocast) {
      x.zero_grad(), w.zero_grad(), b.zero_grad();
      ag::AutocastScope scope(autocast ? ag::Precision::bf16 : ag::Precision::fp32);
      Tensor y = norm();
      REQUIRE(y.dtype() == DType::Float32);
      y.backward(g);
      runs[autocast] = {y.to_vector(), x.grad().to_vector(), w.grad().to_vector()};
    }
    REQUIRE(runs[0] == runs[1]);
    Tensor x16 = ag::to_bfloat16(x.detach());
    REQUIRE_THROWS_WITH(rms ? ag::rms_norm(x16, Tensor()) : ag::layer_norm(x16, Tensor(), Tensor()),
                        Catch::Contains("bfloat16"));
  }
}

// The decoder's inference step calls the row kernels: they must give the op's very bits
// (rows past one parallel chunk, a width past the SIMD one).
TEST_CASE("the float32 norm row kernels give the training forward's bits", "[values][rms_norm]") {
  ag::Generator gen(9);
  const int64_t rows = 70, C = 67;
  Tensor x = ag::randn({rows, C}, gen), w = ag::randn({C}, gen), b = ag::randn({C}, gen);
  std::vector<float> y(rows * C);
  const float* xp = x.data<float>();
  ag::kernels::layer_norm_rows(xp, rows, C, w.data<float>(), b.data<float>(), 1e-5, y.data());
  REQUIRE(ag::layer_norm(x, w, b).to_vector() == std::vector<double>(y.begin(), y.end()));
  ag::kernels::rms_norm_rows(xp, rows, C, w.data<float>(), 1e-6, y.data());
  REQUIRE(ag::rms_norm(x, w, 1e-6).to_vector() == std::vector<double>(y.begin(), y.end()));
}

// The weight's gradient sums over rows in fixed chunks, added in order: 1 or 2 threads,
// the same bits.
TEST_CASE("rms_norm gives the same bits on one and two threads", "[values][rms_norm]") {
  const int saved = ag::num_threads();
  auto run = [](int threads) {
    ag::set_num_threads(threads);
    ag::Generator gen(10);
    Tensor x = ag::randn({300, 96}, gen).requires_grad_(),
           w = ag::randn({96}, gen).requires_grad_();
    Tensor y = ag::rms_norm(x, w);
    y.backward(ag::randn({300, 96}, gen));
    return std::vector<std::vector<double>>{y.to_vector(), x.grad().to_vector(),
                                            w.grad().to_vector()};
  };
  const auto one = run(1), two = run(2);
  ag::set_num_threads(saved);
  REQUIRE(one == two);
}

TEST_CASE("dropout zeroes about p of the elements and scales the rest by 1/(1-p)",
          "[values][dropout]") {
  ag::Generator gen(3);
  Tensor x = ag::ones({100000}, DType::Float64);
  Tensor y = ag::dropout(x, 0.25, true, gen);
  auto v = y.to_vector();
  int64_t zeros = 0;
  for (double e : v) {
    if (e == 0)
      ++zeros;
    else
      REQUIRE_THAT(e, WithinRel(1.0 / 0.75, 1e-15));
  }
  REQUIRE_THAT(zeros / 100000.0, WithinAbs(0.25, 0.005));  // ~6 standard deviations
  REQUIRE_THAT(ag::mean(y).item(), WithinAbs(1.0, 0.01));  // expectation preserved
}

TEST_CASE("dropout is the identity in eval mode and at p = 0 and all zeros at p = 1",
          "[values][dropout]") {
  ag::Generator gen(4);
  Tensor x = ag::randn({5, 5}, gen);
  REQUIRE(ag::dropout(x, 0.5, false, gen).shares_storage_with(x));
  REQUIRE(ag::dropout(x, 0.0, true, gen).shares_storage_with(x));
  REQUIRE(ag::dropout(x, 1.0, true, gen).to_vector() == std::vector<double>(25, 0.0));
}

TEST_CASE("dropout with the same seed draws the same mask", "[values][dropout]") {
  Tensor x = ag::ones({64});
  ag::Generator g1(11), g2(11), g3(12);
  auto a = ag::dropout(x, 0.5, true, g1).to_vector();
  REQUIRE(a == ag::dropout(x, 0.5, true, g2).to_vector());
  REQUIRE(a != ag::dropout(x, 0.5, true, g3).to_vector());
}

TEST_CASE("dropout keeps element i unless draw i mod 4096 of sub-stream i / 4096 is under p",
          "[values][dropout]") {
  // the definition, one stream at a time, against the op (which draws 16 sub-streams side
  // by side): a lone element, a partial chunk, a group and a bit, three groups and a part;
  // on one and two threads, in float32 and float64
  for (const int64_t n :
       {int64_t{1}, int64_t{4095}, int64_t{16 * 4096 + 7}, int64_t{40 * 4096 + 123}}) {
    for (const DType dtype : {DType::Float32, DType::Float64}) {
      const double p = 0.3;
      ag::Generator replay(17);
      const uint64_t draw = replay.next_u64(), cutoff = ag::Generator::uniform_cutoff(p);
      std::vector<double> want(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; i += 4096) {
        ag::Generator stream = ag::Generator::substream(draw, static_cast<uint64_t>(i / 4096));
        for (int64_t j = i; j < std::min(n, i + 4096); ++j)
          want[j] = (stream.next_u64() >> 11) >= cutoff ? 1.0 / (1.0 - p) : 0.0;
      }
      const int saved = ag::num_threads();
      for (const int threads : {1, 2}) {
        ag::set_num_threads(threads);
        ag::Generator gen(17);
        const Tensor y = ag::dropout(ag::ones({n}, dtype), p, true, gen);
        const Tensor want_t = ag::from_vector(want, {n}, dtype);
        INFO(n << " elements, " << ag::dtype_name(dtype) << ", " << threads << " threads");
        REQUIRE(y.to_vector() == want_t.to_vector());
      }
      ag::set_num_threads(saved);
    }
  }
}
