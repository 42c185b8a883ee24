// A frozen base held packed (autograd/quant/packed_weight.h, nn/frozen_base.h): the linear
// and the embedding over a packed weight against the same ops over its dequantized floats
// (bit for bit, float32 and bf16 autocast, 1 and 2 threads), float64 gradient checks of an
// adapter over a packed base, a LoRA GPT over a Q8_0 base against the dequantized model,
// and the run option.
#include <catch2/catch.hpp>

#include "autograd/autocast.h"
#include "autograd/gradcheck.h"
#include "autograd/quant/block_formats.h"
#include "autograd/quant/packed_weight.h"
#include "autograd/threading.h"
#include "nn/frozen_base.h"
#include "support.h"
#include "train/train.h"

using ag::quant::BasePrecision;
using Catch::Matchers::Contains;

namespace {

const ag::quant::PackedFormat& format_of(BasePrecision p) {
  return *ag::quant::packed_format(p);
}

// A frozen [rows, width] weight drawn N(0, 0.05), packed.
ag::Tensor packed_weight(int64_t rows, int64_t width, BasePrecision p, uint64_t seed) {
  ag::Generator gen(seed);
  ag::Tensor w = ag::normal({rows, width}, 0.0, 0.05, gen);
  ag::quant::pack_in_place(w, format_of(p));
  return w;
}

struct LinearResult {
  ag::Tensor y, dx;
};

// y = act(x W^T + b) over the weights (stacked), and dx from a fixed upstream gradient.
LinearResult run_linear(const ag::Tensor& x0, const std::vector<ag::Tensor>& weights,
                        const ag::Tensor& bias, ag::Activation act) {
  ag::Tensor x = x0.detach().clone().requires_grad_();
  ag::Tensor y = weights.size() == 1 ? ag::linear(x, weights[0], bias, act)
                                     : ag::linear(x, weights, std::vector<ag::Tensor>{});
  ag::Generator gen(3);
  y.backward(ag::normal(y.shape(), 0.0, 1.0, gen));
  return {y.detach(), x.grad()};
}

}  // namespace

TEST_CASE("every block format a GGUF model holds is a packed format of the table's layout",
          "[frozen_base]") {
  for (const ag::quant::BlockLayout& l : ag::quant::block_formats()) {
    INFO(l.name);
    const ag::quant::PackedFormat* f = ag::quant::packed_format_named(l.name);
    if (l.format == ag::quant::BlockFormat::q8_k) {  // activations' format: no model holds it
      CHECK(f == nullptr);
      continue;
    }
    REQUIRE(f != nullptr);
    CHECK(f->elements == l.elements);
    CHECK(f->bytes == l.bytes);
    const auto p = base::find_choice<BasePrecision>(l.name);
    REQUIRE(p.has_value());
    CHECK(ag::quant::packed_format(*p) == f);
  }
  CHECK(ag::quant::packed_format(BasePrecision::own) == nullptr);
}

TEST_CASE("a linear over a packed weight equals it over the dequantized floats bit for bit",
          "[frozen_base]") {
  const auto precision = GENERATE(BasePrecision::bf16, BasePrecision::q8_0, BasePrecision::q4_k,
                                  BasePrecision::q4_0, BasePrecision::q4_1, BasePrecision::q5_0,
                                  BasePrecision::q5_1, BasePrecision::q5_k, BasePrecision::q6_k);
  const bool bf16 = GENERATE(false, true);
  INFO(format_of(precision).name << (bf16 ? " under bf16 autocast" : " in float32"));
  const ag::Tensor w = packed_weight(40, 256, precision, 1);
  const ag::Tensor w2 = packed_weight(24, 256, precision, 2);
  const ag::Tensor floats = ag::quant::unpacked(w, ag::DType::Float32);
  const ag::Tensor floats2 = ag::quant::unpacked(w2, ag::DType::Float32);
  ag::Generator gen(5);
  const ag::Tensor x = ag::normal({3, 7, 256}, 0.0, 1.0, gen);
  const ag::Tensor bias = ag::normal({40}, 0.0, 0.1, gen);
  for (const int threads : {1, 2}) {
    ag::set_num_threads(threads);
    const ag::AutocastScope scope(bf16 ? ag::Precision::bf16 : ag::Precision::fp32);
    for (const auto act : {ag::Activation::None, ag::Activation::Gelu}) {
      const LinearResult a = run_linear(x, {w}, bias, act), b = run_linear(x, {floats}, bias, act);
      CHECK(ag_test::bit_equal(a.y, b.y));
      CHECK(ag_test::bit_equal(a.dx, b.dx));
    }
    const LinearResult a = run_linear(x, {w, w2}, {}, ag::Activation::None);
    const LinearResult b = run_linear(x, {floats, floats2}, {}, ag::Activation::None);
    CHECK(ag_test::bit_equal(a.y, b.y));
    CHECK(ag_test::bit_equal(a.dx, b.dx));
  }
  ag::set_num_threads(1);
}

