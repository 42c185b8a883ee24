// The bfloat16 copies that ops producing a linear's input write beside their float32
// output under a bf16 scope (autograd/autocast.h, attach_bf16_copy): used by the GEMM that
// reads the output, the same bits as rounding it there, and dropped by any later write.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>

#include "autograd/autocast.h"
#include "autograd/autograd.h"
#include "autograd/test_hooks.h"
#include "nn/nn.h"
#include "support.h"

namespace {

std::vector<uint16_t> bits_of(const ag::Tensor& t) {  // a bfloat16 tensor, row-major
  const ag::Tensor c = t.contiguous();
  const ag::bfloat16* p = c.data<ag::bfloat16>();
  std::vector<uint16_t> out(c.numel());
  for (size_t i = 0; i < out.size(); ++i) out[i] = p[i].bits;
  return out;
}

// Whether bf16_operand(t) reads the copy its producer attached (rather than rounding t)
bool reads_producer_copy(const ag::Tensor& t) {
  const auto& copy = t.impl()->storage->bf16_copy;
  return copy != nullptr && ag::detail::bf16_operand(t).impl()->storage == copy;
}

struct CopiesOff {
  CopiesOff() { ag::detail::use_bf16_copies_for_tests(false); }
  ~CopiesOff() { ag::detail::use_bf16_copies_for_tests(true); }
};

}  // namespace

TEST_CASE("LayerNorm, RMSNorm, GELU after a linear and the attention attach rounded copies",
          "[bf16]") {
  ag::Generator gen(21);
  const ag::Tensor x = ag::randn({2, 8, 16}, gen);
  const ag::Tensor w = ag::randn({16}, gen), b = ag::randn({16}, gen);
  const ag::Tensor fc = ag::randn({32, 16}, gen);
  const ag::AutocastScope autocast(ag::Precision::bf16);
  const std::vector<ag::Tensor> outputs{
      ag::layer_norm(x, w, b, 1e-5), ag::rms_norm(x, w, 1e-5),
      ag::linear(x, fc, ag::Tensor(), ag::Activation::Gelu),
      ag::causal_self_attention(ag::linear(x, ag::randn({48, 16}, gen)), 4, 0.0, nullptr)};
  for (const auto& out : outputs) {
    REQUIRE(reads_producer_copy(out));
    const ag::Tensor rows = out.reshape({-1, out.shape().back()});  // as a linear reads it
    REQUIRE(reads_producer_copy(rows));
    REQUIRE(bits_of(ag::detail::bf16_operand(rows)) == bits_of(ag::to_bfloat16(rows)));
    // a view that is not contiguous is rounded afresh
    REQUIRE_FALSE(reads_producer_copy(out.transpose(0, 1)));
  }
  // in float64 (never cast), and outside a bf16 scope, nothing is attached
  const ag::Tensor x64 = x.to(ag::DType::Float64);
  REQUIRE(ag::layer_norm(x64, ag::Tensor(), ag::Tensor(), 1e-5).impl()->storage->bf16_copy ==
          nullptr);
  const ag::AutocastScope fp32(ag::Precision::fp32);
  REQUIRE(ag::layer_norm(x, w, b, 1e-5).impl()->storage->bf16_copy == nullptr);
}

TEST_CASE("writing into a tensor drops its producer's bfloat16 copy", "[bf16]") {
  ag::Generator gen(22);
  const ag::Tensor x = ag::randn({4, 16}, gen);
  const ag::AutocastScope autocast(ag::Precision::bf16);
  const std::vector<std::function<void(ag::Tensor&)>> writes{
      [](ag::Tensor& t) {
        ag::copy_(t.narrow(0, 1, 2), ag::full({2, 16}, 3.0));
      },
      [](ag::Tensor& t) { ag::fill_(t.select(0, 3), -2.0); },
      [](ag::Tensor& t) {
        t.set({0, 5}, 7.0);
      },
      [](ag::Tensor& t) {
        ag::add_(t, ag::ones({4, 16}));
      }};
  for (const auto& write : writes) {
    ag::Tensor out = ag::layer_norm(x, ag::Tensor(), ag::Tensor(), 1e-5).detach();
    REQUIRE(reads_producer_copy(out));
    write(out);
    REQUIRE_FALSE(reads_producer_copy(out));
    REQUIRE(bits_of(ag::detail::bf16_operand(out)) == bits_of(ag::to_bfloat16(out)));
  }
}

