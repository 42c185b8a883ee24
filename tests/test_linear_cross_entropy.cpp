// ag::linear_cross_entropy (autograd/ops/linear_cross_entropy.cpp), the head's loss without
// its logits, against the unfused linear + cross_entropy: bit for bit with one chunk (float32,
// bf16 autocast, a trainable and a packed frozen weight, ignored targets), within float32
// rounding in chunks, the same bits on 1 and 2 threads; and the GPT's training loss through
// it. Its float64 gradcheck and PyTorch comparison are the op table's rows
// (linear_cross_entropy chunk N ignore I).
#include <catch2/catch.hpp>

#include "autograd/autocast.h"
#include "autograd/quant/packed_weight.h"
#include "autograd/threading.h"
#include "support.h"

using Catch::Matchers::Contains;

namespace {

struct HeadLoss {
  ag::Tensor loss, dx, dw;  // dw undefined for a frozen weight
};

// Inputs of a head: hidden states [B, T, K], a weight [V, K], targets with ignored ones
struct HeadInputs {
  ag::Tensor x, w, t;
};

HeadInputs head_inputs(int64_t B, int64_t T, int64_t K, int64_t V, uint64_t seed) {
  ag::Generator gen(seed);
  HeadInputs in{ag::normal({B, T, K}, 0.0, 1.0, gen), ag::normal({V, K}, 0.0, 0.2, gen), {}};
  std::vector<int64_t> t(static_cast<size_t>(B * T));
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = i % 5 == 3 ? -100 : static_cast<int64_t>(gen.next_u64() % static_cast<uint64_t>(V));
  in.t = ag::from_vector(t, {B, T});
  return in;
}

// chunk < 0: the unfused ops; else linear_cross_entropy in chunks of that many rows
HeadLoss head_loss(const HeadInputs& in, const ag::Tensor& weight, int64_t chunk) {
  ag::Tensor x = in.x.detach().clone().requires_grad_();
  ag::Tensor w = weight.packing() ? weight : weight.detach().clone().requires_grad_();
  ag::Tensor loss = chunk < 0 ? ag::cross_entropy(ag::linear(x, w), in.t)
                              : ag::linear_cross_entropy(x, w, in.t, -100, chunk);
  loss.backward();
  return {loss.detach(), x.grad(), weight.packing() ? ag::Tensor() : w.grad()};
}

void lce_require_same_bits(const HeadLoss& a, const HeadLoss& b) {
  CHECK(ag_test::bit_equal(a.loss, b.loss));
  CHECK(ag_test::bit_equal(a.dx, b.dx));
  CHECK(a.dw.defined() == b.dw.defined());
  if (a.dw.defined()) CHECK(ag_test::bit_equal(a.dw, b.dw));
}

// Every element within rel of the other's, or within abs of zero
void lce_require_close(const ag::Tensor& a, const ag::Tensor& b, double rel, double abs) {
  const auto x = a.to_vector(), y = b.to_vector();
  REQUIRE(x.size() == y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("element " << i);
    REQUIRE(x[i] == Approx(y[i]).epsilon(rel).margin(abs));
  }
}

}  // namespace

TEST_CASE("linear_cross_entropy in one chunk is linear + cross_entropy bit for bit",
          "[linear_cross_entropy]") {
  const bool bf16 = GENERATE(false, true);
  INFO((bf16 ? "bf16 autocast" : "float32"));
  const HeadInputs in = head_inputs(2, 24, 64, 300, 1);
  const ag::AutocastScope scope(bf16 ? ag::Precision::bf16 : ag::Precision::fp32);
  const HeadLoss unfused = head_loss(in, in.w, -1);
  lce_require_same_bits(head_loss(in, in.w, 0), unfused);   // the default: all 48 rows one chunk
  lce_require_same_bits(head_loss(in, in.w, 48), unfused);  // exactly one chunk
}

TEST_CASE("linear_cross_entropy in chunks: the same loss and dx rows, dW within rounding",
          "[linear_cross_entropy]") {
  const bool bf16 = GENERATE(false, true);
  INFO((bf16 ? "bf16 autocast" : "float32"));
  const HeadInputs in = head_inputs(2, 24, 64, 300, 2);
  const ag::AutocastScope scope(bf16 ? ag::Precision::bf16 : ag::Precision::fp32);
  const HeadLoss unfused = head_loss(in, in.w, -1);
  for (const int64_t chunk : {1, 5, 16, 47}) {
    INFO("chunks of " << chunk << " rows");
    std::vector<HeadLoss> runs;
    for (const int threads : {1, 2}) {
      ag::set_num_threads(threads);
      runs.push_back(head_loss(in, in.w, chunk));
    }
    ag::set_num_threads(1);
    lce_require_same_bits(runs[0], runs[1]);  // whatever the thread count
    // a chunk's logits are the same dot products as the whole GEMM's (to float32 rounding
    // where the GEMM blocks them otherwise), and dW sums the chunks' products. Under bf16
    // the logits' gradient is rounded to bfloat16 before dx's and dW's products, and a
    // last-bit difference in a logit can move it by one bfloat16 step, 2^-8 of it: the two
    // paths' GEMM kernels are chosen by measurement (a local CI run met one such pair, a dW
    // element 1.2e-3 apart, 3.8e-6 absolute), so there dx and dW agree to a step of each
    // term, not to float32 rounding.
    lce_require_close(runs[0].loss, unfused.loss, 1e-6, 0);
    const double rel = bf16 ? 1.0 / 128 : 1e-4, abs = bf16 ? 2e-5 : 1e-7;
    lce_require_close(runs[0].dx, unfused.dx, rel, abs);
    lce_require_close(runs[0].dw, unfused.dw, rel, abs);
  }
}

