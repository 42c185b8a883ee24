// A frozen base held packed, in checkpoints (docs/checkpoint.md, "A frozen base held as blocks"):
// written as its blocks (no inflation), read back as those very blocks by a run that holds them so
// (an exact resume, for Q4_K too), and as their dequantized floats by every other reader; an
// --init-from keeps the file's own format unless --base-precision converts it.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <random>

#include "autograd/quant/packed_weight.h"
#include "nn/frozen_base.h"
#include "support.h"
#include "train/train.h"

using ag::quant::BasePrecision;
using Catch::Matchers::Contains;

namespace {

// The same bytes (std::equal: clang-14's ranges do not take libstdc++'s spans everywhere).
template <typename A, typename B>
bool packed_same_bytes(const A& a, const B& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

// A LoRA run whose base rows are whole Q4_K blocks (d_model 256), a few steps long.
train::RunConfig packed_lora_run(const ag_test::TempDir& dir, BasePrecision base) {
  train::RunConfig cfg = ag_test::tiny_run(dir);
  cfg.model.d_model = 256;
  cfg.model.lora_rank = 4;
  cfg.base_precision = base;
  cfg.warmup_steps = 0;
  cfg.steps = 6;
  return cfg;
}

io::Checkpoint kept(const std::string& path) {
  return io::load_checkpoint(path, {.keep_packed = true});
}

// cfg stopped after step 3 into split.h5 of dir, then resumed from that file to its end: the
// file the resume leaves (blocks kept), the resumed config's base required to be `base`.
io::Checkpoint stopped_and_resumed(const train::RunConfig& cfg, const ag_test::TempDir& dir,
                                   BasePrecision base) {
  train::RunConfig split = cfg;
  split.out = dir.file("split.h5");
  split.stop_at = 3;
  ag_test::run_to_end(split);
  const io::Checkpoint half = kept(split.out);
  train::RunConfig resumed = train::RunConfig::from_json(half.config);
  REQUIRE(resumed.base_precision == base);
  resumed.threads = 1, resumed.out = split.out;
  ag_test::run_to_end(resumed, &half);
  return kept(split.out);
}

// The same names, and each tensor the same: packed ones the same format and bytes.
bool same_held_bits(const nn::StateDict& a, const nn::StateDict& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const ag::Tensor &x = a[i].second, &y = b[i].second;
    if (a[i].first != b[i].first || x.shape() != y.shape() || x.packing() != y.packing())
      return false;
    if (x.packing() ? !packed_same_bytes(ag::quant::packed_bytes(x), ag::quant::packed_bytes(y))
                    : x.to_vector() != y.to_vector())
      return false;
  }
  return true;
}

int64_t file_bytes(const std::string& path) {
  return static_cast<int64_t>(std::filesystem::file_size(path));
}

}  // namespace

TEST_CASE("a packed base is written as its blocks and read back as them or as their floats",
          "[packed_checkpoint]") {
  const BasePrecision base =
      GENERATE(BasePrecision::bf16, BasePrecision::q8_0, BasePrecision::q4_k, BasePrecision::q4_0,
               BasePrecision::q4_1, BasePrecision::q5_0, BasePrecision::q5_1, BasePrecision::q5_k,
               BasePrecision::q6_k);
  const ag::quant::PackedFormat& format = *ag::quant::packed_format(base);
  ag_test::TempDir dir;
  train::RunConfig cfg = packed_lora_run(dir, base);
  cfg.steps = 2;
  train::TrainingRun run(cfg);
  REQUIRE(run.train_step().updated);
  const nn::StateDict live = run.model().named_parameters();
  io::Checkpoint c;
  c.config = cfg.to_json();
  c.model = live;
  c.tokenizer.type = "byte";
  io::save_checkpoint(dir.file("packed.h5"), c);

  const io::Checkpoint blocks = kept(dir.file("packed.h5"));
  REQUIRE(same_held_bits(blocks.model, live));
  const io::Checkpoint floats = io::load_checkpoint(dir.file("packed.h5"));
  int64_t base_weights = 0;
  for (size_t i = 0; i < live.size(); ++i) {
    const ag::Tensor& p = live[i].second;
    REQUIRE(!floats.model[i].second.packing());
    if (!p.packing()) continue;
    CHECK(p.packing() == &format);  // every row a whole number of blocks
    CHECK(floats.packed.at(live[i].first) == format.name);
    CHECK(ag_test::bit_equal(floats.model[i].second, ag::quant::unpacked(p, ag::DType::Float32)));
    base_weights += p.numel();
  }
  REQUIRE(base_weights > 0);
  // no inflation: the file of blocks against the same checkpoint written in float32
  io::Checkpoint inflated = floats;
  io::save_checkpoint(dir.file("floats.h5"), inflated);
  const double saved =
      static_cast<double>(file_bytes(dir.file("floats.h5")) - file_bytes(dir.file("packed.h5")));
  const double per_weight =
      static_cast<double>(format.bytes) / static_cast<double>(format.elements);
  const double expected = static_cast<double>(base_weights) * (4 - per_weight);
  INFO(format.name << ": the base's " << base_weights << " weights saved " << saved << " bytes");
  CHECK(saved == Approx(expected).epsilon(0.01));
}

