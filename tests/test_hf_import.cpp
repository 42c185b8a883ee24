// interop/hf_gpt2.h and `attograd import` / `attograd export`: a Hugging Face GPT-2 folder
// round-trips bit for bit; configs of another architecture, activation or layout, absurd
// sizes, tensors GPT-2 does not have or lacks, and non-finite weights are refused with one
// line naming the file and the key or tensor; through the command line, exit 2 and no
// output left behind.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/posix_file.h"
#include "cli/cli.h"
#include "interop/formats.h"
#include "interop/hf_classifier.h"
#include "interop/hf_gpt2.h"
#include "interop_support.h"
#include "io/checkpoint.h"
#include "support.h"

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

nn::GPTConfig small_gpt2() {
  nn::GPTConfig c;
  c.vocab_size = 40;
  c.context_length = 8;
  c.d_model = 8;
  c.n_heads = 2;
  c.n_layers = 2;
  c.qkv_bias = true;
  c.dropout = 0.0;
  return c;
}

// A GPT-2 with random weights (every bias and gain too) as ModelFiles.
interop::ModelFiles random_model(const nn::GPTConfig& c) {
  nn::GPT model(c, 7);
  interop::ModelFiles m;
  m.config = c;
  ag::Generator gen(3);
  for (auto& [name, p] : model.named_parameters()) {
    ag::Tensor t = ag::randn(p.shape(), gen);
    m.weights.emplace_back(name, t);
  }
  return m;
}

// A Hugging Face folder of the model, written by write_hf_gpt2.
std::string hf_folder(const ag_test::TempDir& dir, const interop::ModelFiles& m,
                      const std::string& name = "gpt2") {
  const std::string folder = dir.file(name);
  fs::create_directories(folder);
  interop::write_hf_gpt2(m, folder, interop::StoredType::f32);
  return folder;
}

void overwrite(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

nlohmann::json read_config(const std::string& folder) {
  return nlohmann::json::parse(base::read_input_file(folder + "/config.json", "config"));
}

void write_config(const std::string& folder, const nlohmann::json& j) {
  overwrite(folder + "/config.json", j.dump());
}

// Rewrites model.safetensors with edit applied to its tensors (HF names, float32).
void edit_tensors(const std::string& folder,
                  const std::function<void(std::vector<interop::SafetensorsTensor>&)>& edit) {
  const std::string path = folder + "/model.safetensors";
  std::vector<interop::SafetensorsTensor> tensors;
  {
    interop::SafetensorsReader in(path);
    for (const auto& e : in.entries()) {
      const ag::Tensor t = in.read(e);
      tensors.push_back({e.name, e.shape, [t](float* out) {
                           std::memcpy(out, t.data<float>(), t.numel() * sizeof(float));
                         }});
    }
  }
  edit(tensors);
  interop::write_safetensors(path, tensors, interop::StoredType::f32);
}

// Appends tensors of any dtype, given as their raw bytes, to a safetensors file (the
// causal-mask buffers of a file converted from an old checkpoint: BOOL or U8).
struct RawTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};
void append_raw_tensors(const std::string& path, const std::vector<RawTensor>& extra) {
  const std::string file = base::read_input_file(path, "model", int64_t{1} << 30);
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  nlohmann::json header = nlohmann::json::parse(file.substr(8, n));
  std::string data = file.substr(8 + n);
  for (const RawTensor& t : extra) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = header.dump();
  const uint64_t length = text.size();
  overwrite(path, std::string(reinterpret_cast<const char*>(&length), 8) + text + data);
}

std::string import_error(const std::string& path) {
  try {
    interop::read_hf_gpt2(path);
  } catch (const interop::InteropError& e) {
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
    return e.what();
  }
  FAIL("imported without an error");
  return "";
}

}  // namespace