TEST_CASE("linear_cross_entropy over a packed frozen weight, whole and tile by tile",
          "[linear_cross_entropy]") {
  const auto precision = GENERATE(ag::quant::BasePrecision::q8_0, ag::quant::BasePrecision::q4_k);
  const bool bf16 = GENERATE(false, true);
  INFO(ag::quant::packed_format(precision)->name << (bf16 ? " under bf16" : " in float32"));
  const HeadInputs in = head_inputs(1, 20, 256, 100, 3);
  ag::Tensor packed = in.w.detach().clone();
  ag::quant::pack_in_place(packed, *ag::quant::packed_format(precision));
  const ag::AutocastScope scope(bf16 ? ag::Precision::bf16 : ag::Precision::fp32);
  for (const int64_t tile : {int64_t{0}, int64_t{256 * 30}}) {  // whole; tiles of 30 rows
    INFO("tiles of " << (tile ? "30 rows" : "the whole matrix"));
    ag::quant::set_unpack_tile_weights(tile);
    const HeadLoss unfused = head_loss(in, packed, -1);
    const HeadLoss whole = head_loss(in, packed, 0), chunked = head_loss(in, packed, 7);
    ag::quant::set_unpack_tile_weights(0);
    lce_require_same_bits(whole, unfused);
    CHECK(!whole.dw.defined());
    lce_require_close(chunked.loss, unfused.loss, 1e-6, 0);
    // (under bf16, a step of the rounded gradient apart, as in chunks above)
    lce_require_close(chunked.dx, unfused.dx, bf16 ? 1.0 / 128 : 1e-4, bf16 ? 2e-5 : 1e-7);
  }
}

TEST_CASE("linear_cross_entropy: every target ignored, no gradient asked, a loss gradient of 2",
          "[linear_cross_entropy]") {
  HeadInputs in = head_inputs(1, 6, 8, 5, 4);
  in.t = ag::full({1, 6}, -100.0, ag::DType::Int64);
  const HeadLoss none = head_loss(in, in.w, 2);
  CHECK(none.loss.item() == 0.0);
  for (const double v : none.dx.to_vector()) CHECK(v == 0.0);
  for (const double v : none.dw.to_vector()) CHECK(v == 0.0);
  in = head_inputs(1, 6, 8, 5, 4);
  {
    ag::NoGradGuard no_grad;
    CHECK(ag::linear_cross_entropy(in.x, in.w, in.t, -100, 4).item() ==
          ag::cross_entropy(ag::linear(in.x, in.w), in.t).item());
  }
  ag::Tensor x = in.x.detach().clone().requires_grad_(), x2 = x.detach().clone().requires_grad_();
  (ag::linear_cross_entropy(x, in.w, in.t) * 2.0).backward();
  (ag::cross_entropy(ag::linear(x2, in.w), in.t) * 2.0).backward();
  lce_require_close(x.grad(), x2.grad(), 1e-6, 1e-8);  // g applied after 1 / count: a rounding
}

TEST_CASE("linear_cross_entropy names what does not fit", "[linear_cross_entropy]") {
  const ag::Tensor x = ag::zeros({2, 3, 4}), w = ag::zeros({5, 4});
  const ag::Tensor t = ag::from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 5}, {2, 3});
  REQUIRE_THROWS_AS(ag::linear_cross_entropy(x, w, t), std::out_of_range);
  REQUIRE_THROWS_WITH(ag::linear_cross_entropy(x, w, t),
                      Contains("target 5 at position 5") && Contains("5 classes"));
  REQUIRE_THROWS_WITH(ag::linear_cross_entropy(x, ag::zeros({5, 3}), t),
                      Contains("input [2, 3, 4] and weight [5, 3] do not fit"));
  REQUIRE_THROWS_WITH(ag::linear_cross_entropy(x, w, ag::zeros({2, 3})),
                      Contains("needs int64 targets of shape [2, 3]"));
}

TEST_CASE("the GPT's training loss goes through linear_cross_entropy: no logits, same loss",
          "[linear_cross_entropy]") {
  nn::GPTConfig c = ag_test::gpt_config(50, 16, 32, 2, 2, 0.0);
  nn::GPT model(c, 3);
  ag::Generator gen(4);
  std::vector<int64_t> ids(2 * 16);
  for (auto& id : ids) id = static_cast<int64_t>(gen.next_u64() % 50);
  const ag::Tensor x = ag::from_vector(ids, {2, 16});
  const auto out = model.forward(x, x);
  CHECK(!out.logits.defined());
  const ag::Tensor logits = model.forward(x).logits;
  const auto& head = model.head();
  CHECK(ag_test::bit_equal(out.loss, head.loss(logits, x)));
}
