// Gradient accumulation: the sum's order is the canonical tree, and micro-batches add up
// to the gradient of their union.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "support.h"
#include "train/grad_accumulation.h"
#include "train/train.h"

namespace {

// The tree of grad_accumulation.h, written out recursively on plain floats.
float tree_sum(const std::vector<float>& g, size_t begin, size_t n) {
  if (n == 1) return g[begin];
  size_t half = 1;
  while (half * 2 < n) half *= 2;
  return tree_sum(g, begin, half) + tree_sum(g, begin + half, n - half);
}

float fold_sum(const std::vector<float>& g) {
  float s = g[0];
  for (size_t i = 1; i < g.size(); ++i) s += g[i];
  return s;
}

void set_grads(const std::vector<ag::Tensor>& params, const std::vector<float>& values) {
  size_t at = 0;
  for (const ag::Tensor& p : params) {
    ag::Tensor g = ag::zeros(p.shape());
    for (int64_t i = 0; i < p.numel(); ++i) g.data<float>()[i] = values[at++];
    p.set_grad(g);
  }
}

std::vector<float> grads_of(const std::vector<ag::Tensor>& params) {
  std::vector<float> out;
  for (const ag::Tensor& p : params)
    for (int64_t i = 0; i < p.numel(); ++i) out.push_back(p.grad().data<float>()[i]);
  return out;
}

std::vector<ag::Tensor> two_parameters() {
  ag::Tensor a = ag::zeros({3}), b = ag::zeros({2, 2});
  a.requires_grad_();
  b.requires_grad_();
  return {a, b};
}

}  // namespace

TEST_CASE("accumulation sums micro-batches in the canonical binary tree", "[accumulation]") {
  const std::vector<ag::Tensor> params = two_parameters();
  train::GradAccumulator acc(params);
  int64_t orders_that_differ = 0;
  for (int64_t micro = 1; micro <= 17; ++micro) {
    const auto g = ag_test::mixed_magnitudes(micro, 7, static_cast<unsigned>(micro));
    acc.start();
    for (int64_t m = 0; m < micro; ++m) {
      set_grads(params, g[m]);
      if (m + 1 < micro) acc.add();
    }
    acc.finish();
    const std::vector<float> sum = grads_of(params);
    for (size_t k = 0; k < sum.size(); ++k) {
      std::vector<float> column;
      for (const auto& row : g) column.push_back(row[k]);
      INFO("micro-batches " << micro << ", element " << k);
      REQUIRE(sum[k] == tree_sum(column, 0, column.size()));  // bit for bit
      orders_that_differ += fold_sum(column) != sum[k];
    }
  }
  REQUIRE(orders_that_differ > 10);  // the test tells the tree from a running sum
}

TEST_CASE("accumulation groups four as two pairs so a cancellation survives", "[accumulation]") {
  // float32: 1e8 + 1 rounds to 1e8, so (1e8 + 1) + (-1e8 + 1) is 0 where a running sum
  // ((1e8 + 1) - 1e8) + 1 gives 1
  const std::vector<ag::Tensor> params = two_parameters();
  train::GradAccumulator acc(params);
  acc.start();
  for (float v : {1e8f, 1.0f, -1e8f}) {
    set_grads(params, std::vector<float>(7, v));
    acc.add();
  }
  set_grads(params, std::vector<float>(7, 1.0f));
  acc.finish();
  REQUIRE(grads_of(params) == std::vector<float>(7, 0.0f));
}

TEST_CASE("accumulation holds floor of log2 M partial sums", "[accumulation]") {
  CHECK(train::partial_sums_held(1) == 0);
  CHECK(train::partial_sums_held(2) == 1);
  CHECK(train::partial_sums_held(3) == 1);
  CHECK(train::partial_sums_held(4) == 2);
  CHECK(train::partial_sums_held(7) == 2);
  CHECK(train::partial_sums_held(8) == 3);
  CHECK(train::partial_sums_held(1 << 20) == 20);
  for (int64_t micro : {2, 3, 5, 8, 13, 16}) {
    const std::vector<ag::Tensor> params = two_parameters();
    train::GradAccumulator acc(params);
    for (int round = 0; round < 2; ++round) {  // buffers are reused, not made again
      acc.start();
      for (int64_t m = 0; m + 1 < micro; ++m) {
        set_grads(params, std::vector<float>(7, 1.0f));
        acc.add();
      }
      set_grads(params, std::vector<float>(7, 1.0f));
      acc.finish();
      REQUIRE(grads_of(params) == std::vector<float>(7, static_cast<float>(micro)));
    }
    REQUIRE(acc.partial_sums_allocated() == train::partial_sums_held(micro));
  }
}