TEST_CASE("a GPT's bf16 step with producers' copies gives the bits of rounding at each GEMM",
          "[bf16]") {
  for (const char* norm : {"layernorm", "rmsnorm"}) {
    nn::GPTConfig cfg = ag_test::gpt_config(40, 32, 64, 4, 2, 0.1);
    cfg.norm = base::parse_choice<nn::NormKind>(norm);
    nn::GPT model(cfg, 3);
    ag::Generator gen(10);
    const ag::Tensor xs = ag_test::random_ids(gen, 40, {4, 32});
    const ag::Tensor ys = ag_test::random_ids(gen, 40, {4, 32});
    auto step = [&] {
      model.zero_grad();
      model.dropout_generator() = ag::Generator(5);  // the same dropout masks each time
      const ag::AutocastScope autocast(ag::Precision::bf16);
      auto out = model.forward(xs, ys);
      out.loss.backward();
      std::vector<uint64_t> all{std::bit_cast<uint64_t>(out.loss.item())};
      for (const auto& t : model.parameters())
        for (double v : t.grad().to_vector()) all.push_back(std::bit_cast<uint64_t>(v));
      return all;
    };
    const auto with_copies = step();
    const CopiesOff off;
    INFO(norm);
    REQUIRE(step() == with_copies);
  }
}

namespace {

std::vector<uint32_t> float_bits(const ag::Tensor& t) {
  std::vector<uint32_t> out;
  for (double v : t.to_vector()) out.push_back(std::bit_cast<uint32_t>(static_cast<float>(v)));
  return out;
}

}  // namespace

// The copy is retired by counting writes, not by each writer remembering to drop it: a new
// in-place op that writes through the pointer Tensor::data hands out, and announces nothing,
// must still leave the next bf16 linear reading the new values.
TEST_CASE("a write by any path retires the copy: a bf16 linear then rounds the new values",
          "[bf16]") {
  ag::Generator gen(23);
  const ag::Tensor x = ag::randn({64, 48}, gen);
  const ag::Tensor w = ag::randn({32, 48}, gen);
  const ag::AutocastScope autocast(ag::Precision::bf16);
  const std::vector<std::pair<const char*, std::function<void(const ag::Tensor&)>>> writes{
      {"through data<float>()", [](const ag::Tensor& t) { t.data<float>()[5] = 7.0f; }},
      {"through a view's data<float>()",
       [](const ag::Tensor& t) {
         float* row = t.select(0, 9).data<float>();
         for (int i = 0; i < 48; ++i) row[i] = -row[i];
       }},
      {"through raw_data()", [](const ag::Tensor& t) { static_cast<float*>(t.raw_data())[0] = 3; }},
      {"copy_",
       [](const ag::Tensor& t) {
         ag::copy_(t.narrow(0, 1, 2), ag::full({2, 48}, 3.0));
       }},
      {"fill_", [](const ag::Tensor& t) { ag::fill_(t.select(1, 3), -2.0); }},
      {"set",
       [](const ag::Tensor& t) {
         t.set({0, 5}, 7.0);
       }},
      {"add_", [](const ag::Tensor& t) {
         ag::Tensor m = t;
         ag::add_(m, ag::ones({64, 48}));
       }}};
  for (const auto& [how, write] : writes) {
    INFO(how);
    for (const bool gelu_producer : {false, true}) {
      const ag::Tensor out = gelu_producer ? ag::linear(x, ag::randn({48, 48}, gen), ag::Tensor(),
                                                        ag::Activation::Gelu)
                                           : ag::layer_norm(x, ag::Tensor(), ag::Tensor(), 1e-5);
      REQUIRE(reads_producer_copy(out));
      write(out);
      REQUIRE_FALSE(reads_producer_copy(out));
      // the operand a bf16 GEMM reads (whether or not this CPU runs this shape in bf16) ...
      REQUIRE(bits_of(ag::detail::bf16_operand(out)) == bits_of(ag::to_bfloat16(out)));
      // ... and the linear: the clone has no copy, its linear rounds the values it holds now
      REQUIRE(float_bits(ag::linear(out, w)) == float_bits(ag::linear(out.clone(), w)));
    }
  }
}

TEST_CASE("reading a producer's output keeps its bfloat16 copy", "[bf16]") {
  ag::Generator gen(24);
  const ag::Tensor x = ag::randn({8, 16}, gen);
  const ag::AutocastScope autocast(ag::Precision::bf16);
  const ag::Tensor out = ag::layer_norm(x, ag::Tensor(), ag::Tensor(), 1e-5);
  double sum = out.const_data<float>()[0] + *static_cast<const float*>(out.const_raw_data());
  sum += out.at({1, 2}) + out.to_vector()[3] + out.select(0, 2).select(0, 1).item();
  CHECK(std::isfinite(sum));
  CHECK(reads_producer_copy(out));
  ag::Tensor dst = ag::empty({8, 16});
  ag::copy_(dst, out);  // out is the source: read, not written
  CHECK(reads_producer_copy(out));
}
