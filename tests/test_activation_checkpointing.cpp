// Activation checkpointing (autograd/checkpoint.h, nn::GPT::set_activation_checkpointing,
// train --checkpoint-activations): the recomputing node gives the direct call's output and
// gradients bit for bit, dropout included; ag::gradients() collects without touching .grad;
// a GPT's loss and gradients, and a whole training run's checkpoint, are the same with it
// as without; the memory plan holds one block's activations. Its float64 gradient checks
// are op-table rows (layers family: "checkpoint of ...").
#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "autograd/autocast.h"
#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "autograd/threading.h"
#include "nn/frozen_base.h"
#include "support.h"
#include "train/train.h"

using ag_test::bit_equal;
using ag_test::same_bits;

namespace {

struct Weights {
  ag::Tensor w, b;
};

Weights weights(uint64_t seed) {
  ag::Generator gen(seed);
  return {ag::normal({6, 6}, 0.0, 0.4, gen).requires_grad_(),
          ag::normal({6}, 0.0, 0.1, gen).requires_grad_()};
}

// dropout, a linear and tanh, then the input again: a residual block in miniature
ag::Tensor block(const ag::Tensor& x, const Weights& p, ag::Generator& gen) {
  return x + ag::tanh(ag::linear(ag::dropout(x, 0.25, true, gen), p.w, p.b));
}

struct Run {
  ag::Tensor out, dx, dw, db;
  ag::Generator after_forward, after_backward;
};

Run run_blocks(bool checkpointed) {
  const Weights p = weights(1);
  ag::Generator data(2), gen(3);
  ag::Tensor x = ag::normal({4, 5, 6}, 0.0, 1.0, data).requires_grad_();
  ag::Tensor h = x;
  for (int layer = 0; layer < 3; ++layer) {
    auto f = [&p, &gen](const ag::Tensor& a) { return block(a, p, gen); };
    h = checkpointed ? ag::checkpoint(f, h, {p.w, p.b}, {&gen}) : f(h);
  }
  Run r{h.detach(), {}, {}, {}, gen, gen};
  h.backward(ag::normal(h.shape(), 0.0, 1.0, data));
  r.dx = x.grad(), r.dw = p.w.grad(), r.db = p.b.grad();
  r.after_backward = gen;
  return r;
}

bool same_state(ag::Generator a, ag::Generator b) {
  return a.next_u64() == b.next_u64() && a.next_u64() == b.next_u64();
}

}  // namespace

TEST_CASE("a checkpointed function gives the direct call's output and gradients bit for bit",
          "[activation_checkpointing]") {
  for (const int threads : {1, 2}) {
    ag::set_num_threads(threads);
    const Run direct = run_blocks(false), again = run_blocks(true);
    CHECK(bit_equal(again.out, direct.out));
    CHECK(bit_equal(again.dx, direct.dx));
    CHECK(bit_equal(again.dw, direct.dw));
    CHECK(bit_equal(again.db, direct.db));
    // the recomputation draws its masks from the saved state and leaves the generator
    // where the forward left it
    CHECK(same_state(again.after_forward, direct.after_forward));
    CHECK(same_state(again.after_backward, direct.after_forward));
  }
  ag::set_num_threads(1);
}

TEST_CASE("a checkpointed function keeps its input only, not what its ops save",
          "[activation_checkpointing]") {
  const Weights p = weights(1);
  ag::Generator data(2);
  ag::Tensor x = ag::normal({4, 6}, 0.0, 1.0, data).requires_grad_();
  std::weak_ptr<ag::TensorImpl> inner;
  ag::Tensor y = ag::checkpoint(
      [&](const ag::Tensor& a) {
        ag::Tensor t = ag::tanh(ag::linear(a, p.w, p.b));
        if (inner.expired()) inner = t.impl_ptr();  // the first run's: saved by the product
        return t * a;
      },
      x, {p.w, p.b});
  CHECK(inner.expired());  // the first run's graph, and all it saved, is gone
  REQUIRE(y.grad_fn());
  CHECK(std::string(y.grad_fn()->name) == "CheckpointBackward");
  ag::sum(y).backward();
  CHECK(x.grad().defined());
  CHECK(p.w.grad().defined());
}

