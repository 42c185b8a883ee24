// bfloat16: the conversion against its definition, the bfloat16 GEMM against float64 on
// the same rounded operands, and autocast's ops forward and backward against float64.
//
// Tolerances. Rounding a float32 to bfloat16 changes it by at most 2^-9 of its magnitude
// (8 significant bits, round to nearest). A product of two rounded operands is exact in
// float32, so a GEMM on bfloat16 operands with float32 accumulation differs from float64
// on the *same rounded operands* only by float32 summation: at most K 2^-24 sum |a b|
// (we allow 4x). Against the unrounded float64 result, the operands' rounding adds up to
// 2 2^-9 sum |a b| (we allow 1.5x that, about 2^-8).
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>

#include "autograd/autocast.h"
#include "autograd/autograd.h"
#include "autograd/ops/gemm.h"
#include "optim/optim.h"
#include "support.h"
#include "train/config.h"

namespace {

// The definition, independently of the bit trick: the two bfloat16 values around f
// (f's top 16 bits, and one ulp further from zero), the nearer one, ties to the even one.
uint16_t reference_bf16(float f) {
  if (std::isnan(f)) return 0x7fc0;  // compared as "a NaN" by the caller
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t lower = static_cast<uint16_t>(u >> 16);
  const uint16_t upper = static_cast<uint16_t>(lower + 1);  // the next one away from zero
  const double lo = std::fabs(static_cast<double>(ag::bfloat16::from_bits(lower)));
  // past the largest finite value, the next one would be 2^128 with an unbounded exponent:
  // what rounds to it overflows to infinity
  const bool overflows = (upper & 0x7fff) == 0x7f80;
  const double hi = overflows ? 0x1p128 : std::fabs(double(ag::bfloat16::from_bits(upper)));
  const double a = std::fabs(static_cast<double>(f));
  if ((lower & 0x7f80) == 0x7f80) return lower;  // inf stays inf
  if (a - lo < hi - a) return lower;
  if (hi - a < a - lo) return upper;
  return (lower & 1) ? upper : lower;
}

double bf16_round(double x) {
  return static_cast<float>(ag::bfloat16(static_cast<float>(x)));
}

ag::Tensor rounded_to_bf16(const ag::Tensor& t) {  // float64 holding bfloat16 values
  std::vector<double> v = t.to_vector();
  for (auto& x : v) x = bf16_round(x);
  return ag::from_vector(v, t.shape(), ag::DType::Float64);
}

// max |got - want| / max(scale) over elements, with scale = the bound's per-element weight
void require_within(const ag::Tensor& got, const ag::Tensor& want, const ag::Tensor& scale,
                    double factor, const char* what) {
  const auto g = got.to_vector(), w = want.to_vector(), s = scale.to_vector();
  REQUIRE(g.size() == w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO(what << ": element " << i << " got " << g[i] << " want " << w[i] << " bound "
              << factor * s[i]);
    REQUIRE(std::fabs(g[i] - w[i]) <= factor * s[i] + 1e-30);
  }
}

ag::Tensor abs64(const ag::Tensor& t) {
  std::vector<double> v = t.to_vector();
  for (auto& x : v) x = std::fabs(x);
  return ag::from_vector(v, t.shape(), ag::DType::Float64);
}

// the same doubles, bit for bit, in the same order
void require_same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(i);
    REQUIRE(std::bit_cast<uint64_t>(a[i]) == std::bit_cast<uint64_t>(b[i]));
  }
}

bool same_values(const ag::Tensor& a, const ag::Tensor& b) {
  return a.shape() == b.shape() && a.to_vector() == b.to_vector();
}

}  // namespace