TEST_CASE("a LoRA run over a Q8_0, Q4_K, Q6_K or Q5_0 base resumes bit for bit, blocks and all",
          "[packed_checkpoint]") {
  const BasePrecision base =
      GENERATE(BasePrecision::q8_0, BasePrecision::q4_k, BasePrecision::q6_k, BasePrecision::q5_0);
  ag_test::TempDir dir;
  const train::RunConfig cfg = packed_lora_run(dir, base);
  ag_test::run_to_end(cfg);
  const io::Checkpoint straight = kept(cfg.out);
  REQUIRE(!straight.packed.empty());
  const io::Checkpoint rest = stopped_and_resumed(cfg, dir, base);
  REQUIRE(rest.step == 6);
  REQUIRE(rest.packed == straight.packed);
  REQUIRE(same_held_bits(rest.model, straight.model));
  REQUIRE(ag_test::same_bits(rest.optimizer->tensors, straight.optimizer->tensors));
}

// Blocks no quantizer would make from their own values (random levels, scales and minimums):
// a resume that quantized the file's weights again would change them.
TEST_CASE("a resume takes the file's blocks as they are, never quantized again",
          "[packed_checkpoint]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = packed_lora_run(dir, BasePrecision::q4_k);
  cfg.stop_at = 1;
  ag_test::run_to_end(cfg);
  io::Checkpoint half = kept(cfg.out);
  const std::string name = "blocks.0.mlp.fc1.weight";
  auto at = std::find_if(half.model.begin(), half.model.end(),
                         [&](const auto& e) { return e.first == name; });
  REQUIRE(at != half.model.end());
  const ag::quant::PackedFormat& q4_k = *ag::quant::packed_format(BasePrecision::q4_k);
  std::vector<uint8_t> bytes(ag::quant::packed_bytes(at->second).size());
  std::mt19937 rng(7);
  for (size_t i = 0; i < bytes.size(); ++i)  // d and dmin the half 2^-10, the rest random
    bytes[i] = i % 144 < 4 ? (i % 2 ? 0x14 : 0x00) : static_cast<uint8_t>(rng());
  at->second = ag::quant::packed_tensor(at->second.shape(), q4_k, bytes);
  io::save_checkpoint(dir.file("random.h5"), half);
  const io::Checkpoint random = kept(dir.file("random.h5"));
  train::RunConfig resumed = train::RunConfig::from_json(random.config);
  resumed.threads = 1, resumed.out = dir.file("random.h5"), resumed.steps = 2;
  ag_test::run_to_end(resumed, &random);
  const io::Checkpoint after = kept(dir.file("random.h5"));
  REQUIRE(after.step == 2);
  for (const auto& [n, t] : after.model)
    if (n == name) CHECK(packed_same_bytes(ag::quant::packed_bytes(t), bytes));
  // what quantizing their values again gives: other blocks (this test could fail)
  ag::Tensor again = ag::quant::unpacked(at->second, ag::DType::Float32);
  ag::quant::pack_in_place(again, q4_k);
  CHECK_FALSE(packed_same_bytes(ag::quant::packed_bytes(again), bytes));
}

TEST_CASE("train init-from a file of blocks keeps their format unless --base-precision converts",
          "[packed_checkpoint]") {
  ag_test::TempDir dir;
  train::RunConfig first = packed_lora_run(dir, BasePrecision::q4_k);
  first.steps = 2;
  ag_test::run_to_end(first);
  const io::Checkpoint blocks = kept(first.out);

  auto start_from = [&](std::vector<std::string> given, BasePrecision asked) {
    train::RunConfig cfg = ag_test::tiny_run(dir);
    cfg.init_from = first.out;
    cfg.model.lora_rank = 4;
    cfg.model_keys_given = {"lora_rank"};
    for (const std::string& key : given) cfg.model_keys_given.push_back(key);
    cfg.base_precision = asked;
    cfg.out = dir.file("second.h5");
    return std::make_unique<train::TrainingRun>(cfg);
  };
  SECTION("the file's own: the very blocks, and its precision recorded") {
    const auto run = start_from({}, BasePrecision::fp32);
    CHECK(run->config().base_precision == BasePrecision::q4_k);
    std::map<std::string, ag::Tensor> held;
    for (const auto& [name, p] : run->model().named_parameters()) held.emplace(name, p);
    for (const auto& [name, t] : blocks.model) {
      if (!t.packing()) continue;
      const ag::Tensor& p = held.at(name);
      REQUIRE(p.packing() == t.packing());
      REQUIRE(packed_same_bytes(ag::quant::packed_bytes(p), ag::quant::packed_bytes(t)));
    }
  }
  SECTION("given: converted from the dequantized values") {
    const auto run = start_from({"base_precision"}, BasePrecision::q8_0);
    CHECK(run->config().base_precision == BasePrecision::q8_0);
    for (const auto& [name, p] : run->model().named_parameters())
      if (blocks.packed.contains(name))
        CHECK(p.packing() == ag::quant::packed_format(BasePrecision::q8_0));
  }
  SECTION("given fp32: every weight float32 again") {
    const auto run = start_from({"base_precision"}, BasePrecision::fp32);
    for (const auto& [name, p] : run->model().named_parameters()) CHECK(!p.packing());
  }
}