TEST_CASE("a parameter without a gradient in a micro-batch counts as zero", "[accumulation]") {
  const std::vector<ag::Tensor> params = two_parameters();
  train::GradAccumulator acc(params);
  acc.start();
  set_grads(params, std::vector<float>(7, 2.0f));
  acc.add();
  for (const ag::Tensor& p : params) p.zero_grad();  // unused by the last micro-batch
  acc.finish();
  REQUIRE(grads_of(params) == std::vector<float>(7, 2.0f));
}

TEST_CASE("micro-batches scaled by 1 over M give the gradient of their union", "[accumulation]") {
  // no dropout: its masks would differ between one batch and its parts
  const nn::GPTConfig cfg = ag_test::gpt_config(11, 6, 16, 2, 2, 0.0);
  for (int64_t micro : {2, 3, 4}) {
    nn::GPT model(cfg, 7);
    model.train();
    const int64_t rows = 2 * micro, T = cfg.context_length;
    ag::Tensor ids = ag::empty({rows, T}, ag::DType::Int64);
    ag::Tensor targets = ag::empty({rows, T}, ag::DType::Int64);
    for (int64_t i = 0; i < rows * T; ++i) {
      ids.data<int64_t>()[i] = (i * 7 + 3) % cfg.vocab_size;
      targets.data<int64_t>()[i] = (i * 5 + 1) % cfg.vocab_size;
    }
    model.forward(ids, targets).loss.backward();
    const std::vector<ag::Tensor> params = model.parameters();
    const std::vector<float> whole = grads_of(params);

    train::GradAccumulator acc(params);
    acc.start();
    for (const ag::Tensor& p : params) p.zero_grad();
    for (int64_t m = 0; m < micro; ++m) {
      auto out = model.forward(ids.narrow(0, 2 * m, 2).contiguous(),
                               targets.narrow(0, 2 * m, 2).contiguous());
      out.loss.backward(ag::full(out.loss.shape(), 1.0 / static_cast<double>(micro)));
      if (m + 1 < micro) acc.add();
    }
    acc.finish();
    const std::vector<float> parts = grads_of(params);
    REQUIRE(parts.size() == whole.size());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < whole.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(parts[i] - whole[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(whole[i])));
    }
    INFO("micro-batches " << micro << ": largest difference " << worst << " of " << scale);
    REQUIRE(scale > 0);
    REQUIRE(worst <= 1e-5 * scale);  // float32 rounding of sums over a few hundred terms
  }
}

TEST_CASE("a step of two micro-batches matches one step of their union", "[accumulation]") {
  ag_test::TempDir dir;
  auto run_config = [&](int64_t batch, int64_t micro) {
    train::RunConfig cfg;
    cfg.model.context_length = 8;
    cfg.model.d_model = 16;
    cfg.model.n_heads = 2;
    cfg.model.n_layers = 1;
    cfg.model.dropout = 0;
    cfg.batch_size = batch;
    cfg.grad_accum_steps = micro;
    cfg.steps = 2;
    cfg.threads = 1;
    cfg.sample_tokens = 0;
    cfg.eval_windows = 2;
    cfg.out = dir.file(fmt::format("run{}.h5", micro));
    return cfg;
  };
  // the sampler draws windows in turn, so 2 x 2 sequences are the 4 of one batch
  train::TrainingRun whole(run_config(4, 1)), parts(run_config(2, 2));
  const train::StepOutcome a = whole.train_step(), b = parts.train_step();
  REQUIRE(b.updated);
  REQUIRE(b.figures.loss == Approx(a.figures.loss).epsilon(1e-6));
  REQUIRE(b.figures.grad_norm == Approx(a.figures.grad_norm).epsilon(1e-5));
  REQUIRE(b.figures.tokens == a.figures.tokens);  // tokens count the effective batch
  while (parts.wants_another_step()) parts.after_step(parts.train_step());
  REQUIRE(parts.finish() == 0);
  const io::Checkpoint saved = io::load_checkpoint(dir.file("run2.h5"));
  REQUIRE(saved.micro_batches == 4);
  REQUIRE(saved.config.at("grad_accum_steps") == 2);
}