TEST_CASE("bfloat16 conversion rounds to nearest with ties to even", "[bf16]") {
  std::vector<float> cases = {0.0f,
                              -0.0f,
                              1.0f,
                              -1.0f,
                              1.00390625f,
                              1.01171875f,
                              3.14159265f,
                              65504.0f,
                              3.3895314e38f,
                              std::numeric_limits<float>::max(),
                              std::numeric_limits<float>::min(),
                              std::numeric_limits<float>::denorm_min(),
                              1e-40f,
                              -2.5e-39f,
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()};
  ag::Generator gen(3);
  for (int i = 0; i < 200000; ++i)
    cases.push_back(std::bit_cast<float>(static_cast<uint32_t>(gen.next_u64())));
  for (float f : cases) {
    if (std::isnan(f)) continue;
    INFO("float bits " << std::hex << std::bit_cast<uint32_t>(f));
    REQUIRE(ag::bfloat16(f).bits == reference_bf16(f));
  }
  // exact ties: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 and goes to the even 1
  REQUIRE(ag::bfloat16(1.00390625f).bits == 0x3f80);
  REQUIRE(ag::bfloat16(1.01171875f).bits == 0x3f82);  // halfway, to the even 1 + 2^-6
  // the largest finite float is past the last bfloat16's halfway point: infinity
  REQUIRE(ag::bfloat16(std::numeric_limits<float>::max()).bits == 0x7f80);
}

TEST_CASE("bfloat16 conversion keeps NaN, infinities, signed zeros and subnormals", "[bf16]") {
  const float nan_low_payload = std::bit_cast<float>(0x7f800001u);  // would truncate to inf
  const float negative_nan = std::bit_cast<float>(0xffc00000u);
  REQUIRE(std::isnan(static_cast<float>(ag::bfloat16(nan_low_payload))));
  REQUIRE(std::isnan(static_cast<float>(ag::bfloat16(negative_nan))));
  REQUIRE(std::signbit(static_cast<float>(ag::bfloat16(negative_nan))));
  REQUIRE(static_cast<float>(ag::bfloat16(INFINITY)) == INFINITY);
  REQUIRE(static_cast<float>(ag::bfloat16(-INFINITY)) == -INFINITY);
  REQUIRE(std::signbit(static_cast<float>(ag::bfloat16(-0.0f))));
  const float sub = std::bit_cast<float>(0x00010000u);  // a subnormal bfloat16 holds exactly
  REQUIRE(static_cast<float>(ag::bfloat16(sub)) == sub);
  // the bulk conversion is the same function
  std::vector<float> v = {1.00390625f, nan_low_payload, -0.0f, sub, 1e-40f, 3.0e38f};
  std::vector<ag::bfloat16> b(v.size());
  ag::to_bfloat16(v.data(), b.data(), static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) REQUIRE(b[i].bits == ag::bfloat16(v[i]).bits);
  std::vector<float> back(v.size());
  ag::from_bfloat16(b.data(), back.data(), static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i)
    REQUIRE(std::bit_cast<uint32_t>(back[i]) == static_cast<uint32_t>(b[i].bits) << 16);
}

TEST_CASE("the streaming conversion gives to_bfloat16's bits at every alignment and length",
          "[bf16]") {
  // random bit patterns (NaNs with every payload, infinities, subnormals, ties included)
  ag::Generator gen(4);
  std::vector<float> src(300);
  for (auto& f : src) f = std::bit_cast<float>(static_cast<uint32_t>(gen.next_u64()));
  src[7] = std::bit_cast<float>(0x7f800001u), src[40] = std::bit_cast<float>(0xffffffffu);
  src[41] = 1.00390625f, src[42] = -INFINITY, src[43] = -0.0f;
  for (int64_t offset : {0, 1, 13, 31, 32}) {
    for (int64_t n : {0, 1, 31, 32, 33, 64, 97, 250}) {
      std::vector<ag::bfloat16> want(320), got(320);  // dst's offset moves its alignment
      ag::to_bfloat16(src.data() + 5, want.data() + offset, n);
      ag::to_bfloat16_streaming(src.data() + 5, got.data() + offset, n);
      for (int64_t i = 0; i < 320; ++i) {
        INFO("offset " << offset << " n " << n << " i " << i);
        REQUIRE(got[i].bits == want[i].bits);
      }
    }
  }
}

