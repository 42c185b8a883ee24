// A quantized GGUF read keeping its blocks (interop::read_gguf's keep_blocks, `import
// --keep-blocks`): each quantized matrix held as the file's bytes, which dequantize to what
// the plain read gives bit for bit; recorded as a frozen base (freeze, base_precision own);
// float tensors stay float; a LoRA run from the checkpoint holds the blocks as they are, a run
// training every weight converts them; hostile blocks are refused naming the tensor.
// (tests/reference/gguf_blocks_reference.py holds the bytes to an independent reader.)
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <set>
#include <span>

#include "autograd/quant/block_formats.h"
#include "autograd/quant/packed_weight.h"
#include "interop/formats.h"
#include "interop/gguf.h"
#include "interop/gguf_format.h"
#include "interop_support.h"
#include "support.h"
#include "train/train.h"

using Catch::Matchers::Contains;
using interop::InputBytes;
using interop::ModelFiles;
namespace gguf = interop::gguf;

namespace {

std::string quantized(const ModelFiles& m, const char* format) {
  std::string bytes;
  interop::write_gguf(m, interop::GgufDtype(*ag::quant::layout_named(format)), "test",
                      [&](const char* d, size_t n) { bytes.append(d, n); });
  return bytes;
}

ModelFiles keep_blocks_read(const std::string& bytes, bool keep_blocks) {
  return interop::read_gguf(InputBytes::of(bytes, "model.gguf"), keep_blocks);
}

// (std::equal: clang-14's ranges do not take libstdc++'s spans everywhere)
bool same_bytes(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

const gguf::TensorInfo& info_of(const gguf::File& f, const std::string& name) {
  for (const auto& t : f.tensors)
    if (t.name == name) return t;
  FAIL("no tensor " << name);
  throw std::logic_error("unreachable");
}

// The kept read against the plain one: the same names and shapes; each packed tensor's
// values the plain floats bit for bit; the formats of the file's blocks. Returns them.
std::set<std::string> require_kept(const ModelFiles& kept, const ModelFiles& plain) {
  REQUIRE(kept.weights.size() == plain.weights.size());
  std::set<std::string> formats;
  for (size_t i = 0; i < kept.weights.size(); ++i) {
    const auto& [name, t] = kept.weights[i];
    INFO(name);
    REQUIRE(name == plain.weights[i].first);
    REQUIRE(t.shape() == plain.weights[i].second.shape());
    if (!t.packing()) {
      REQUIRE(ag_test::bit_equal(t, plain.weights[i].second));
      continue;
    }
    formats.insert(t.packing()->name);
    REQUIRE(
        ag_test::bit_equal(ag::quant::unpacked(t, ag::DType::Float32), plain.weights[i].second));
  }
  return formats;
}

}  // namespace

TEST_CASE("a quantized GGUF read keeping blocks holds the file's bytes as they dequantize",
          "[gguf][keep_blocks]") {
  const ModelFiles gpt2 =
      interop_test::random_model(interop_test::gpt2_like(300, 16, 256, 4, 1), 3);
  SECTION("GPT-2 in Q4_K (the head Q6_K), Q6_K, Q5_K, Q8_0 and Q4_1") {
    const std::map<std::string, std::set<std::string>> expected = {{"q4_k", {"q4_k", "q6_k"}},
                                                                   {"q6_k", {"q6_k"}},
                                                                   {"q5_k", {"q5_k", "q6_k"}},
                                                                   {"q8_0", {"q8_0"}},
                                                                   {"q4_1", {"q4_1", "q6_k"}}};
    for (const auto& [format, held] : expected) {
      INFO(format);
      const std::string bytes = quantized(gpt2, format.c_str());
      const ModelFiles kept = keep_blocks_read(bytes, true);
      CHECK(require_kept(kept, keep_blocks_read(bytes, false)) == held);
      // byte for byte: a tensor of one part, unpermuted (ffn_down is fc2's rows as they are)
      const gguf::File f = gguf::read_header(InputBytes::of(bytes, "model.gguf"));
      const gguf::TensorInfo& down = info_of(f, "blk.0.ffn_down.weight");
      for (const auto& [name, t] : kept.weights)
        if (name == "blocks.0.mlp.fc2.weight") {
          const auto b = ag::quant::packed_bytes(t);
          REQUIRE(b.size() == down.bytes());
          REQUIRE(std::memcmp(b.data(), bytes.data() + f.data_start + down.offset, b.size()) == 0);
        }
    }
  }
  SECTION("the Llama family, whose q and k rows are permuted, in Q4_K's fallbacks") {
    for (const auto& [arch, config] : interop_test::llama_family_like()) {
      INFO(arch);
      const std::string bytes = quantized(interop_test::random_model(config, 5), "q4_k");
      CHECK(!require_kept(keep_blocks_read(bytes, true), keep_blocks_read(bytes, false)).empty());
    }
  }
  SECTION("a file of floats reads as ever") {
    const std::string bytes = quantized(gpt2, "q8_0");
    std::string floats;
    interop::write_gguf(gpt2, interop::StoredType::f32, "test",
                        [&](const char* d, size_t n) { floats.append(d, n); });
    CHECK(require_kept(keep_blocks_read(floats, true), keep_blocks_read(floats, false)).empty());
  }
}

TEST_CASE("an import keeping blocks is recorded as a frozen base a LoRA run holds as it is",
          "[gguf][keep_blocks]") {
  ag_test::TempDir dir;
  const nn::GPTConfig shape = interop_test::gpt2_like(257, 16, 256, 4, 1);  // the byte vocabulary
  const std::string bytes = quantized(interop_test::random_model(shape, 4), "q4_k");
  ModelFiles m = keep_blocks_read(bytes, true);
  m.tokenizer.emplace();
  m.tokenizer->type = "byte";
  ModelFiles plain = keep_blocks_read(bytes, false);
  plain.tokenizer = m.tokenizer;
  io::save_checkpoint(dir.file("plain.h5"), interop::checkpoint_of(plain));
  std::set<std::string> packed;
  for (const auto& [name, t] : m.weights)
    if (t.packing()) packed.insert(name);
  REQUIRE(packed.size() >= 4);
  const io::Checkpoint c = interop::checkpoint_of(m);
  const train::RunConfig recorded = train::RunConfig::from_json(c.config);
  CHECK(recorded.base_precision == ag::quant::BasePrecision::own);
  io::save_checkpoint(dir.file("kept.h5"), c);
  const io::Checkpoint file = io::load_checkpoint(dir.file("kept.h5"), {.keep_packed = true});

  train::RunConfig cfg = ag_test::tiny_run(dir);
  cfg.init_from = dir.file("kept.h5");
  cfg.out = dir.file("run.h5");
  SECTION("LoRA: each block tensor held as the file's bytes") {
    cfg.model.lora_rank = 4;
    cfg.model_keys_given = {"lora_rank"};
    const train::TrainingRun run(cfg);
    // built without the float32 matrices, the blocks adopted: every draw as from the floats
    train::RunConfig from_floats = cfg;
    from_floats.init_from = dir.file("plain.h5");
    const train::TrainingRun twin(from_floats);
    const nn::StateDict mine = run.model().named_parameters(),
                        theirs = twin.model().named_parameters();
    REQUIRE(mine.size() == theirs.size());
    for (size_t i = 0; i < mine.size(); ++i)
      if (!mine[i].second.packing()) CHECK(ag_test::bit_equal(mine[i].second, theirs[i].second));
    CHECK(run.config().base_precision == ag::quant::BasePrecision::own);
    std::map<std::string, ag::Tensor> held;
    for (const auto& [name, p] : run.model().named_parameters()) held.emplace(name, p);
    for (const auto& [name, t] : file.model) {
      INFO(name);
      REQUIRE(held.at(name).packing() == t.packing());
      if (t.packing())
        CHECK(same_bytes(ag::quant::packed_bytes(held.at(name)), ag::quant::packed_bytes(t)));
    }
  }
  SECTION("every weight trained: the blocks converted to float32") {
    const train::TrainingRun run(cfg);
    CHECK(run.config().base_precision == ag::quant::BasePrecision::fp32);
    for (const auto& [name, p] : run.model().named_parameters()) CHECK(!p.packing());
  }
}

TEST_CASE("blocks kept from a GGUF are refused when a scale is not finite", "[gguf][keep_blocks]") {
  const std::string good =
      quantized(interop_test::random_model(interop_test::gpt2_like(300, 16, 64, 4, 1), 6), "q8_0");
  const gguf::File f = gguf::read_header(InputBytes::of(good, "model.gguf"));
  const gguf::TensorInfo& down = info_of(f, "blk.0.ffn_down.weight");
  std::string bad = good;
  const size_t at = f.data_start + down.offset + 34 * 3;  // the fourth block's d
  bad[at] = 0x00, bad[at + 1] = 0x7e;                     // a NaN half
  for (const bool keep : {false, true}) {
    try {
      keep_blocks_read(bad, keep);
      FAIL("a NaN scale read");
    } catch (const interop::InteropError& e) {
      const std::string w = e.what();
      CHECK_THAT(w,
                 Contains("model.gguf: tensor blocks.0.mlp.fc2.weight holds a non-finite value"));
      CHECK(w.find('\n') == std::string::npos);
    }
  }
}