TEST_CASE("a Hugging Face GPT-2 folder round-trips bit for bit", "[interop]") {
  ag_test::TempDir dir;
  for (bool tied : {true, false}) {
    nn::GPTConfig c = small_gpt2();
    c.tie_weights = tied;
    c.d_ff = tied ? 0 : 12;
    const interop::ModelFiles m = random_model(c);
    const std::string folder = hf_folder(dir, m, tied ? "tied" : "untied");
    const nlohmann::json cfg = read_config(folder);
    CHECK(cfg["architectures"] == nlohmann::json{"GPT2LMHeadModel"});
    CHECK(cfg["n_embd"] == 8);
    CHECK(cfg["tie_word_embeddings"] == tied);
    interop::SafetensorsReader file(folder + "/model.safetensors");
    CHECK(file.find("transformer.h.1.attn.c_attn.weight")->shape == ag::Shape{8, 24});
    CHECK(file.find("transformer.h.0.mlp.c_fc.weight")->shape == ag::Shape{8, c.ff_width()});
    CHECK((file.find("lm_head.weight") != nullptr) == !tied);
    const interop::ModelFiles back = interop::read_hf_gpt2(folder);
    CHECK(back.config.d_ff == c.d_ff);
    CHECK(back.config.tie_weights == tied);
    REQUIRE(back.weights.size() == m.weights.size());
    for (size_t i = 0; i < m.weights.size(); ++i) {
      INFO(m.weights[i].first);
      CHECK(back.weights[i].first == m.weights[i].first);
      const ag::Tensor& a = m.weights[i].second;
      const ag::Tensor& b = back.weights[i].second;
      REQUIRE(a.shape() == b.shape());
      CHECK(std::memcmp(a.data<float>(), b.data<float>(), a.numel() * 4) == 0);
    }
  }
}

TEST_CASE("Hugging Face names without the prefix and the mask buffers are read", "[interop]") {
  ag_test::TempDir dir;
  const interop::ModelFiles m = random_model(small_gpt2());
  const std::string folder = hf_folder(dir, m);
  edit_tensors(folder, [](std::vector<interop::SafetensorsTensor>& t) {
    for (auto& x : t)
      if (x.name.rfind("transformer.", 0) == 0) x.name = x.name.substr(12);
    t.push_back({"h.0.attn.bias", {1, 1, 8, 8}, [](float* o) { std::fill(o, o + 64, 1.0f); }});
    t.push_back({"h.1.attn.masked_bias", {}, [](float* o) { o[0] = -1e4f; }});
  });
  const interop::ModelFiles back = interop::read_hf_gpt2(folder + "/model.safetensors");
  CHECK(back.format == "safetensors");
  REQUIRE(back.dropped.size() == 1);
  CHECK_THAT(back.dropped[0], Contains("attn.bias and attn.masked_bias"));
}

TEST_CASE("mask buffers stored as BOOL or U8 are dropped; a weight stored so is refused by name",
          "[interop]") {
  ag_test::TempDir dir;
  const interop::ModelFiles m = random_model(small_gpt2());
  const std::string folder = hf_folder(dir, m);
  const std::string path = folder + "/model.safetensors";
  const std::string mask(64, '\1');
  append_raw_tensors(path, {{"transformer.h.0.attn.bias", "BOOL", {1, 1, 8, 8}, mask},
                            {"transformer.h.1.attn.bias", "U8", {1, 1, 8, 8}, mask}});
  const interop::ModelFiles back = interop::read_hf_gpt2(path);
  REQUIRE(back.dropped.size() == 1);
  CHECK_THAT(back.dropped[0], Contains("attn.bias and attn.masked_bias"));
  for (size_t i = 0; i < m.weights.size(); ++i)
    CHECK(std::memcmp(back.weights[i].second.data<float>(), m.weights[i].second.data<float>(),
                      m.weights[i].second.numel() * sizeof(float)) == 0);
  // a tensor the model needs, in a dtype that holds no weights
  const std::string other = hf_folder(dir, m, "gpt2_i64");
  edit_tensors(other, [](std::vector<interop::SafetensorsTensor>& t) {
    t.erase(std::remove_if(t.begin(), t.end(),
                           [](const auto& x) { return x.name == "transformer.ln_f.bias"; }),
            t.end());
  });
  append_raw_tensors(other + "/model.safetensors",
                     {{"transformer.ln_f.bias", "I64", {8}, std::string(64, '\0')}});
  CHECK_THAT(import_error(other + "/model.safetensors"),
             Contains("tensor 'transformer.ln_f.bias' is I64, which holds no weights"));
}