TEST_CASE("an embedding over a packed weight looks up the dequantized rows", "[frozen_base]") {
  const auto precision = GENERATE(BasePrecision::q8_0, BasePrecision::q4_k, BasePrecision::q6_k,
                                  BasePrecision::q5_k, BasePrecision::q4_0, BasePrecision::q5_1);
  const ag::Tensor w = packed_weight(50, 256, precision, 4);
  const ag::Tensor ids = ag::from_vector(std::vector<int64_t>{3, 49, 0, 3}, {2, 2});
  CHECK(ag_test::bit_equal(ag::embedding(w, ids),
                           ag::embedding(ag::quant::unpacked(w, ag::DType::Float32), ids)));
}

TEST_CASE(
    "a packed weight takes no gradient and its elements are read by linear and embedding only",
    "[frozen_base]") {
  ag::Tensor w = packed_weight(8, 32, BasePrecision::q8_0, 1);
  REQUIRE_THROWS_WITH(w.requires_grad_(), Contains("held as q8_0 blocks is frozen"));
  REQUIRE_THROWS_WITH(w.to_vector(), Contains("held as q8_0 blocks"));
  ag::Generator gen(1);
  ag::Tensor trained = ag::normal({8, 48}, 0.0, 1.0, gen);
  REQUIRE_THROWS_WITH(ag::quant::pack_in_place(trained, format_of(BasePrecision::q8_0)),
                      Contains("not a whole number of q8_0's blocks of 32"));
  trained.requires_grad_();
  REQUIRE_THROWS_WITH(ag::quant::pack_in_place(trained, format_of(BasePrecision::bf16)),
                      Contains("requires grad"));
}

// gradcheck in float64 of an adapter over a packed base, x, A and B checked; and the
// analytic gradients equal, bit for bit, those over the dequantized weight in float64
TEST_CASE("float64 gradcheck of LoRA over a packed base equal to the dequantized weight's",
          "[frozen_base]") {
  const auto precision =
      GENERATE(BasePrecision::q8_0, BasePrecision::q4_k, BasePrecision::q6_k, BasePrecision::q5_0);
  const ag::Tensor w = packed_weight(12, 256, precision, 9);
  const ag::Tensor floats = ag::quant::unpacked(w, ag::DType::Float64);
  ag::Generator gen(2);
  auto leaf = [&gen](const ag::Shape& s) {
    return ag::normal(s, 0.0, 0.5, gen, ag::DType::Float64).requires_grad_();
  };
  const std::vector<ag::Tensor> inputs{leaf({2, 3, 256}), leaf({4, 256}), leaf({12, 4})};
  auto model = [](const ag::Tensor& weight) {
    return [weight](const std::vector<ag::Tensor>& in) {
      return ag::gelu(ag::lora_add(ag::linear(in[0], weight), in[0], {{in[1], in[2], 2.0}}));
    };
  };
  const ag::GradcheckResult r = ag::gradcheck(model(w), inputs);
  INFO(r.message);
  CHECK(r.ok);
  auto grads = [&inputs](const ag::TensorFn& fn) {
    std::vector<ag::Tensor> copies;
    for (const auto& t : inputs) copies.push_back(t.detach().clone().requires_grad_());
    ag::sum(ag::mul(fn(copies), fn(copies))).backward();
    std::vector<ag::Tensor> out;
    for (const auto& t : copies) out.push_back(t.grad());
    return out;
  };
  const auto packed = grads(model(w)), dequantized = grads(model(floats));
  for (size_t i = 0; i < inputs.size(); ++i) CHECK(ag_test::bit_equal(packed[i], dequantized[i]));
}