TEST_CASE("bfloat16 tensors convert, view and print like PyTorch's", "[bf16]") {
  ag::Tensor x = ag::tensor({{1.0, 2.5}, {-3.0, 1.00390625}});
  ag::Tensor b = x.to(ag::DType::BFloat16);
  REQUIRE(b.dtype() == ag::DType::BFloat16);
  REQUIRE(ag::dtype_size(b.dtype()) == 2);
  REQUIRE(b.t().contiguous().to(ag::DType::Float32).to_vector() ==
          std::vector<double>{1.0, -3.0, 2.5, 1.0});
  REQUIRE(ag::to_bfloat16(x).to_vector() == b.to_vector());
  REQUIRE(b.str() ==
          "tensor([[ 1.0000,  2.5000],\n        [-3.0000,  1.0000]], "
          "dtype=torch.bfloat16)");
  REQUIRE_FALSE(b.to(ag::DType::Float32).requires_grad());
  REQUIRE_THROWS_WITH(ag::add(b, b), Catch::Contains("bfloat16"));
  REQUIRE_THROWS_WITH(ag::to_bfloat16(x.to(ag::DType::Float64)), Catch::Contains("float32"));
}

TEST_CASE("the bfloat16 GEMM accumulates rounded operands in float32", "[bf16]") {
  using ag::detail::GemmOperand;
  ag::Generator gen(1);
  // shapes across the blocking: one block, several, a ragged last one, K long enough that
  // oneDNN alone would split it over threads, and a tiny K
  const std::vector<std::array<int64_t, 3>> shapes = {
      {5, 7, 3}, {64, 64, 64}, {300, 70, 129}, {1000, 96, 64}, {64, 64, 8192}, {33, 1100, 40}};
  for (const auto& [M, N, K] : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {0.0f, 1.0f}) {
          INFO("M " << M << " N " << N << " K " << K << " ta " << ta << " tb " << tb << " beta "
                    << beta);
          ag::Tensor a = ag::randn(ta ? ag::Shape{K, M} : ag::Shape{M, K}, gen);
          ag::Tensor b = ag::randn(tb ? ag::Shape{N, K} : ag::Shape{K, N}, gen);
          ag::Tensor c0 = ag::randn({M, N}, gen);
          ag::Tensor ab = ag::to_bfloat16(a), bb = ag::to_bfloat16(b);
          ag::Tensor c = c0.clone();
          ag::detail::gemm(GemmOperand{ta != 0, ta ? M : K}, GemmOperand{tb != 0, tb ? K : N}, M, N,
                           K, ab.data<ag::bfloat16>(), bb.data<ag::bfloat16>(), c.data<float>(),
                           beta);
          ag::Tensor a64 = rounded_to_bf16(ta ? a.t() : a), b64 = rounded_to_bf16(tb ? b.t() : b);
          ag::Tensor want = ag::matmul(a64, b64);
          if (beta != 0) want = ag::add(want, c0.to(ag::DType::Float64));
          ag::Tensor scale = ag::matmul(abs64(a64), abs64(b64));
          require_within(c, want, ag::add(scale, beta * abs64(c0)), 4.0 * K * 0x1p-24, "bf16 gemm");
        }
}