TEST_CASE("without anything to record a checkpointed function is a plain call",
          "[activation_checkpointing]") {
  const ag::Tensor x = ag::ones({2, 3});
  const ag::Tensor y = ag::checkpoint([](const ag::Tensor& a) { return a * 2.0; }, x, {});
  CHECK_FALSE(y.requires_grad());
  CHECK(y.to_vector() == std::vector<double>(6, 2.0));
  ag::Tensor w = ag::ones({2, 3}).requires_grad_();
  ag::NoGradGuard no_grad;
  CHECK_FALSE(ag::checkpoint([&w](const ag::Tensor& a) { return a * w; }, x, {w}).requires_grad());
}

TEST_CASE("ag::gradients collects the leaves' gradients without adding into .grad",
          "[activation_checkpointing]") {
  ag::Tensor a = ag::ones({3}).requires_grad_(), b = ag::full({3}, 2.0).requires_grad_();
  ag::Tensor y = ag::sum(a * b + a);
  const auto g = ag::gradients(y, ag::Tensor(), {a, b});
  CHECK(g[0].to_vector() == std::vector<double>{3, 3, 3});
  CHECK(g[1].to_vector() == std::vector<double>{1, 1, 1});
  CHECK_FALSE(a.grad().defined());
  CHECK_FALSE(b.grad().defined());
  // a leaf the graph reaches but not asked for: named, never summed into .grad silently
  ag::Tensor z = ag::sum(a * b);
  CHECK_THROWS_WITH(ag::gradients(z, ag::Tensor(), {a}),
                    Catch::Matchers::Contains("not among the leaves asked for"));
  CHECK_FALSE(b.grad().defined());
}

TEST_CASE(
    "the leaf-ready hook announces each parameter once, after its last gradient, "
    "under checkpointing",
    "[activation_checkpointing]") {
  const Weights p = weights(1);
  ag::Generator data(2), gen(3);
  ag::Tensor h = ag::normal({2, 6}, 0.0, 1.0, data);
  for (int layer = 0; layer < 2; ++layer)
    h = ag::checkpoint([&](const ag::Tensor& a) { return block(a, p, gen); }, h, {p.w, p.b},
                       {&gen});
  std::vector<const ag::TensorImpl*> announced;
  std::vector<bool> final_then;
  {
    const ag::LeafGradReadyHook hook([&](const ag::TensorImpl* leaf) {
      announced.push_back(leaf);
      final_then.push_back(leaf->grad != nullptr);
    });
    ag::sum(h).backward();
  }
  REQUIRE(announced.size() == 2);
  CHECK(std::count(announced.begin(), announced.end(), p.w.impl()) == 1);
  CHECK(std::count(announced.begin(), announced.end(), p.b.impl()) == 1);
  CHECK(final_then == std::vector<bool>{true, true});
}

namespace {

nn::GPTConfig small_model(bool llama) {
  nn::GPTConfig c = ag_test::gpt_config(64, 16, 32, 4, 3, llama ? 0.0 : 0.1);
  if (llama) {
    c.norm = nn::NormKind::rms_norm;
    c.mlp = nn::MlpKind::swiglu;
    c.position = nn::PositionKind::rope;
    c.n_kv_heads = 2;
    c.linear_bias = false;
    c.tie_weights = false;
    c.lora_rank = 4;
    c.lora_dropout = 0.1;
  }
  return c;
}

// The nodes of the graph below root named `name`.
int count_nodes(const ag::Tensor& root, const std::string& name) {
  std::vector<ag::Node*> stack{root.grad_fn().get()}, seen;
  int count = 0;
  while (!stack.empty()) {
    ag::Node* n = stack.back();
    stack.pop_back();
    if (!n || std::find(seen.begin(), seen.end(), n) != seen.end()) continue;
    seen.push_back(n);
    count += name == n->name;
    for (const auto& e : n->next) stack.push_back(e.fn.get());
  }
  return count;
}

// The loss and every trainable gradient of a fixed batch, and the dropout generator after.
std::vector<ag::Tensor> loss_and_grads(nn::GPT& model, ag::Precision precision,
                                       int recomputed_blocks) {
  ag::Generator gen(3);
  const ag::Tensor ids = ag_test::random_ids(gen, 64, {2, 16});
  const ag::Tensor targets = ag_test::random_ids(gen, 64, {2, 16});
  model.zero_grad();
  const ag::AutocastScope scope(precision);
  ag::Tensor loss = model.forward(ids, targets).loss;
  CHECK(count_nodes(loss, "CheckpointBackward") == recomputed_blocks);
  loss.backward();
  std::vector<ag::Tensor> out{loss.detach()};
  for (const auto& p : model.trainable_parameters()) out.push_back(p.grad());
  ag::Generator after = model.dropout_generator();
  out.push_back(
      ag::from_vector(std::vector<double>{static_cast<double>(after.next_u64() >> 12)}, {1}));
  return out;
}

std::unique_ptr<nn::GPT> model_of(const train::RunConfig& run) {
  const nn::FrozenBase base = train::frozen_base(run);
  auto model = std::make_unique<nn::GPT>(run.model, 7, &base);
  model->train();
  nn::pack_frozen_base(*model, base);
  train::freeze_parameters(run, *model);
  return model;
}

}  // namespace