namespace {

nn::GPTConfig lora_gpt(bool llama) {
  nn::GPTConfig c = ag_test::gpt_config(64, 16, 64, 2, 2, 0.0);
  if (llama) {
    c.position = nn::PositionKind::rope;
    c.norm = nn::NormKind::rms_norm;
    c.mlp = nn::MlpKind::swiglu;
    c.n_kv_heads = 1;
    c.linear_bias = false;
  }
  c.lora_rank = 4;
  c.lora_alpha = 8;
  return c;
}

train::RunConfig run_of(const nn::GPTConfig& model, BasePrecision p) {
  train::RunConfig run;
  run.model = model;
  run.base_precision = p;
  return run;
}

// A LoRA GPT whose adapters are away from zero, its frozen base packed (or not).
std::unique_ptr<nn::GPT> lora_model(const train::RunConfig& run) {
  auto model = std::make_unique<nn::GPT>(run.model, 7);
  train::freeze_parameters(run, *model);
  const nn::FrozenBase base = train::frozen_base(run);
  if (base.format) nn::pack_frozen_base(*model, base);
  ag::Generator gen(11);
  ag::NoGradGuard no_grad;
  for (auto& [name, p] : model->named_parameters())
    if (name.find("lora_B") != std::string::npos)
      ag::copy_(p, ag::normal(p.shape(), 0.0, 0.05, gen));
  return model;
}

// The loss and every trainable parameter's gradient on a fixed batch.
std::vector<ag::Tensor> frozen_loss_and_grads(nn::GPT& model, ag::Precision precision) {
  ag::Generator gen(3);
  const ag::Tensor ids = ag_test::random_ids(gen, 64, {2, 16});
  const ag::Tensor targets = ag_test::random_ids(gen, 64, {2, 16});
  model.zero_grad();
  const ag::AutocastScope scope(precision);
  ag::Tensor loss = model.forward(ids, targets).loss;
  loss.backward();
  std::vector<ag::Tensor> out{loss.detach()};
  for (const auto& p : model.trainable_parameters()) out.push_back(p.grad());
  return out;
}

}  // namespace

TEST_CASE("a LoRA GPT over a Q8_0 base gives the dequantized model's loss and gradients exactly",
          "[frozen_base]") {
  const bool llama = GENERATE(false, true);
  const auto precision = GENERATE(ag::Precision::fp32, ag::Precision::bf16);
  INFO((llama ? "llama" : "gpt2") << " " << base::choice_name(precision));
  const train::RunConfig run = run_of(lora_gpt(llama), BasePrecision::q8_0);
  auto packed = lora_model(run);
  auto floats = lora_model(run_of(run.model, BasePrecision::fp32));
  int matrices = 0;
  {
    ag::NoGradGuard no_grad;
    const nn::StateDict theirs = packed->named_parameters();
    nn::StateDict mine = floats->named_parameters();
    for (size_t i = 0; i < mine.size(); ++i)
      if (theirs[i].second.packing()) {
        ag::copy_(mine[i].second, ag::quant::unpacked(theirs[i].second, ag::DType::Float32));
        ++matrices;
      }
  }
  CHECK(matrices >= 1 + 2 * 4);  // the embedding(s), the blocks' projections
  const auto a = frozen_loss_and_grads(*packed, precision),
             b = frozen_loss_and_grads(*floats, precision);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(ag_test::bit_equal(a[i], b[i]));
}

TEST_CASE("a frozen base drawn into its blocks is the model drawn in float32 and then packed",
          "[frozen_base]") {
  const auto p = GENERATE(BasePrecision::bf16, BasePrecision::q8_0, BasePrecision::q4_k);
  const train::RunConfig run = run_of(lora_gpt(true), p);
  const nn::FrozenBase base = train::frozen_base(run);
  nn::GPT drawn(run.model, 7, &base);
  auto after = lora_model(run);
  ag::NoGradGuard no_grad;
  for (auto& [name, t] : after->named_parameters())
    if (name.find("lora_B") != std::string::npos) ag::fill_(t, 0.0);
  const nn::StateDict x = drawn.named_parameters(), y = after->named_parameters();
  REQUIRE(x.size() == y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    INFO(x[i].first);
    REQUIRE(bool(x[i].second.packing()) == bool(y[i].second.packing()));
    if (!x[i].second.packing()) {
      CHECK(ag_test::bit_equal(x[i].second, y[i].second));
      continue;
    }
    const auto bx = ag::quant::packed_bytes(x[i].second), by = ag::quant::packed_bytes(y[i].second);
    CHECK(std::equal(bx.begin(), bx.end(), by.begin(), by.end()));
  }
  // q4_k's blocks of 256 do not fit rows of 64: those matrices fall back to bfloat16
  const int64_t held = nn::held_parameter_bytes(drawn);
  CHECK(held < nn::held_parameter_bytes(*lora_model(run_of(run.model, BasePrecision::fp32))));
}