TEST_CASE("oneDNN's float32 GEMM agrees with float64 on every layout", "[bf16]") {
  using ag::detail::GemmOperand;
  ag::Generator gen(11);
  for (const auto& [M, N, K] : std::vector<std::array<int64_t, 3>>{
           {5, 7, 3}, {300, 70, 129}, {1000, 96, 64}, {64, 64, 8192}, {33, 1100, 40}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {0.0f, 1.0f}) {
          INFO("M " << M << " N " << N << " K " << K << " ta " << ta << " tb " << tb);
          ag::Tensor a = ag::randn(ta ? ag::Shape{K, M} : ag::Shape{M, K}, gen);
          ag::Tensor b = ag::randn(tb ? ag::Shape{N, K} : ag::Shape{K, N}, gen);
          ag::Tensor c0 = ag::randn({M, N}, gen), c = c0.clone();
          ag::detail::gemm_onednn(GemmOperand{ta != 0, ta ? M : K},
                                  GemmOperand{tb != 0, tb ? K : N}, M, N, K, a.data<float>(),
                                  b.data<float>(), c.data<float>(), beta);
          ag::Tensor a64 = (ta ? a.t() : a).to(ag::DType::Float64);
          ag::Tensor b64 = (tb ? b.t() : b).to(ag::DType::Float64);
          ag::Tensor want = ag::matmul(a64, b64);
          if (beta != 0) want = ag::add(want, c0.to(ag::DType::Float64));
          require_within(c, want, ag::add(ag::matmul(abs64(a64), abs64(b64)), beta * abs64(c0)),
                         4.0 * K * 0x1p-24, "oneDNN f32 gemm");
        }
}

TEST_CASE("oneDNN GEMMs give the same bits on 1 and 2 threads", "[bf16]") {
  ag::Generator gen(2);
  for (const auto& [M, N, K] :
       std::vector<std::array<int64_t, 3>>{{64, 64, 8192}, {512, 192, 64}}) {
    ag::Tensor a = ag::to_bfloat16(ag::randn({K, M}, gen));
    ag::Tensor b = ag::to_bfloat16(ag::randn({K, N}, gen));
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2}) {
      const int saved = ag::num_threads();
      ag::set_num_threads(threads);
      ag::Tensor c = ag::empty({M, N});
      ag::detail::gemm_onednn({true, M}, {false, N}, M, N, K, a.data<ag::bfloat16>(),
                              b.data<ag::bfloat16>(), c.data<float>());
      ag::Tensor cf = ag::empty({M, N}), af = a.to(ag::DType::Float32),
                 bf = b.to(ag::DType::Float32);
      ag::detail::gemm_onednn({true, M}, {false, N}, M, N, K, af.data<float>(), bf.data<float>(),
                              cf.data<float>());
      results.emplace_back(cf.data<float>(), cf.data<float>() + cf.numel());
      ag::set_num_threads(saved);
      results.emplace_back(c.data<float>(), c.data<float>() + c.numel());
    }
    // each thread count gives float32 then bfloat16: the same bits on both counts
    REQUIRE(std::memcmp(results[0].data(), results[2].data(), 4 * results[0].size()) == 0);
    REQUIRE(std::memcmp(results[1].data(), results[3].data(), 4 * results[1].size()) == 0);
  }
}

TEST_CASE("autocast linear and matmul use bfloat16 operands forward and backward", "[bf16]") {
  ag::Generator gen(4);
  const int64_t M = 37, K = 48, N = 20;
  ag::Tensor x = ag::randn({M, K}, gen).requires_grad_();
  ag::Tensor w = ag::randn({N, K}, gen).requires_grad_();
  ag::Tensor bias = ag::randn({N}, gen).requires_grad_();
  ag::Tensor g = ag::randn({M, N}, gen);
  for (int via_matmul = 0; via_matmul < 2; ++via_matmul) {
    INFO((via_matmul ? "matmul" : "linear"));
    x.zero_grad(), w.zero_grad(), bias.zero_grad();
    ag::Tensor y;
    {
      ag::AutocastScope autocast(ag::Precision::bf16);
      y = via_matmul ? ag::add(ag::matmul(x, w.t()), bias) : ag::linear(x, w, bias);
      REQUIRE(y.dtype() == ag::DType::Float32);
      y.backward(g);
    }
    const ag::Tensor x64 = rounded_to_bf16(x), w64 = rounded_to_bf16(w), g64 = rounded_to_bf16(g);
    const ag::Tensor want = ag::add(ag::matmul(x64, w64.t()), bias.to(ag::DType::Float64));
    const double acc = 4.0 * K * 0x1p-24;
    require_within(y, want, ag::add(ag::matmul(abs64(x64), abs64(w64.t())), abs64(bias)), acc,
                   "forward");
    require_within(x.grad(), ag::matmul(g64, w64), ag::matmul(abs64(g64), abs64(w64)),
                   4.0 * N * 0x1p-24, "dx");
    require_within(w.grad(), ag::matmul(g64.t(), x64), ag::matmul(abs64(g64.t()), abs64(x64)),
                   4.0 * M * 0x1p-24, "dW");
    // the bias gradient sums the float32 gradient, unrounded
    ag_test::require_values(bias.grad(), ag::sum(g.to(ag::DType::Float64), {0}).to_vector(), 1e-4);
    // and against the unrounded float64 result, within bfloat16's own tolerance
    const ag::Tensor x_64 = x.to(ag::DType::Float64), w_64 = w.to(ag::DType::Float64);
    require_within(y, ag::add(ag::matmul(x_64, w_64.t()), bias.to(ag::DType::Float64)),
                   ag::add(ag::matmul(abs64(x_64), abs64(w_64.t())), abs64(bias)), 1.5 * 2 * 0x1p-9,
                   "forward against float64");
  }
}

