// Every input a fuzzer ever crashed on (fuzz/regressions/<target>/), and the seed corpora,
// replayed through the same code as the fuzz targets (fuzz/targets.h): each must now end
// in a clean error or a result, never a crash.
#include <catch2/catch.hpp>
#include <filesystem>

#include "base/atomic_file.h"
#include "fuzz/targets.h"
#include "io/files.h"

namespace {

std::vector<std::string> inputs_of(const std::string& target) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const char* kind : {"regressions", "corpus"}) {
    const fs::path dir = fs::path(ATTOGRAD_SOURCE_DIR) / "fuzz" / kind / target;
    if (!fs::is_directory(dir)) continue;
    for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Feeds every input of a target (at least min_count of them) to what its fuzzer runs.
void replay_all(const std::string& target, size_t min_count, void (*run)(const std::string&)) {
  const auto files = inputs_of(target);
  REQUIRE(files.size() >= min_count);
  for (const auto& f : files) {
    INFO(f);
    REQUIRE_NOTHROW(run(base::read_input_file(f, "file")));
  }
}

}  // namespace

TEST_CASE("checkpoint fuzz findings and seeds load or fail cleanly") {
  replay_all("checkpoint", 4, fuzz::checkpoint);
}

TEST_CASE("files that crash or hang the HDF5 library are reported as damaged") {
  using Catch::Matchers::Contains;
  int crashes = 0, hangs = 0;
  for (const auto& f : inputs_of("checkpoint")) {
    const bool crash =
        f.find("/crash-") != std::string::npos || f.find("/segv-") != std::string::npos;
    const bool hang = f.find("/hang-") != std::string::npos;
    if (!crash && !hang) continue;
    INFO(f);
    crashes += crash, hangs += hang;
    // Whether a given file crashes libhdf5, sends it into a loop or is found damaged by the
    // reader's own walk first depends on the heap layout and the order of the reads, so any
    // report of damage is accepted for either kind.
    REQUIRE_THROWS_WITH(io::load_checkpoint(f), Contains(f) && Contains("damaged"));
    // inspect --verify reads every dataset, where a load stops at the first problem
    try {
      const io::Inspection r = io::inspect_checkpoint(f);
      REQUIRE_FALSE(r.report.all_checked());
      REQUIRE_FALSE(r.checkpoint);
    } catch (const io::CheckpointError& e) {
      REQUIRE_THAT(e.what(), Contains(f) && Contains("damaged"));
    }
  }
  REQUIRE(crashes >= 2);
  REQUIRE(hangs >= 2);
}

TEST_CASE("tokenizer fuzz findings and seeds round-trip or fail cleanly") {
  replay_all("tokenizer", 3, fuzz::tokenizer);
}

TEST_CASE("config fuzz findings and seeds parse or fail cleanly") {
  replay_all("config", 3, fuzz::config);
}

TEST_CASE("prepared meta fuzz findings and seeds read or fail cleanly") {
  replay_all("prepared_meta", 3, fuzz::prepared_meta);
}

TEST_CASE("tokenizer file fuzz findings and seeds read or fail cleanly") {
  replay_all("tokenizer_file", 3, fuzz::tokenizer_file);
}

TEST_CASE("GPT-2 tokenizer files fuzz findings and seeds read or fail cleanly") {
  replay_all("gpt2_files", 3, fuzz::gpt2_files);
}

TEST_CASE("safetensors fuzz findings and seeds read or fail cleanly") {
  replay_all("safetensors", 3, fuzz::safetensors);
}

TEST_CASE("llm.c checkpoint fuzz findings and seeds read or fail cleanly") {
  replay_all("llmc", 3, fuzz::llmc);
}

TEST_CASE("Llama-family config.json fuzz findings and seeds read or fail cleanly") {
  replay_all("hf_llama_config", 6, fuzz::hf_llama_config);
}

TEST_CASE("GGUF fuzz findings and seeds read or fail cleanly") {
  replay_all("gguf", 3, fuzz::gguf);
}

TEST_CASE("GGUF LoRA adapter fuzz findings and seeds read or fail cleanly") {
  replay_all("gguf_lora", 2, fuzz::gguf_lora);
}

TEST_CASE("multiple-choice file fuzz findings and seeds read or fail cleanly") {
  replay_all("choice_items", 3, fuzz::choice_items);
}

TEST_CASE("instruction records fuzz findings and seeds read or fail cleanly") {
  replay_all("instruction_data", 3, fuzz::instruction_data);
}

TEST_CASE("serve request fuzz seeds are read or refused with a 400") {
  replay_all("serve_request", 6, fuzz::serve_request);
}

TEST_CASE("classification file fuzz findings and seeds read or fail cleanly") {
  replay_all("classification_data", 3, fuzz::classification_data);
}

TEST_CASE("hf_tokenizer_json fuzz findings and seeds read or fail cleanly") {
  replay_all("hf_tokenizer_json", 3, fuzz::hf_tokenizer_json);
}