TEST_CASE("train --base-precision q8_0: a LoRA run over a packed base and refused where all trains",
          "[frozen_base]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = ag_test::tiny_run(dir);
  cfg.model.d_model = 32;
  cfg.model.lora_rank = 4;
  cfg.base_precision = BasePrecision::q8_0;
  cfg.steps = 3;
  train::TrainingRun run(cfg);
  for (int i = 0; i < 3; ++i) REQUIRE(run.train_step().updated);
  int packed = 0;
  for (const auto& [name, p] : run.model().named_parameters()) packed += p.packing() != nullptr;
  CHECK(packed >= 2 + 4);  // the embeddings and the block's projections
  cfg.model.lora_rank = 0;
  REQUIRE_THROWS_WITH(cfg.validate(), Contains("base_precision q8_0 holds the frozen weights"));
}

TEST_CASE("a packed matrix larger than a tile runs tile by tile with the untiled output",
          "[frozen_base]") {
  const bool bf16 = GENERATE(false, true);
  const ag::Tensor w = packed_weight(100, 64, BasePrecision::q8_0, 6);
  const ag::Tensor floats = ag::quant::unpacked(w, ag::DType::Float32);
  ag::Generator gen(5);
  const ag::Tensor x = ag::normal({9, 64}, 0.0, 1.0, gen);
  const ag::AutocastScope scope(bf16 ? ag::Precision::bf16 : ag::Precision::fp32);
  const LinearResult whole = run_linear(x, {floats}, {}, ag::Activation::None);
  ag::quant::set_unpack_tile_weights(64 * 30);  // tiles of 30 rows: 30, 30, 30, 10
  std::vector<LinearResult> tiled;
  for (const int threads : {1, 2}) {
    ag::set_num_threads(threads);
    tiled.push_back(run_linear(x, {w}, {}, ag::Activation::None));
  }
  ag::set_num_threads(1);
  ag::quant::set_unpack_tile_weights(0);
  CHECK(ag_test::bit_equal(tiled[0].y, tiled[1].y));
  CHECK(ag_test::bit_equal(tiled[0].dx, tiled[1].dx));
  // each output element is one dot product, as untiled; dx sums the tiles' products
  const auto a = tiled[0].y.to_vector(), b = whole.y.to_vector();
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == Approx(b[i]).margin(1e-5));
  const auto da = tiled[0].dx.to_vector(), db = whole.dx.to_vector();
  for (size_t i = 0; i < da.size(); ++i) REQUIRE(da[i] == Approx(db[i]).epsilon(1e-3).margin(1e-4));
}

// The checkpoint read as floats (the base's blocks dequantized, as every reader but a run
// takes them): a resume from those packs them again, and Q8_0 blocks quantized from their
// own values are the same blocks. (A resume from the blocks themselves, Q4_K too:
// tests/test_packed_checkpoints.cpp.)
TEST_CASE("a LoRA run over a Q8_0 base resumes bit for bit", "[frozen_base]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = ag_test::tiny_run(dir);
  cfg.model.d_model = 32;
  cfg.model.lora_rank = 4;
  cfg.base_precision = BasePrecision::q8_0;
  cfg.warmup_steps = 0;
  cfg.steps = 6;
  ag_test::run_to_end(cfg);
  const io::Checkpoint straight = io::load_checkpoint(cfg.out);
  REQUIRE(straight.config.at("base_precision") == "q8_0");
  train::RunConfig split = cfg;
  split.out = dir.file("split.h5");
  split.stop_at = 3;
  ag_test::run_to_end(split);
  const io::Checkpoint half = io::load_checkpoint(split.out);
  train::RunConfig resumed = train::RunConfig::from_json(half.config);
  REQUIRE(resumed.base_precision == BasePrecision::q8_0);
  resumed.threads = 1, resumed.out = split.out;
  ag_test::run_to_end(resumed, &half);
  const io::Checkpoint rest = io::load_checkpoint(split.out);
  REQUIRE(rest.step == 6);
  REQUIRE(ag_test::same_bits(rest.model, straight.model));
  REQUIRE(ag_test::same_bits(rest.optimizer->tensors, straight.optimizer->tensors));
}