TEST_CASE("configs attograd cannot compute are refused with the reason", "[interop]") {
  ag_test::TempDir dir;
  const std::string folder = hf_folder(dir, random_model(small_gpt2()));
  const nlohmann::json good = read_config(folder);
  auto refused = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json j = good;
    j[key] = value;
    write_config(folder, j);
    return import_error(folder);
  };
  CHECK_THAT(
      refused("activation_function", "relu"),
      Contains("config.json: activation_function is 'relu': attograd's GPT uses GELU's tanh form"));
  CHECK_THAT(refused("layer_norm_epsilon", 1e-6),
             Contains("layer_norm_epsilon is 1e-06: attograd's LayerNorm uses 1e-05"));
  CHECK_THAT(refused("model_type", "mistral"), Contains("model_type is 'mistral': only GPT-2"));
  CHECK_THAT(refused("architectures", {"GPT2ForTokenClassification"}),
             Contains("architectures names \"GPT2ForTokenClassification\""));
  CHECK_THAT(refused("scale_attn_by_inverse_layer_idx", true),
             Contains("scale_attn_by_inverse_layer_idx is true"));
  CHECK_THAT(refused("add_cross_attention", true), Contains("add_cross_attention is true"));
  CHECK_THAT(refused("n_layer", 1000000000),
             Contains("config.json: n_layer: config: n_layers = 1000000000 is larger"));
  CHECK_THAT(refused("n_embd", -8), Contains("n_embd"));
  CHECK_THAT(refused("n_head", "2"), Contains("n_head is \"2\", not an integer"));
  CHECK_THAT(refused("n_head", 3),
             Contains("n_embd: config: d_model (8) must be divisible by n_heads (3)"));
  // sizes the config states but the file does not hold: refused before anything is read
  CHECK_THAT(
      refused("n_embd", 16),
      Contains("tensor 'transformer.wte.weight' has shape [40, 8], config.json needs [40, 16]"));
  write_config(folder, good);
  CHECK_NOTHROW(interop::read_hf_gpt2(folder));
}

TEST_CASE("tensors GPT-2 does not have, lacks or holds non-finite are refused by name",
          "[interop]") {
  ag_test::TempDir dir;
  const std::string folder = hf_folder(dir, random_model(small_gpt2()));
  const std::string file = folder + "/model.safetensors";
  const std::string saved = base::read_input_file(file, "file");
  auto refused = [&](const std::function<void(std::vector<interop::SafetensorsTensor>&)>& edit) {
    overwrite(file, saved);
    edit_tensors(folder, edit);
    return import_error(folder);
  };
  CHECK_THAT(refused([](auto& t) {
               t.push_back({"h.0.attn.rotary.weight", {2}, [](float*) {}});
             }),
             Contains("tensor 'h.0.attn.rotary.weight' is not part of GPT-2"));
  CHECK_THAT(refused([](auto& t) {
               t.push_back({"h.2.attn.bias", {1}, [](float*) {}});
             }),
             Contains("tensor 'h.2.attn.bias' is not part of GPT-2"));
  CHECK_THAT(refused([](auto& t) { t.pop_back(); }), Contains("no tensor ln_f.bias"));
  CHECK_THAT(refused([](auto& t) {
               t.push_back({"wte.weight", {40, 8}, [](float*) {}});
             }),
             Contains("tensor 'wte.weight' appears twice"));
  CHECK_THAT(refused([](auto& t) {
               auto fill = t.back().fill;
               t.back().fill = [fill](float* o) {
                 fill(o);
                 o[3] = NAN;
               };
             }),
             Contains("tensor ln_f.bias holds a non-finite value (nan) at element 3"));
  CHECK_THAT(
      refused([](auto& t) {
        t.push_back({"lm_head.weight", {40, 8}, [](float* o) { std::fill(o, o + 320, 0.5f); }});
      }),
      Contains("lm_head.weight differs from wte.weight, but config.json ties them"));
  overwrite(file, saved);
  nlohmann::json j = read_config(folder);
  j["tie_word_embeddings"] = false;
  write_config(folder, j);
  CHECK_THAT(import_error(folder), Contains("no lm_head.weight, and config.json unties the head"));
}

