// LoRA fine-tuning and frozen weights (docs/finetuning.md): the config rows that describe the
// adapters, the parameters a run trains, the GEMMs a frozen weight does not cost, the
// optimiser state it does not keep, --init-from into a LoRA model and the merge.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/test_hooks.h"
#include "support.h"
#include "train/train.h"

using Catch::Matchers::Contains;

namespace {

nn::GPTConfig lora_config(int64_t rank, int64_t layers = 1) {
  nn::GPTConfig c = ag_test::gpt_config(11, 8, 16, 2, layers, 0.0);
  c.lora_rank = rank;
  c.lora_alpha = 8;
  return c;
}

// A run of two steps, `layers` blocks.
train::RunConfig two_steps(const ag_test::TempDir& dir, int64_t layers) {
  train::RunConfig cfg = ag_test::tiny_run(dir, layers);
  cfg.steps = 2;
  return cfg;
}

// The GEMMs one training step of this run computes.
int64_t gemms_of_a_step(const train::RunConfig& cfg) {
  train::TrainingRun run(cfg);
  const int64_t before = ag::detail::gemm_count();
  REQUIRE(run.train_step().updated);
  return ag::detail::gemm_count() - before;
}

// Every B away from zero, so that the adapters change the model.
void move_adapters(nn::GPT& model, uint64_t seed) {
  ag::Generator gen(seed);
  ag::NoGradGuard no_grad;
  for (auto& [name, p] : model.named_parameters())
    if (name.find("lora_B") != std::string::npos)
      ag::copy_(p, ag::normal(p.shape(), 0.0, 0.05, gen));
}

}  // namespace

TEST_CASE("the lora config rows are refused with one line naming the setting", "[lora]") {
  nn::GPTConfig c = lora_config(4);
  c.lora_targets = "attn.qkv,attn.nope";
  REQUIRE_THROWS_WITH(c.validate(), Contains("'attn.nope' matches no Linear"));
  c = lora_config(17);  // d_model 16: out_proj is 16 x 16
  REQUIRE_THROWS_WITH(c.validate(), Contains("lora_rank 17 is larger than attn.qkv (16 -> 16)"));
  c = lora_config(0);
  c.lora_alpha = 8;
  REQUIRE_THROWS_WITH(c.validate(), Contains("lora_alpha is set but lora_rank is 0"));
  c = lora_config(0);
  c.lora_alpha = nn::GPTConfig().lora_alpha;
  c.lora_dropout = 0.1;
  REQUIRE_THROWS_WITH(c.validate(), Contains("lora_dropout is set but lora_rank is 0"));
  c = lora_config(4);
  c.d_ff = 3;  // fc1 16 -> 3: rank at most 3
  c.lora_targets = "mlp.fc1";
  REQUIRE_THROWS_WITH(c.validate(), Contains("lora_rank 4 is larger than mlp.fc1 (16 -> 3)"));
  c.lora_targets = "attn.out_proj";
  REQUIRE_NOTHROW(c.validate());
}

TEST_CASE("a LoRA model declares its adapters and starts equal to the base model", "[lora]") {
  const nn::GPTConfig cfg = lora_config(2, 2);
  nn::GPT lora(cfg, 7), base(cfg.without_adapters(), 7);
  REQUIRE(cfg.num_parameters() == lora.num_parameters());
  REQUIRE(cfg.parameter_shapes() == lora.named_parameter_shapes());
  // per block six adapted Linears of 16 x 16 (fc1 16 x 64, fc2 64 x 16): 2 (in + out) each
  REQUIRE(lora.num_parameters() - base.num_parameters() == 2 * 2 * (4 * 32 + 80 + 80));
  int adapters = 0;
  for (const auto& [name, shape] : cfg.parameter_shapes())
    adapters += train::is_adapter_parameter(name);
  REQUIRE(adapters == 2 * 6 * 2);
  const auto named = lora.named_parameters();
  REQUIRE(std::any_of(named.begin(), named.end(), [](const auto& e) {
    return e.first == "blocks.1.attn.W_query.lora_A.weight";
  }));
  // the base weights are the base model's (adapters drawn after them), B is zero
  for (const auto& [name, p] : base.named_parameters()) {
    const auto it = std::find_if(named.begin(), named.end(),
                                 [&name = name](const auto& e) { return e.first == name; });
    REQUIRE(ag_test::bit_equal(it->second, p));
  }
  const ag::Tensor ids = ag::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  REQUIRE(ag_test::bit_equal(lora.forward(ids).logits, base.forward(ids).logits));
}

