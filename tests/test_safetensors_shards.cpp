// interop/safetensors_shards.h: `export --format hf --max-shard-size` cuts the weights where
// huggingface_hub's splitter (save_pretrained's) cuts them, names the shards and writes the
// index as transformers does, and `import` reads the shards back bit for bit; sizes are read
// as huggingface_hub reads them (and KiB..TiB), and anything else is refused naming the option.
// (The index against an independent reader and PyTorch's model:
// tests/reference/hf_llama_reference.py.)
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "base/posix_file.h"
#include "cli/cli.h"
#include "interop/formats.h"
#include "interop/hf_gpt2.h"
#include "interop/hf_llama.h"
#include "interop/safetensors_shards.h"
#include "interop_support.h"
#include "io/checkpoint.h"
#include "support.h"

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// Float32 tensors of these many bytes each (a multiple of 4), named t0, t1, ...
std::vector<interop::SafetensorsTensor> tensors_of_bytes(const std::vector<int64_t>& bytes) {
  std::vector<interop::SafetensorsTensor> t;
  for (size_t i = 0; i < bytes.size(); ++i)
    t.push_back({"t" + std::to_string(i), {bytes[i] / 4}, [](float*) {}});
  return t;
}

std::vector<std::vector<size_t>> planned(const std::vector<int64_t>& bytes, uint64_t limit) {
  return interop::plan_shards(tensors_of_bytes(bytes), interop::StoredType::f32, limit);
}

std::string size_error(const std::string& text) {
  try {
    interop::parse_shard_size(text, "--max-shard-size");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  FAIL("read '" << text << "' as a size");
  return "";
}

std::set<std::string> files_in(const std::string& folder) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(folder)) names.insert(e.path().filename().string());
  return names;
}

}  // namespace