TEST_CASE("import and export through the command line leave no output on failure",
          "[interop][cli]") {
  ag_test::TempDir dir;
  const std::string folder = hf_folder(dir, random_model(small_gpt2()));
  const std::string ckpt = dir.file("gpt2.h5");
  REQUIRE(interop_test::run_cli({"import", folder, "--out", ckpt}) == 0);
  const io::Checkpoint c = io::load_checkpoint(ckpt);
  CHECK(c.step == 0);
  CHECK_FALSE(c.optimizer);
  CHECK(c.config["qkv_bias"] == true);
  // exported again: the same tensors bit for bit
  const std::string out = dir.file("exported");
  REQUIRE(interop_test::run_cli({"export", "--checkpoint", ckpt, "--format", "hf", "--out", out}) ==
          0);
  CHECK(base::read_input_file(out + "/model.safetensors", "f") ==
        base::read_input_file(folder + "/model.safetensors", "f"));
  // a folder that is not empty, the checkpoint itself, an unknown format or dtype: exit 2
  CHECK(interop_test::run_cli({"export", "--checkpoint", ckpt, "--format", "hf", "--out", out}) ==
        2);
  CHECK(interop_test::run_cli({"export", "--checkpoint", ckpt, "--format", "hf", "--out", ckpt}) ==
        2);
  CHECK(interop_test::run_cli(
            {"export", "--checkpoint", ckpt, "--format", "onnx", "--out", dir.file("x")}) == 2);
  CHECK(interop_test::run_cli({"export", "--checkpoint", ckpt, "--format", "hf", "--out",
                               dir.file("y"), "--dtype", "f8"}) == 2);
  // import over its own input, and of a hostile file: exit 2, nothing written
  CHECK(interop_test::run_cli({"import", folder, "--out", folder + "/model.safetensors"}) == 2);
  overwrite(folder + "/model.safetensors", std::string("\xff\xff\xff\xff\0\0\0\0{}", 10));
  const std::string bad = dir.file("bad.h5");
  CHECK(interop_test::run_cli({"import", folder, "--out", bad}) == 2);
  CHECK_FALSE(fs::exists(bad));
  for (const auto& e : fs::directory_iterator(dir.path))
    CHECK(e.path().filename().string().find(".partial") == std::string::npos);
}

TEST_CASE("a sharded Hugging Face folder is read through its index, which must not lie",
          "[interop]") {
  ag_test::TempDir dir;
  const interop::ModelFiles m = random_model(small_gpt2());
  const std::string folder = hf_folder(dir, m);
  const std::string whole = folder + "/model.safetensors";
  std::vector<interop::SafetensorsTensor> tensors;
  std::vector<ag::Tensor> kept;
  {
    interop::SafetensorsReader in(whole);
    for (const auto& e : in.entries()) {
      kept.push_back(in.read(e));
      tensors.push_back({e.name, e.shape, nullptr, kept.back().data<float>()});
    }
  }
  fs::remove(whole);
  const size_t half = tensors.size() / 2;
  const std::vector<interop::SafetensorsTensor> a(tensors.begin(), tensors.begin() + half),
      b(tensors.begin() + half, tensors.end());
  interop::write_safetensors(folder + "/model-00001-of-00002.safetensors", a,
                             interop::StoredType::f32);
  interop::write_safetensors(folder + "/model-00002-of-00002.safetensors", b,
                             interop::StoredType::f32);
  nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                          {"weight_map", nlohmann::json::object()}};
  for (size_t i = 0; i < tensors.size(); ++i)
    index["weight_map"][tensors[i].name] =
        i < half ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  const std::string index_path = folder + "/model.safetensors.index.json";
  overwrite(index_path, index.dump());
  const interop::ModelFiles back = interop::read_hf_gpt2(folder);
  REQUIRE(back.weights.size() == m.weights.size());
  for (size_t i = 0; i < m.weights.size(); ++i)
    CHECK(std::memcmp(back.weights[i].second.data<float>(), m.weights[i].second.data<float>(),
                      m.weights[i].second.numel() * 4) == 0);
  auto lying = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = index;
    edit(j);
    overwrite(index_path, j.dump());
    return import_error(folder);
  };
  CHECK_THAT(lying([&](auto& j) {
               j["weight_map"][tensors[0].name] = "../model-00001-of-00002.safetensors";
             }),
             Contains("not a file of the folder"));
  CHECK_THAT(lying([&](auto& j) {
               j["weight_map"][tensors[0].name] = "model-00002-of-00002.safetensors";
             }),
             Contains("is not where"));
  CHECK_THAT(lying([&](auto& j) {
               j["weight_map"]["h.0.attn.bias"] = "model-00002-of-00002.safetensors";
             }),
             Contains("its shards hold"));
  // a tensor the model does not have is refused as the index is read, not stored
  CHECK_THAT(
      lying([&](auto& j) { j["weight_map"]["extra.weight"] = "model-00002-of-00002.safetensors"; }),
      Contains("weight_map names tensor 'extra.weight', which is not part of GPT-2"));
  CHECK_THAT(lying([&](auto& j) { j.erase("weight_map"); }), Contains("no weight_map object"));
}