TEST_CASE("merged adapters give the adapted model's logits", "[lora]") {
  nn::GPTConfig cfg = lora_config(3, 2);
  cfg.lora_targets = "attn.qkv,mlp.fc2";
  nn::GPT model(cfg, 3);
  move_adapters(model, 5);
  model.eval();
  const ag::Tensor ids = ag::from_vector(std::vector<int64_t>{1, 2, 3, 4, 9, 10, 0, 5}, {2, 4});
  const std::vector<double> adapted = model.forward(ids).logits.to_vector();
  const std::vector<double> plain =
      nn::GPT(cfg.without_adapters(), 3).forward(ids).logits.to_vector();
  REQUIRE(adapted != plain);
  train::merge_adapters(model);
  for (const auto& [name, p] : model.named_parameters())
    REQUIRE_FALSE(train::is_adapter_parameter(name));
  const std::vector<double> merged = model.forward(ids).logits.to_vector();
  for (size_t i = 0; i < merged.size(); ++i)
    REQUIRE(std::fabs(merged[i] - adapted[i]) <= 1e-6 * std::max(1.0, std::fabs(adapted[i])));
}

TEST_CASE("freezing is decided by name: LoRA's base and freeze patterns while a classifier trains",
          "[lora][freeze]") {
  train::RunConfig cfg;
  const std::vector<std::string> names{"tok_emb.weight",
                                       "blocks.0.attn.W_query.weight",
                                       "blocks.0.attn.W_query.lora_A.weight",
                                       "blocks.0.attn.W_query.lora_B.weight",
                                       "classifier.weight",
                                       "ln_f.weight"};
  REQUIRE(train::frozen_parameters(cfg, names) == std::vector<bool>(6, false));
  cfg.model.lora_rank = 2;
  REQUIRE(train::frozen_parameters(cfg, names) ==
          std::vector<bool>{true, true, false, false, false, true});
  cfg.freeze = "*.lora_B.*";
  REQUIRE(train::frozen_parameters(cfg, names) ==
          std::vector<bool>{true, true, false, true, false, true});
  cfg.model.lora_rank = 0;
  cfg.freeze = "tok_emb.*,blocks.*.attn.*";
  REQUIRE(train::frozen_parameters(cfg, names) ==
          std::vector<bool>{true, true, true, true, false, false});
  cfg.freeze = "tok_emb.*,lm_head.*";
  REQUIRE_THROWS_WITH(train::frozen_parameters(cfg, names),
                      Contains("--freeze 'lm_head.*' matches no parameter"));
  cfg.freeze = "*";
  REQUIRE_THROWS_WITH(train::frozen_parameters(cfg, names), Contains("nothing would train"));
}

TEST_CASE("a frozen weight costs no weight-gradient GEMM", "[lora][freeze]") {
  ag_test::TempDir dir;
  for (int64_t L : {1, 2}) {
    INFO("layers " << L);
    const train::RunConfig full = two_steps(dir, L);
    // every Linear's weight and the tied head's (tok_emb) frozen; pos_emb and the norms
    // train, so every input gradient is still needed: only the weight gradients go, one
    // GEMM per Linear (W_query, W_key and W_value are one fused GEMM) and the head's
    train::RunConfig frozen = full;
    frozen.freeze = "tok_emb.weight,blocks.*.attn.W_*,blocks.*.attn.out_proj.*,blocks.*.mlp.*";
    REQUIRE(gemms_of_a_step(full) - gemms_of_a_step(frozen) == 4 * L + 1);
    // LoRA on the four targets: the base loses its 4 L + 1 weight gradients, and the first
    // block's qkv its input gradient (nothing before it trains); the 6 L adapters' thin
    // products are lora_add's own row kernels, no GEMM
    train::RunConfig lora = full;
    lora.model.lora_rank = 2;
    REQUIRE(gemms_of_a_step(lora) - gemms_of_a_step(full) == -(4 * L + 1) - 1);
  }
}

TEST_CASE("a LoRA run keeps optimiser state for the adapters only", "[lora]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = two_steps(dir, 2);
  cfg.model.lora_rank = 2;
  cfg.model.dropout = 0.1;
  cfg.model.lora_dropout = 0.1;
  train::TrainingRun run(cfg);
  run.after_step(run.train_step());
  for (const auto& [name, p] : run.model().named_parameters()) {
    INFO(name);  // a frozen parameter's gradient is never allocated
    REQUIRE(p.grad().defined() == train::is_adapter_parameter(name));
  }
  while (run.wants_another_step()) run.after_step(run.train_step());
  REQUIRE(run.finish() == 0);
  const io::Checkpoint ckpt = io::load_checkpoint(cfg.out);
  int64_t adapter_elements = 0, adapters = 0;
  for (const auto& [name, t] : ckpt.model)
    if (train::is_adapter_parameter(name)) adapter_elements += t.numel(), ++adapters;
  REQUIRE(adapters == 2 * 6 * 2);
  int64_t state_elements = 0;
  for (const auto& [name, t] : ckpt.optimizer->tensors) {
    INFO(name);
    REQUIRE(train::is_adapter_parameter(name));
    state_elements += t.numel();
  }
  REQUIRE(ckpt.optimizer->tensors.size() == static_cast<size_t>(2 * adapters));  // m and v
  REQUIRE(state_elements == 2 * adapter_elements);
  REQUIRE(train::count_parameters(train::RunConfig::from_json(ckpt.config)).trainable ==
          adapter_elements);
}