TEST_CASE("the memory plan counts a packed base at its bytes a weight", "[frozen_base]") {
  train::RunConfig cfg;
  cfg.model = lora_gpt(true);
  const int64_t params = cfg.model.num_parameters();
  const train::MemoryPlan fp32 = train::plan_memory(cfg, params, 0, 1);
  double packed = 0, largest = 0;
  const nn::FrozenBase base = train::frozen_base(run_of(cfg.model, BasePrecision::q8_0));
  for (const auto& [name, shape] : cfg.model.parameter_shapes())
    if (base.packs(name, shape)) {
      packed += static_cast<double>(ag::shape_numel(shape));
      largest = std::max(largest, static_cast<double>(ag::shape_numel(shape)));
    }
  REQUIRE(packed > 0);
  cfg.base_precision = BasePrecision::q8_0;
  const train::MemoryPlan q8 = train::plan_memory(cfg, params, 0, 1);
  CHECK(static_cast<double>(fp32.parameters - q8.parameters) == packed * (4 - 34.0 / 32));
  CHECK(static_cast<double>(q8.base_scratch) == 4 * largest);
  CHECK_THAT(q8.describe(), Contains("q8_0 base"));
  cfg.precision = ag::Precision::bf16;
  CHECK(train::plan_memory(cfg, params, 0, 1).base_scratch == q8.base_scratch / 2);
}

TEST_CASE("the memory plan counts an own base as the file holds each matrix", "[frozen_base]") {
  train::RunConfig cfg;
  cfg.model = lora_gpt(true);
  const int64_t params = cfg.model.num_parameters();
  const train::MemoryPlan fp32 = train::plan_memory(cfg, params, 0, 1);
  cfg.base_precision = BasePrecision::own;
  // an own base of a file of floats: as float32
  CHECK(train::plan_memory(cfg, params, 0, 1).parameters == fp32.parameters);
  // a GGUF import's mix: each matrix at its own format's bytes; a trained one (the LoRA
  // adapter's) and the float32 ones as float32
  const nn::FrozenBase base = train::frozen_base(cfg);
  const std::vector<std::string> formats = {"q8_0", "q5_0", "bf16", "q4_1"};
  double saved = 0;
  size_t k = 0;
  for (const auto& [name, shape] : cfg.model.parameter_shapes()) {
    if (!base.frozen_matrix(name, shape)) {
      if (name.find("lora") != std::string::npos) cfg.file_packed[name] = "q8_0";  // ignored
      continue;
    }
    if (k == formats.size() + 1) continue;  // one frozen matrix left in float32
    const std::string& format = formats[k++ % formats.size()];
    cfg.file_packed[name] = format;
    saved += 4.0 * static_cast<double>(ag::shape_numel(shape)) -
             static_cast<double>(shape[0] * ag::quant::packed_row_bytes(
                                                *ag::quant::packed_format_named(format), shape[1]));
  }
  REQUIRE(k > formats.size());
  const train::MemoryPlan own = train::plan_memory(cfg, params, 0, 1);
  CHECK(static_cast<double>(fp32.parameters - own.parameters) == saved);
  CHECK_THAT(own.describe(), Contains("bf16+q4_1+q5_0+q8_0 base"));
}

TEST_CASE("a frozen matrix drawn a chunk of rows at a time is the whole draw packed",
          "[frozen_base]") {
  const auto p = GENERATE(BasePrecision::bf16, BasePrecision::q8_0);
  INFO(format_of(p).name);
  nn::FrozenBase base;
  base.format = ag::quant::packed_format(p);
  base.frozen = {"m.weight"};
  ag::Generator whole_gen(4), chunk_gen(4);
  ag::Tensor expected = ag::zeros({100, 64});
  ag::quant::pack_into(expected, ag::normal({100, 64}, 0.0, 0.02, whole_gen), format_of(p));
  ag::Tensor drawn = ag::zeros({100, 64});
  int draws = 0;
  // 1,000 bytes a chunk: 3 rows of 64 float32, the last chunk one row
  nn::place_initial_draws(
      &base, "m.weight", drawn,
      [&](int64_t rows) {
        ++draws;
        return ag::normal({rows, 64}, 0.0, 0.02, chunk_gen);
      },
      1000);
  CHECK(draws == 34);
  REQUIRE(drawn.packing() == &format_of(p));
  CHECK_FALSE(drawn.requires_grad());
  const auto a = ag::quant::packed_bytes(drawn), b = ag::quant::packed_bytes(expected);
  CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  CHECK(chunk_gen.next_u64() == whole_gen.next_u64());  // the generator where one draw leaves it
  // a matrix the file gives: drawn the same, chunk by chunk, and given no values
  nn::FrozenBase own;
  own.own = true;
  own.from_file = {"m.weight"};
  ag::Generator skip_gen(4), full_gen(4);
  (void)ag::normal({100, 64}, 0.0, 0.02, full_gen);
  ag::Tensor skipped = ag::zeros({100, 64});
  nn::place_initial_draws(
      &own, "m.weight", skipped,
      [&](int64_t rows) {
        return ag::normal({rows, 64}, 0.0, 0.02, skip_gen);
      },
      1000);
  CHECK(skip_gen.next_u64() == full_gen.next_u64());
}