TEST_CASE("autocast leaves float64 and code outside its scope in full precision", "[bf16]") {
  ag::Generator gen(5);
  ag::Tensor a = ag::randn({8, 16}, gen, ag::DType::Float64);
  ag::Tensor b = ag::randn({16, 4}, gen, ag::DType::Float64);
  ag::Tensor a32 = a.to(ag::DType::Float32), b32 = b.to(ag::DType::Float32);
  ag::Tensor plain = ag::matmul(a32, b32), in64, in32, off;
  {
    ag::AutocastScope autocast(ag::Precision::bf16);
    in64 = ag::matmul(a, b);
    in32 = ag::matmul(a32, b32);
    ag::AutocastScope inner(ag::Precision::fp32);
    off = ag::matmul(a32, b32);
  }
  REQUIRE(ag::autocast_precision() == ag::Precision::fp32);
  REQUIRE(same_values(in64, ag::matmul(a, b)));
  REQUIRE(same_values(off, plain));
  REQUIRE_FALSE(same_values(in32, plain));  // the bfloat16 path did run
}

TEST_CASE("autocast rounds each parameter once per scope", "[bf16]") {
  ag::Generator gen(6);
  ag::Tensor w = ag::randn({4, 8}, gen).requires_grad_();
  ag::Tensor x = ag::randn({3, 8}, gen);
  ag::Tensor first, cached, fresh;
  {
    ag::AutocastScope autocast(ag::Precision::bf16);
    first = ag::linear(x, w, ag::Tensor());
    {
      ag::NoGradGuard no_grad;
      ag::copy_(w, ag::mul(w, 2.0));  // a change inside the scope is not seen: the copy is kept
    }
    cached = ag::linear(x, w, ag::Tensor());
  }
  {
    ag::AutocastScope autocast(ag::Precision::bf16);
    fresh = ag::linear(x, w, ag::Tensor());  // a new scope rounds the changed weight
  }
  REQUIRE(same_values(first, cached));
  ag_test::require_values(fresh, ag::mul(first, 2.0).to_vector(), 1e-6);
}

TEST_CASE("AdamW's kept bfloat16 copies give the bits of rounding every step's weights", "[bf16]") {
  // w_a alone and stacked with w_b (two copies of w_a), w_c only at even steps (no gradient
  // at odd ones, so AdamW skips it and its copy must stay as it was)
  auto train = [](bool keep) {
    ag::Generator gen(8);
    ag::Tensor w_a = ag::randn({4, 8}, gen).requires_grad_();
    ag::Tensor w_b = ag::randn({6, 8}, gen).requires_grad_();
    ag::Tensor w_c = ag::randn({5, 8}, gen).requires_grad_();
    optim::AdamW opt(optim::decay_groups({{"a", w_a}, {"b", w_b}, {"c", w_c}}, 0.1), 0.05);
    ag::Bf16WeightCopies copies;
    if (keep) REQUIRE(opt.keep_bf16_copies(&copies));
    std::vector<double> seen;
    for (int step = 0; step < 5; ++step) {
      opt.zero_grad();
      const ag::Tensor x = ag::randn({3, 8}, gen);
      {
        const ag::AutocastScope autocast(ag::Precision::bf16, keep ? &copies : nullptr);
        ag::Tensor loss =
            ag::add(ag::sum(ag::mul(ag::linear(x, std::vector<ag::Tensor>{w_a, w_b}), 1.0)),
                    ag::sum(ag::mul(ag::linear(x, w_a), ag::linear(x, w_a))));
        if (step % 2 == 0) loss = ag::add(loss, ag::sum(ag::linear(x, w_c)));
        seen.push_back(loss.item());
        loss.backward();
      }
      opt.step(0.5);
    }
    if (keep) REQUIRE(copies.bytes() == (4 * 8 + 10 * 8 + 5 * 8) * 2);
    for (const auto& w : {w_a, w_b, w_c})
      for (double v : w.to_vector()) seen.push_back(v);
    return seen;
  };
  require_same_bits(train(true), train(false));
}