TEST_CASE("shard sizes are read as huggingface_hub reads them, anything else refused by name",
          "[interop][shards]") {
  using interop::parse_shard_size;
  CHECK(parse_shard_size("5GB", "o") == 5'000'000'000);
  CHECK(parse_shard_size("500MB", "o") == 500'000'000);
  CHECK(parse_shard_size("100kb", "o") == 100'000);
  CHECK(parse_shard_size("2GiB", "o") == uint64_t{2} << 30);
  CHECK(parse_shard_size("3MiB", "o") == uint64_t{3} << 20);
  CHECK(parse_shard_size("1TB", "o") == 1'000'000'000'000);
  CHECK(parse_shard_size("1.5GB", "o") == 1'500'000'000);
  CHECK(parse_shard_size("0.5KiB", "o") == 512);
  CHECK(parse_shard_size("1000", "o") == 1000);
  CHECK(parse_shard_size("7B", "o") == 7);
  for (const char* bad : {"", "GB", "5XB", "-1GB", "0", "0.1", "nan", "infGB", "1e3GB", " 5GB",
                          "5 GB", "5GB ", "2000000000TB", "5G"}) {
    INFO(bad);
    CHECK_THAT(size_error(bad), Contains("--max-shard-size must be a size such as 5GB"));
  }
}

TEST_CASE("shards are cut in order where huggingface_hub's splitter cuts them",
          "[interop][shards]") {
  using Plan = std::vector<std::vector<size_t>>;
  // its docstring's example: 10 GB, weights of 6, 6, 2, 6, 2, 2 GB -> [6], [6+2], [6+2+2]
  CHECK(planned({24, 24, 8, 24, 8, 8}, 40) == Plan{{0}, {1, 2}, {3, 4, 5}});
  // a tensor exactly at the limit fills a shard; one past it is alone, in a shard listed
  // before the shard still being filled
  CHECK(planned({40, 4}, 40) == Plan{{0}, {1}});
  CHECK(planned({8, 48, 12, 36}, 40) == Plan{{1}, {0, 2}, {3}});
  CHECK(planned({8, 8, 8}, 40) == Plan{{0, 1, 2}});
  CHECK(planned({}, 40).empty());
  // sizes are the written type's: 10 BF16 elements are 20 bytes
  const auto ten = tensors_of_bytes({40, 40});
  CHECK(interop::plan_shards(ten, interop::StoredType::bf16, 40) == Plan{{0, 1}});
  CHECK(interop::plan_shards(ten, interop::StoredType::f32, 40) == Plan{{0}, {1}});
}

TEST_CASE("a model past the shard size is written as shards and an index, and read back exactly",
          "[interop][shards]") {
  ag_test::TempDir dir;
  for (const auto& [name, config] : interop_test::llama_family_like()) {
    INFO(name);
    const interop::ModelFiles m = interop_test::random_model(config, 3);
    const std::string folder = dir.file(name);
    fs::create_directories(folder);
    interop::write_hf_llama(m, folder, interop::StoredType::bf16, 1500);
    const auto index = nlohmann::json::parse(
        base::read_input_file(folder + "/model.safetensors.index.json", "index"));
    const auto& weight_map = index.at("weight_map");
    std::set<std::string> shards;
    for (const auto& [tensor, file] : weight_map.items()) shards.insert(file.get<std::string>());
    const size_t n = shards.size();
    REQUIRE(n > 2);
    std::set<std::string> expected;
    for (size_t i = 1; i <= n; ++i)
      expected.insert(fmt::format("model-{:05d}-of-{:05d}.safetensors", i, n));
    CHECK(shards == expected);
    expected.insert({"config.json", "model.safetensors.index.json"});
    CHECK(files_in(folder) == expected);
    CHECK_FALSE(fs::exists(folder + "/model.safetensors"));
    uint64_t total = 0;
    size_t tensors = 0;
    for (const auto& shard : shards) {
      interop::SafetensorsReader in(folder + "/" + shard);
      uint64_t bytes = 0;
      for (const auto& e : in.entries()) {
        CHECK(weight_map.at(e.name) == shard);
        bytes += e.end - e.begin;
        ++tensors;
      }
      CHECK((bytes <= 1500 || in.entries().size() == 1));
      total += bytes;
    }
    CHECK(tensors == weight_map.size());
    CHECK(index.at("metadata").at("total_size") == total);
    const interop::ModelFiles back = interop::import_model(folder, "");
    interop_test::require_same_weights(back, interop_test::bf16_rounded(m));
  }
}

TEST_CASE("a model within the shard size is one model.safetensors with no index",
          "[interop][shards]") {
  ag_test::TempDir dir;
  const auto [name, config] = interop_test::llama_family_like().front();
  const interop::ModelFiles m = interop_test::random_model(config, 4);
  interop::export_model(m, "hf", dir.file("whole"));
  CHECK(files_in(dir.file("whole")).count("model.safetensors") == 1);
  CHECK_FALSE(fs::exists(dir.file("whole/model.safetensors.index.json")));
  // GPT-2's writer shards alike
  const interop::ModelFiles gpt2 =
      interop_test::random_model(interop_test::gpt2_like(50, 8, 16, 2, 2), 5);
  interop::export_model(gpt2, "hf", dir.file("gpt2"), {.max_shard_bytes = 2000});
  CHECK(fs::exists(dir.file("gpt2/model.safetensors.index.json")));
  interop_test::require_same_weights(interop::import_model(dir.file("gpt2"), ""), gpt2);
}

TEST_CASE("export --max-shard-size is refused for a format of one file and for a bad size",
          "[interop][shards][cli]") {
  ag_test::TempDir dir;
  const auto [name, config] = interop_test::llama_family_like().front();
  const std::string ckpt = dir.file("m.h5");
  io::save_checkpoint(ckpt, interop::checkpoint_of(interop_test::random_model(config, 6)));
  CHECK(interop_test::run_cli({"export", ckpt, "--format", "gguf", "--out", dir.file("m.gguf"),
                               "--max-shard-size", "1MB"}) == 2);
  CHECK_FALSE(fs::exists(dir.file("m.gguf")));
  CHECK(interop_test::run_cli({"export", ckpt, "--format", "hf", "--out", dir.file("bad"),
                               "--max-shard-size", "5 apples"}) == 2);
  CHECK_FALSE(fs::exists(dir.file("bad")));
  REQUIRE(interop_test::run_cli({"export", ckpt, "--format", "hf", "--out", dir.file("hf"),
                                 "--max-shard-size", "2KB"}) == 0);
  CHECK(fs::exists(dir.file("hf/model.safetensors.index.json")));
  CHECK(interop_test::run_cli({"import", dir.file("hf"), "--out", dir.file("back.h5")}) == 0);
}