TEST_CASE("a sequence classifier's config.json gives its labels, or one line naming the key",
          "[interop][classify]") {
  const std::string cls = "GPT2ForSequenceClassification";
  const auto labels_of = [&](nlohmann::json j) {
    j["architectures"] = {cls};
    return interop::classifier_labels(j, "c/config.json", cls);
  };
  CHECK(labels_of({{"id2label", {{"1", "spam"}, {"0", "ham"}}}}) ==
        std::vector<std::string>{"ham", "spam"});
  CHECK(labels_of({{"num_labels", 3}}) ==
        std::vector<std::string>{"LABEL_0", "LABEL_1", "LABEL_2"});
  CHECK(interop::classifier_labels({{"architectures", {"GPT2LMHeadModel"}}}, "c", cls).empty());
  const auto error = [&](const nlohmann::json& j) {
    try {
      labels_of(j);
    } catch (const interop::InteropError& e) {
      CHECK_THAT(e.what(), Contains("c/config.json"));
      return std::string(e.what());
    }
    FAIL("no error for " << j.dump());
    return std::string();
  };
  CHECK_THAT(error({{"id2label", {{"0", "a"}, {"2", "b"}}}}), Contains("key \"2\" is not one of"));
  CHECK_THAT(error({{"id2label", {{"0", "a"}, {"1", "a"}}}}), Contains("names \"a\" twice"));
  CHECK_THAT(error({{"id2label", {{"0", "a"}, {"1", 7}}}}), Contains("id2label[\"1\"] is"));
  CHECK_THAT(error({{"id2label", {{"0", "a"}, {"x1", "b"}}}}), Contains("key \"x1\""));
  CHECK_THAT(error({{"id2label", {{"0", "a"}, {"1", "b"}}}, {"num_labels", 3}}),
             Contains("num_labels is 3 but id2label has 2"));
  CHECK_THAT(error({{"num_labels", 1}}), Contains("num_labels is not an integer from 2"));
  CHECK_THAT(error(nlohmann::json::object()), Contains("without id2label or num_labels"));
}

TEST_CASE(
    "a folder without config.json is said to be no model folder, a prepared data folder named "
    "as one",
    "[interop]") {
  ag_test::TempDir dir;
  const std::string empty = (dir.path / "empty").string();
  fs::create_directories(empty);
  CHECK_THAT(import_error(empty),
             Contains(empty + ": no config.json in this folder: a Hugging Face model folder"));
  const std::string prepared = (dir.path / "prepared").string();
  dir.write("prepared/meta.json", "{}");
  dir.write("prepared/train.bin", "");
  CHECK_THAT(import_error(prepared),
             Contains(prepared + ": is a prepared data folder (meta.json, train.bin), not a model; "
                                 "train on it with 'attograd train --data"));
  const std::string alone = dir.write("alone/model.safetensors", "");
  CHECK_THAT(import_error(alone), Contains("no config.json beside it (a .safetensors file is read "
                                           "with its folder's config.json"));
}