TEST_CASE("a file's blocks are refused for a weight its config trains", "[packed_checkpoint]") {
  ag_test::TempDir dir;
  train::RunConfig cfg = packed_lora_run(dir, BasePrecision::q8_0);
  cfg.steps = 1;
  ag_test::run_to_end(cfg);
  io::Checkpoint c = kept(cfg.out);
  for (const char* key : {"lora_rank", "lora_alpha", "lora_dropout", "lora_targets"})
    c.config.erase(key);  // no adapters: every weight trains, and blocks cannot
  nn::StateDict base_only;
  for (const auto& [name, t] : c.model)
    if (!train::is_adapter_parameter(name)) base_only.emplace_back(name, t);
  c.model = base_only;
  c.optimizer.reset();
  io::save_checkpoint(dir.file("lying.h5"), c);
  const io::Checkpoint back = io::load_checkpoint(dir.file("lying.h5"));
  REQUIRE_THROWS_WITH(train::model_from_checkpoint(back),
                      Contains("lying.h5") && Contains("is held as q8_0 blocks, but the file's "
                                                       "config trains it"));
}

namespace {

// A file as a GGUF import keeping blocks writes it (base_precision own): a LoRA run's base
// whose matrices are in several formats, as a Q4_K_M file's are (Q4_K, Q6_K, Q5_0), and
// the token embedding float32 (a GGUF's F16 or F32 tensor).
std::string mixed_file(const ag_test::TempDir& dir) {
  train::RunConfig cfg = packed_lora_run(dir, BasePrecision::q4_k);
  cfg.steps = 1;
  ag_test::run_to_end(cfg);
  io::Checkpoint c = kept(cfg.out);
  const std::map<std::string, BasePrecision> other = {
      {"blocks.0.mlp.fc2.weight", BasePrecision::q6_k},
      {"blocks.0.attn.W_value.weight", BasePrecision::q5_0},
      {"blocks.0.attn.W_key.weight", BasePrecision::q5_1}};
  for (auto& [name, t] : c.model) {
    if (!t.packing()) continue;
    ag::Tensor values = ag::quant::unpacked(t, ag::DType::Float32);
    if (const auto it = other.find(name); it != other.end())
      ag::quant::pack_in_place(values, *ag::quant::packed_format(it->second));
    else if (name != "tok_emb.weight")
      continue;
    t = values;
    if (!values.packing()) c.packed.erase(name);
  }
  c.config["base_precision"] = "own";
  c.optimizer.reset();
  io::save_checkpoint(dir.file("mixed.h5"), c);
  return dir.file("mixed.h5");
}

}  // namespace

TEST_CASE("base_precision own: a run from a file of mixed blocks holds each as the file does",
          "[packed_checkpoint]") {
  ag_test::TempDir dir;
  const std::string mixed = mixed_file(dir);
  const io::Checkpoint file = kept(mixed);
  std::map<std::string, std::string> formats;
  for (const auto& [name, t] : file.model)
    if (t.packing()) formats[t.packing()->name] = name;
  REQUIRE(formats.size() == 4);  // q4_k, q6_k, q5_0, q5_1
  train::RunConfig cfg = ag_test::tiny_run(dir);
  cfg.init_from = mixed;
  cfg.model.lora_rank = 4;
  cfg.model_keys_given = {"lora_rank"};
  cfg.out = dir.file("straight.h5");
  cfg.warmup_steps = 0;
  {
    const train::TrainingRun run(cfg);
    CHECK(run.config().base_precision == BasePrecision::own);
    std::map<std::string, ag::Tensor> held;
    for (const auto& [name, p] : run.model().named_parameters()) held.emplace(name, p);
    for (const auto& [name, t] : file.model) {
      if (train::is_adapter_parameter(name)) continue;
      INFO(name);
      const ag::Tensor& p = held.at(name);
      REQUIRE(p.packing() == t.packing());  // float32 stays so: nothing packed anew
      if (t.packing())
        REQUIRE(packed_same_bytes(ag::quant::packed_bytes(p), ag::quant::packed_bytes(t)));
    }
  }
  ag_test::run_to_end(cfg);
  const io::Checkpoint straight = kept(cfg.out);
  const io::Checkpoint rest = stopped_and_resumed(cfg, dir, BasePrecision::own);
  REQUIRE(rest.step == 6);
  REQUIRE(rest.packed == straight.packed);
  REQUIRE(rest.packed == file.packed);
  REQUIRE(same_held_bits(rest.model, straight.model));
  REQUIRE(ag_test::same_bits(rest.optimizer->tensors, straight.optimizer->tensors));
}