TEST_CASE("a frozen weight added to the kept copies is rounded once for a whole run", "[bf16]") {
  // LoRA's shape: a frozen base w, a trainable adapter a; the base's copy made at the first
  // use and reused by every later use and scope, with the bits of rounding it at each use
  auto train = [](bool keep) {
    ag::Generator gen(12);
    ag::Tensor w = ag::randn({6, 8}, gen);  // frozen: no gradient
    ag::Tensor a = ag::randn({6, 8}, gen).requires_grad_();
    optim::AdamW opt(optim::decay_groups({{"a", a}}, 0.1), 0.05);
    ag::Bf16WeightCopies copies;
    if (keep) {
      REQUIRE(opt.keep_bf16_copies(&copies));
      copies.add_frozen({w});
    }
    std::vector<double> seen;
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      const ag::Tensor x = ag::randn({3, 8}, gen);
      {
        const ag::AutocastScope autocast(ag::Precision::bf16, keep ? &copies : nullptr);
        ag::Tensor h = ag::add(ag::linear(x, w), ag::linear(x, a));
        ag::Tensor loss = ag::sum(ag::mul(h, ag::linear(x, w)));
        seen.push_back(loss.item());
        loss.backward();
      }
      if (keep) REQUIRE(copies.bytes() == (6 * 8 + 6 * 8) * 2);  // w's and a's, one each
      opt.step();
    }
    for (double v : a.to_vector()) seen.push_back(v);
    return seen;
  };
  require_same_bits(train(true), train(false));
}

TEST_CASE("kept bfloat16 copies are trusted until cleared", "[bf16]") {
  ag::Generator gen(9);
  ag::Tensor w = ag::randn({4, 8}, gen).requires_grad_();
  const ag::Tensor x = ag::randn({3, 8}, gen);
  ag::Bf16WeightCopies copies;
  auto forward = [&] {
    const ag::AutocastScope autocast(ag::Precision::bf16, &copies);
    return ag::linear(x, w).detach();
  };
  const ag::Tensor first = forward();
  {
    ag::NoGradGuard no_grad;
    ag::copy_(w, ag::mul(w, 2.0));  // not through an optimiser keeping the copies
  }
  REQUIRE(same_values(forward(), first));  // the copy is trusted: the contract's other side
  copies.clear();
  ag_test::require_values(forward(), ag::mul(first, 2.0).to_vector(), 1e-6);
  REQUIRE(copies.bytes() == 4 * 8 * 2);
}

TEST_CASE("precision names parse and bad ones are named", "[bf16]") {
  REQUIRE(base::parse_choice<ag::Precision>("bf16") == ag::Precision::bf16);
  REQUIRE(base::parse_choice<ag::Precision>("fp32") == ag::Precision::fp32);
  REQUIRE_THROWS_WITH(base::parse_choice<ag::Precision>("fp16"),
                      "precision must be 'fp32' or 'bf16', got 'fp16'");
  REQUIRE(std::string(ag::bf16_matmul_implementation()).size() > 0);
}

namespace {

// max over elements of |a - b|, and of |b|
std::pair<double, double> max_error_and_scale(const ag::Tensor& a, const ag::Tensor& b) {
  const auto x = a.to_vector(), y = b.to_vector();
  double err = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i)
    err = std::max(err, std::fabs(x[i] - y[i])), scale = std::max(scale, std::fabs(y[i]));
  return {err, scale};
}

// The attention's output and the gradients of sum(out * g) for q, k, v, run in float32
// under `precision` or in float64 (precision ignored), from the same float32 inputs.
std::vector<ag::Tensor> attention_and_grads(const std::vector<ag::Tensor>& qkv, const ag::Tensor& g,
                                            ag::DType dtype, ag::Precision precision) {
  std::vector<ag::Tensor> in;
  for (const auto& t : qkv) in.push_back(t.to(dtype).detach().requires_grad_());
  ag::AutocastScope autocast(precision);
  ag::Tensor out = ag::scaled_dot_product_attention(in[0], in[1], in[2], true, 0.0, nullptr, 0.0);
  ag::sum(ag::mul(out, g.to(dtype))).backward();
  return {out, in[0].grad(), in[1].grad(), in[2].grad()};
}

}  // namespace