TEST_CASE("a GPT with activation checkpointing has the same loss and gradients bit for bit",
          "[activation_checkpointing]") {
  const bool llama = GENERATE(false, true);
  const auto precision = GENERATE(ag::Precision::fp32, ag::Precision::bf16);
  train::RunConfig run;
  run.model = small_model(llama);
  if (llama) run.base_precision = ag::quant::BasePrecision::q8_0;
  INFO((llama ? "llama LoRA over q8_0" : "gpt2 with dropout")
       << ", " << base::choice_name(precision));
  for (const int threads : {1, 2}) {
    ag::set_num_threads(threads);
    auto plain = model_of(run), recomputing = model_of(run);
    recomputing->set_activation_checkpointing(true);
    const auto a = loss_and_grads(*plain, precision, 0);
    const auto b = loss_and_grads(*recomputing, precision, 3);
    REQUIRE(a.size() == b.size());
    REQUIRE(a.size() > 3);
    for (size_t i = 0; i < a.size(); ++i) CHECK(bit_equal(a[i], b[i]));
  }
  ag::set_num_threads(1);
}

TEST_CASE("train --checkpoint-activations writes the checkpoint a run without it writes",
          "[activation_checkpointing]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = ag_test::tiny_run(dir, 2);
  cfg.model.dropout = 0.1;
  cfg.grad_accum_steps = 2;
  ag_test::run_to_end(cfg);
  train::RunConfig recomputing = cfg;
  recomputing.checkpoint_activations = true;
  recomputing.out = dir.file("recomputing.h5");
  ag_test::run_to_end(recomputing);
  {
    train::RunConfig probe = recomputing;
    probe.out = dir.file("probe.h5");
    CHECK(train::TrainingRun(probe).model().activation_checkpointing());
  }
  const io::Checkpoint a = io::load_checkpoint(cfg.out), b = io::load_checkpoint(recomputing.out);
  CHECK(same_bits(a.model, b.model));
  CHECK(same_bits(a.optimizer->tensors, b.optimizer->tensors));
  // a setting of the machine: not stored, so a resume may turn it on or off
  CHECK_FALSE(b.config.contains("checkpoint_activations"));
}

TEST_CASE("the memory plan holds one block's activations under --checkpoint-activations",
          "[activation_checkpointing]") {
  train::RunConfig cfg;
  cfg.model = ag_test::gpt_config(256, 64, 64, 4, 8, 0.1);
  cfg.batch_size = 4;
  const train::MemoryPlan plain = train::plan_memory(cfg, 1000000, 0);
  cfg.checkpoint_activations = true;
  const train::MemoryPlan recomputing = train::plan_memory(cfg, 1000000, 0);
  const nn::Footprint all = train::model_footprint(cfg.model, false, 4, false);
  const nn::Footprint one = train::model_footprint(cfg.model, false, 4, true);
  // the blocks' terms move to the recomputed ones, every layer's summed; one layer is held
  double blocks = 0;
  for (const auto& t : all.saved)
    if (t.name.rfind("blocks.", 0) == 0) blocks += t.bytes;
  REQUIRE(blocks > 0);
  CHECK(one.recomputed_bytes_per_token() == Approx(blocks / 8));
  const double tokens = 4 * 64;
  const double inputs = 7 * 64 * 4.0;  // each later block's input, float32
  CHECK(static_cast<double>(plain.activations - recomputing.activations) ==
        Approx(tokens * (blocks * 7 / 8 - inputs)).epsilon(1e-6));
  bool named = false;
  for (const auto& [name, bytes] : recomputing.activation_terms)
    named = named || name.find("recomputed in backward") != std::string::npos;
  CHECK(named);
}