TEST_CASE("a LoRA run from a plain checkpoint: the base loads, the adapters start fresh",
          "[lora]") {
  ag_test::TempDir dir;
  train::RunConfig plain = two_steps(dir, 1);
  train::TrainingRun first(plain);
  while (first.wants_another_step()) first.after_step(first.train_step());
  REQUIRE(first.finish() == 0);
  const io::Checkpoint init = io::load_checkpoint(plain.out);

  train::RunConfig cfg = two_steps(dir, 1);
  cfg.init_from = plain.out;
  cfg.out = dir.file("lora.h5");
  cfg.model.lora_rank = 2;
  cfg.model_keys_given = {"lora_rank"};
  train::TrainingRun run(cfg);
  for (const auto& [name, p] : run.model().named_parameters()) {
    INFO(name);
    if (name.find("lora_B") != std::string::npos)
      REQUIRE(p.to_vector() == std::vector<double>(static_cast<size_t>(p.numel()), 0.0));
    if (train::is_adapter_parameter(name)) continue;
    const auto it = std::find_if(init.model.begin(), init.model.end(),
                                 [&name = name](const auto& e) { return e.first == name; });
    REQUIRE(ag_test::bit_equal(p, it->second));
  }
  while (run.wants_another_step()) run.after_step(run.train_step());
  REQUIRE(run.finish() == 0);
  const io::Checkpoint out = io::load_checkpoint(cfg.out);
  for (const auto& [name, t] : init.model) {
    const auto it = std::find_if(out.model.begin(), out.model.end(),
                                 [&name = name](const auto& e) { return e.first == name; });
    REQUIRE(ag_test::bit_equal(t, it->second));  // the base stored bit for bit
  }
  // inference merges: the loaded model is the merged checkpoint's
  const io::Checkpoint merged = train::merged_checkpoint(out);
  REQUIRE(train::RunConfig::from_json(merged.config).model.lora_rank == 0);
  REQUIRE_FALSE(merged.optimizer);
  const auto a = train::model_from_checkpoint(out), b = train::model_from_checkpoint(merged);
  const auto pa = a->named_parameters(), pb = b->named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) REQUIRE(ag_test::bit_equal(pa[i].second, pb[i].second));
}

// lora_add at a training step's shapes, in float32: its row kernels (chunks of rows, their
// partial sums of dA and dB added in chunk order) against the same terms as separate
// matmuls, and the same bits on one thread and two
TEST_CASE("lora_add's float32 output and gradients match separate matmuls on any thread count",
          "[lora]") {
  const int64_t rows = 509, in = 520, out = 258, width = out + 37;  // odd: every tail runs
  ag::Generator gen(4);
  auto leaf = [&gen](const ag::Shape& s) { return ag::normal(s, 0.0, 0.5, gen).requires_grad_(); };
  const std::vector<ag::Tensor> inputs{leaf({rows, width}), leaf({rows, in}), leaf({5, in}),
                                       leaf({out, 5}),      leaf({3, in}),    leaf({30, 3})};
  auto run = [&inputs](bool fused) {
    std::vector<ag::Tensor> t;
    for (const auto& x : inputs) t.push_back(x.detach().clone().requires_grad_());
    ag::Tensor y;
    if (fused) {
      y = ag::lora_add(t[0], t[1], {{t[2], t[3], 0.5, 0}, {t[4], t[5], 2.0, out + 7}});
    } else {
      const ag::Tensor first = ag::matmul(ag::matmul(t[1], t[2].t()) * 0.5, t[3].t());
      const ag::Tensor second = ag::matmul(ag::matmul(t[1], t[4].t()) * 2.0, t[5].t());
      y = t[0] + ag::cat({first, ag::zeros({rows, 7}), second}, -1);
    }
    ag::sum(ag::mul(y, y)).backward();
    std::vector<ag::Tensor> got{y.detach()};
    for (const auto& x : t) got.push_back(x.grad());
    return got;
  };
  ag::set_num_threads(1);
  const auto one = run(true), reference = run(false);
  ag::set_num_threads(2);
  const auto two = run(true);
  ag::set_num_threads(1);
  for (size_t i = 0; i < one.size(); ++i) {
    INFO("tensor " << i);
    CHECK(ag_test::bit_equal(one[i], two[i]));
    const double scale = ag_test::max_abs_diff(reference[i], ag::zeros_like(reference[i]));
    CHECK(ag_test::max_abs_diff(one[i], reference[i]) <= 1e-5 * scale);
  }
}