// bfloat16 keeps 8 significant bits: rounding q, k, v and the probabilities moves the
// output by a few 2^-9 of max |v| and the gradients by a few 2^-9 of their largest element;
// 2^-6 of the scale allows for the sums. float32 alone stays within 1e-5 of float64.
TEST_CASE("bf16 attention forward and backward agree with float64 to bfloat16 precision",
          "[bf16]") {
  ag::Generator gen(8);
  const ag::Shape shape{2, 3, 70, 16};  // a partial tile and a causal diagonal
  std::vector<ag::Tensor> qkv = {ag::randn(shape, gen), ag::randn(shape, gen),
                                 ag::randn(shape, gen)};
  ag::Tensor g = ag::randn(shape, gen);
  const auto want = attention_and_grads(qkv, g, ag::DType::Float64, ag::Precision::fp32);
  const auto f32 = attention_and_grads(qkv, g, ag::DType::Float32, ag::Precision::fp32);
  const auto bf16 = attention_and_grads(qkv, g, ag::DType::Float32, ag::Precision::bf16);
  const char* names[] = {"out", "dq", "dk", "dv"};
  for (int i = 0; i < 4; ++i) {
    const auto [err32, scale] = max_error_and_scale(f32[i], want[i]);
    const auto [err16, scale16] = max_error_and_scale(bf16[i], want[i]);
    INFO(names[i] << ": float32 error " << err32 << ", bf16 error " << err16 << ", scale "
                  << scale);
    REQUIRE(err32 <= 1e-5 * scale);
    REQUIRE(err16 <= 0x1p-6 * scale);
    REQUIRE(err16 > 4 * err32);  // the bfloat16 rounding did happen
  }
}

TEST_CASE("bf16 causal self-attention rounds like scaled_dot_product_attention", "[bf16]") {
  ag::Generator gen(9);
  const int64_t B = 2, T = 33, H = 2, D = 8;
  ag::Tensor qkv = ag::randn({B, T, 3 * H * D}, gen);
  ag::Tensor fused, split;
  {
    ag::AutocastScope autocast(ag::Precision::bf16);
    fused = ag::causal_self_attention(qkv, H, 0.0, nullptr);
    auto heads = [&](int part) {  // [B, T, H, D] -> [B, H, T, D]
      return qkv.narrow(2, part * H * D, H * D).reshape({B, T, H, D}).permute({0, 2, 1, 3});
    };
    split = ag::scaled_dot_product_attention(heads(0), heads(1), heads(2), true, 0.0, nullptr, 0.0)
                .permute({0, 2, 1, 3})
                .reshape({B, T, H * D});
  }
  REQUIRE(same_values(fused, split));
}

TEST_CASE("a GPT's loss and gradients in bf16 stay near float64", "[bf16]") {
  const nn::GPTConfig cfg = ag_test::gpt_config(40, 32, 64, 4, 2, 0.0);
  nn::GPT model(cfg, 3);
  ag::Generator gen(10);
  const ag::Tensor xs = ag_test::random_ids(gen, 40, {4, 32});
  const ag::Tensor ys = ag_test::random_ids(gen, 40, {4, 32});
  auto grads = [&](ag::Precision p) {
    model.zero_grad();
    ag::AutocastScope autocast(p);
    auto out = model.forward(xs, ys);
    out.loss.backward();
    std::vector<double> all{out.loss.item()};
    for (const auto& t : model.parameters())
      for (double v : t.grad().to_vector()) all.push_back(v);
    return all;
  };
  const auto f32 = grads(ag::Precision::fp32), bf16 = grads(ag::Precision::bf16);
  // the loss to 1e-3 relative; the gradient as a whole to 2% in norm
  REQUIRE(std::fabs(bf16[0] - f32[0]) <= 1e-3 * f32[0]);
  double diff = 0, norm = 0;
  for (size_t i = 1; i < f32.size(); ++i)
    diff += (bf16[i] - f32[i]) * (bf16[i] - f32[i]), norm += f32[i] * f32[i];
  INFO("relative gradient difference " << std::sqrt(diff / norm));
  REQUIRE(std::sqrt(diff / norm) <= 0.02);
  REQUIRE(std::sqrt(diff / norm) > 1e-5);
}
