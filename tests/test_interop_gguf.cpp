// GGUF (interop/gguf.h, gguf_format.h): exact round trips in F32 and BF16, llama.cpp's names
// and keys, the head llama.cpp's converter writes as a copy, models it cannot hold refused
// with the reason, and every lie a header can tell refused naming the file and the field.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

#include "data/bpe.h"
#include "data/chat_format.h"
#include "data/examples.h"
#include "data/gpt2_tokenizer.h"
#include "interop/gguf.h"
#include "interop/gguf_format.h"
#include "interop/gguf_llama.h"
#include "interop_support.h"
#include "io/tokenizer_section.h"
#include "support.h"

using Catch::Matchers::Contains;
using interop::InputBytes;
using interop::InteropError;
using interop::ModelFiles;
namespace gguf = interop::gguf;

namespace {

std::string gguf_bytes(const ModelFiles& m, interop::StoredType dtype = interop::StoredType::f32) {
  std::string bytes;
  interop::write_gguf(m, dtype, "test", [&](const char* d, size_t n) { bytes.append(d, n); });
  return bytes;
}

ModelFiles read_bytes(std::string bytes) {
  return interop::read_gguf(InputBytes::of(std::move(bytes), "model.gguf"));
}

gguf::File header_of(const std::string& bytes) {
  return gguf::read_header(InputBytes::of(bytes, "model.gguf"));
}

void gguf_require_refused(const std::function<void()>& read, const std::string& part) {
  try {
    read();
    FAIL("read without error; expected one naming " << part);
  } catch (const InteropError& e) {
    const std::string w = e.what();
    INFO(w);
    REQUIRE(w.rfind("model.gguf: ", 0) == 0);
    REQUIRE_THAT(w, Contains(part));
    REQUIRE(w.find('\n') == std::string::npos);
  }
}

void gguf_require_refused(const std::string& bytes, const std::string& part) {
  gguf_require_refused([&] { read_bytes(bytes); }, part);
}

// The file again with its header edited (keys, tensor infos) and the same tensor data.
std::string rewritten(const std::string& good, const std::function<void(gguf::File&)>& edit) {
  gguf::File f = header_of(good);
  std::vector<std::string> data;
  for (const auto& t : f.tensors) data.push_back(good.substr(f.data_start + t.offset, t.bytes()));
  edit(f);
  std::string out;
  const interop::ByteSink sink = [&](const char* d, size_t n) { out.append(d, n); };
  gguf::write_header(f, sink);
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    std::string d = i < data.size() ? data[i] : std::string(f.tensors[i].bytes(), '\0');
    d.resize(f.tensors[i].bytes(), '\0');
    out += d;
    gguf::write_padding(d.size(), f.alignment, sink);
  }
  return out;
}

void set_key(gguf::File& f, const std::string& key, gguf::Value v) {
  for (auto& [k, old] : f.keys)
    if (k == key) {
      old = std::move(v);
      return;
    }
  f.keys.emplace_back(key, std::move(v));
}

void erase_key(gguf::File& f, const std::string& key) {
  std::erase_if(f.keys, [&](const auto& kv) { return kv.first == key; });
}

// Little-endian fields, for files no writer would make.
struct Raw {
  std::string bytes;
  template <typename T>
  Raw& put(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Raw& str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes += s;
    return *this;
  }
};

// "GGUF", version 3, then the counts.
Raw raw_file(uint64_t tensors, uint64_t keys) {
  Raw r;
  r.put(gguf::kMagic).put(gguf::kVersion).put(tensors).put(keys);
  return r;
}

const nn::GPTConfig kConfig = interop_test::gpt2_like(50, 16, 32, 4, 2);

// Matrices rounded to bfloat16, as a BF16 file holds them (1-D tensors and pos_emb stay F32).
// The model with its matrices (not pos_emb) as F16 holds them: rounded to nearest even.
ModelFiles f16_matrices(ModelFiles m) {
  for (auto& [name, t] : m.weights) {
    if (t.shape().size() != 2 || name == "pos_emb.weight") continue;
    std::string half;
    interop::write_floats(t.data<float>(), t.numel(), interop::StoredType::f16,
                          [&](const char* d, size_t n) { half.append(d, n); });
    ag::Tensor r = ag::empty(t.shape());
    interop::read_floats(half.data(), t.numel(), interop::StoredType::f16, r.data<float>());
    t = r;
  }
  return m;
}

ModelFiles bf16_matrices(ModelFiles m) {
  const ModelFiles rounded = interop_test::bf16_rounded(m);
  for (size_t i = 0; i < m.weights.size(); ++i)
    if (m.weights[i].second.shape().size() == 2 && m.weights[i].first != "pos_emb.weight")
      m.weights[i].second = rounded.weights[i].second;
  return m;
}

}  // namespace

TEST_CASE("a GGUF file round-trips every tensor bit for bit in F32") {
  nn::GPTConfig untied = kConfig;
  untied.tie_weights = false;
  nn::GPTConfig no_bias = kConfig;
  no_bias.qkv_bias = false;
  nn::GPTConfig narrow = kConfig;
  narrow.d_ff = 40;
  for (const nn::GPTConfig& c : {kConfig, untied, no_bias, narrow}) {
    INFO("qkv_bias " << c.qkv_bias << ", tie_weights " << c.tie_weights << ", d_ff " << c.d_ff);
    const ModelFiles m = interop_test::random_model(c, 1);
    const ModelFiles back = read_bytes(gguf_bytes(m));
    REQUIRE(back.format == "gguf");
    interop_test::require_same_config(back.config, m.config);
    interop_test::require_same_weights(back, m);
    REQUIRE(back.dropped.empty());
    REQUIRE_FALSE(back.tokenizer);
  }
}

TEST_CASE("a BF16 GGUF file holds the matrices rounded to nearest even, the rest in F32") {
  const ModelFiles m = interop_test::random_model(kConfig, 2);
  const std::string bytes = gguf_bytes(m, interop::StoredType::bf16);
  const ModelFiles back = read_bytes(bytes);
  interop_test::require_same_weights(back, bf16_matrices(m));
  interop_test::require_same_weights(read_bytes(gguf_bytes(back, interop::StoredType::bf16)), back);
  for (const auto& t : header_of(bytes).tensors) {
    INFO(t.name);
    const bool matrix = t.ne.size() == 2 && t.name != "position_embd.weight";
    REQUIRE(t.type == (matrix ? gguf::kBF16 : gguf::kF32));
  }
  REQUIRE(header_of(bytes).find("general.file_type")->ints[0] == 32);
}

TEST_CASE("an F16 GGUF file holds the matrices rounded to nearest even and reads back bit for bit",
          "[gguf][f16]") {
  for (const auto& config : {kConfig, interop_test::llama_family_like()[0].second}) {
    const ModelFiles m = interop_test::random_model(config, 3);
    const std::string bytes = gguf_bytes(m, interop::StoredType::f16);
    const ModelFiles back = read_bytes(bytes);
    interop_test::require_same_weights(back, f16_matrices(m));
    // the F16 values go out and come back as they were: the same file again
    REQUIRE(gguf_bytes(back, interop::StoredType::f16) == bytes);
    for (const auto& t : header_of(bytes).tensors) {
      INFO(t.name);
      const bool matrix = t.ne.size() == 2 && t.name != "position_embd.weight";
      REQUIRE(t.type == (matrix ? gguf::kF16 : gguf::kF32));
    }
    REQUIRE(header_of(bytes).find("general.file_type")->ints[0] == 1);  // MOSTLY_F16
  }
  ModelFiles huge = interop_test::random_model(kConfig, 4);
  huge.weights[0].second.data<float>()[3] = 70000.0f;
  REQUIRE_THROWS_WITH(gguf_bytes(huge, interop::StoredType::f16),
                      Contains("holds 70000 at element 3, beyond F16's range"));
}

TEST_CASE("a GGUF file has llama.cpp's gpt2 keys and tensor names") {
  const ModelFiles m = interop_test::random_model(kConfig, 3);
  const std::string bytes = gguf_bytes(m);
  const gguf::File f = header_of(bytes);
  std::vector<std::string> keys;
  for (const auto& [k, v] : f.keys) keys.push_back(k);
  REQUIRE(keys == std::vector<std::string>{
                      "general.architecture", "general.name", "general.alignment",
                      "general.file_type", "gpt2.context_length", "gpt2.embedding_length",
                      "gpt2.feed_forward_length", "gpt2.block_count", "gpt2.attention.head_count",
                      "gpt2.attention.layer_norm_epsilon"});
  REQUIRE(f.find("general.architecture")->strings[0] == "gpt2");
  REQUIRE(f.find("general.name")->strings[0] == "test");
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, int64_t>>{{"gpt2.context_length", 16},
                                                    {"gpt2.embedding_length", 32},
                                                    {"gpt2.feed_forward_length", 128},
                                                    {"gpt2.block_count", 2},
                                                    {"gpt2.attention.head_count", 4},
                                                    {"general.alignment", 32}}) {
    INFO(key);
    REQUIRE(f.find(key)->type == gguf::kUint32);
    REQUIRE(f.find(key)->ints[0] == value);
  }
  REQUIRE(f.find("gpt2.attention.layer_norm_epsilon")->floats[0] == 1e-5f);
  std::vector<std::string> names;
  for (const auto& t : f.tensors) names.push_back(t.name);
  REQUIRE(names.size() == 2 + 2 * 12 + 2);
  REQUIRE(names[0] == "token_embd.weight");
  REQUIRE(names[1] == "position_embd.weight");
  REQUIRE(std::vector<std::string>(names.begin() + 2, names.begin() + 14) ==
          std::vector<std::string>{
              "blk.0.attn_norm.weight", "blk.0.attn_norm.bias", "blk.0.attn_qkv.weight",
              "blk.0.attn_qkv.bias", "blk.0.attn_output.weight", "blk.0.attn_output.bias",
              "blk.0.ffn_norm.weight", "blk.0.ffn_norm.bias", "blk.0.ffn_up.weight",
              "blk.0.ffn_up.bias", "blk.0.ffn_down.weight", "blk.0.ffn_down.bias"});
  REQUIRE(names.back() == "output_norm.bias");
  REQUIRE(f.tensors[0].ne == std::vector<uint64_t>{32, 50});
  REQUIRE(f.tensors[4].ne == std::vector<uint64_t>{32, 96});    // attn_qkv.weight [3d, d]
  REQUIRE(f.tensors[10].ne == std::vector<uint64_t>{32, 128});  // ffn_up [4d, d]
  REQUIRE(f.tensors[12].ne == std::vector<uint64_t>{128, 32});  // ffn_down [d, 4d]
  // the key rows of layer 0's attn_qkv are W_key's: row d, column 1 is W_key[0][1]
  float v;
  std::memcpy(&v, bytes.data() + f.data_start + f.tensors[4].offset + 4 * (32 * 32 + 1), 4);
  for (const auto& [name, w] : m.weights)
    if (name == "blocks.0.attn.W_key.weight") REQUIRE(v == w.data<float>()[1]);
  for (const auto& t : f.tensors) REQUIRE(t.offset % 32 == 0);
  REQUIRE(f.data_start % 32 == 0);
}

TEST_CASE(
    "output.weight that copies token_embd, as llama.cpp's converter writes it, is a tied head") {
  nn::GPTConfig untied = kConfig;
  untied.tie_weights = false;
  ModelFiles m = interop_test::random_model(untied, 4);
  m.weights.back().second = m.weights.front().second.clone();  // lm_head = tok_emb
  const ModelFiles back = read_bytes(gguf_bytes(m));
  REQUIRE(back.config.tie_weights);
  REQUIRE(back.weights.size() == m.weights.size() - 1);
  REQUIRE(back.dropped.size() == 1);
  REQUIRE_THAT(back.dropped[0], Contains("output.weight"));
}

TEST_CASE("models a GGUF gpt2 file cannot hold are refused with the reason") {
  nn::GPTConfig c = kConfig;
  c.norm = nn::NormKind::rms_norm;
  REQUIRE_THROWS_WITH(gguf_bytes(interop_test::random_model(c, 5)),
                      Contains("cannot hold this model") && Contains("rmsnorm"));
}

TEST_CASE("a model without qkv biases is written with zero biases and the key saying so") {
  nn::GPTConfig c = kConfig;
  c.qkv_bias = false;
  const std::string bytes = gguf_bytes(interop_test::random_model(c, 6));
  const gguf::File f = header_of(bytes);
  REQUIRE(f.find("attograd.qkv_bias")->type == gguf::kBool);
  REQUIRE(f.find("attograd.qkv_bias")->ints[0] == 0);
  REQUIRE_NOTHROW(read_bytes(rewritten(bytes, [](gguf::File&) {})));  // the helper is faithful
  // non-zero biases under that key are refused rather than lost
  std::string lie = bytes;
  const auto& qkvb = f.tensors[5];
  REQUIRE(qkvb.name == "blk.0.attn_qkv.bias");
  const float one = 1.0f;
  std::memcpy(lie.data() + f.data_start + qkvb.offset, &one, 4);
  gguf_require_refused(lie, "blk.0.attn_qkv.bias is not zero");
}

TEST_CASE("a GGUF container that lies is refused naming the field") {
  const auto header = [](const std::string& bytes) { return [bytes] { header_of(bytes); }; };
  gguf_require_refused(header("GGUX" + raw_file(0, 0).bytes.substr(4)), "not a GGUF file");
  gguf_require_refused(
      header(Raw().put(gguf::kMagic).put(uint32_t{2}).put(uint64_t{0}).put(uint64_t{0}).bytes),
      "GGUF version 2");
  gguf_require_refused(header(raw_file(uint64_t{1} << 60, 0).bytes), "the tensor count");
  gguf_require_refused(header(raw_file(0, uint64_t{1} << 60).bytes), "the key count");
  gguf_require_refused(header(raw_file(0, 1).str("a").put(uint32_t{13}).put(uint8_t{0}).bytes),
                       "key a has value type 13");
  gguf_require_refused(header(raw_file(0, 1).put(uint64_t{1} << 62).bytes + std::string(20, 'x')),
                       "key 0 (its name) is 4611686018427387904 bytes long");
  gguf_require_refused(header(raw_file(0, 2)
                                  .str("a")
                                  .put(gguf::kUint8)
                                  .put(uint8_t{1})
                                  .str("a")
                                  .put(gguf::kUint8)
                                  .put(uint8_t{1})
                                  .bytes),
                       "key a appears twice");
  gguf_require_refused(header(raw_file(0, 1)
                                  .str("a")
                                  .put(gguf::kArray)
                                  .put(gguf::kUint32)
                                  .put(uint64_t{1} << 40)
                                  .bytes),
                       "key a claims 1099511627776 elements");
  gguf_require_refused(header(raw_file(0, 1)
                                  .str("a")
                                  .put(gguf::kArray)
                                  .put(gguf::kString)
                                  .put(uint64_t{2})
                                  .str("x")
                                  .put(uint64_t{1} << 50)
                                  .bytes +
                              std::string(8, 'x')),
                       "key a is 1125899906842624 bytes long");
  gguf_require_refused(
      header(raw_file(0, 1).str("a").put(gguf::kArray).put(gguf::kArray).put(uint64_t{0}).bytes),
      "key a is an array of arrays");
  gguf_require_refused(header(raw_file(0, 1).str("a").put(gguf::kBool).put(uint8_t{2}).bytes),
                       "key a is a BOOL of value 2");
  for (uint32_t a : {0u, 3u, 48u}) {
    gguf_require_refused(
        header(raw_file(0, 1).str("general.alignment").put(gguf::kUint32).put(a).bytes),
        "general.alignment is " + std::to_string(a) + ", not a power of two");
  }
  gguf_require_refused(
      header(raw_file(0, 1).str("general.alignment").put(gguf::kUint64).put(uint64_t{32}).bytes),
      "general.alignment is UINT64, not a UINT32");
  // tensor infos: one F32 tensor "w" of 4 elements at offset 0
  const auto tensor = [](uint32_t dims, std::vector<uint64_t> ne, uint32_t type, uint64_t offset,
                         size_t data_bytes = 64) {
    Raw r = raw_file(1, 0);
    r.str("w").put(dims);
    for (uint64_t n : ne) r.put(n);
    r.put(type).put(offset);
    r.bytes.resize((r.bytes.size() + 31) / 32 * 32 + data_bytes, '\0');
    return r.bytes;
  };
  REQUIRE(header_of(tensor(1, {4}, gguf::kF32, 0)).tensors[0].bytes() == 16);
  gguf_require_refused(header(tensor(0, {}, gguf::kF32, 0)), "tensor w has 0 dims");
  gguf_require_refused(header(tensor(5, {1, 1, 1, 1, 1}, gguf::kF32, 0)), "tensor w has 5 dims");
  gguf_require_refused(header(tensor(1, {0}, gguf::kF32, 0)), "tensor w has ne[0] = 0");
  gguf_require_refused(header(tensor(2, {8, uint64_t{1} << 62}, gguf::kF32, 0)),
                       "tensor w has ne[1]");
  gguf_require_refused(
      header(tensor(1, {4}, 2, 0)),
      "tensor w is Q4_0 with rows of 4 weights, not a whole number of its 32-weight "
      "blocks");
  gguf_require_refused(header(tensor(1, {4}, 99, 0)), "tensor w has ggml type 99: only F32 (0)");
  gguf_require_refused(header(tensor(1, {4}, 10, 0)), "tensor w has ggml type 10");  // Q2_K: unread
  // blocks: 2 Q8_0 blocks (68 bytes) fit in 96 bytes of data, not in 64
  REQUIRE(header_of(tensor(1, {64}, 8, 0, 96)).tensors[0].bytes() == 68);
  gguf_require_refused(header(tensor(1, {64}, 8, 0, 64)), "tensor w (68 bytes at data offset 0)");
  gguf_require_refused(header(tensor(2, {256, 3}, 12, 0, 400)), "tensor w (432 bytes");
  // a Q4_0 tensor of more weights than the file has bytes (up to 2 a byte) is read
  REQUIRE(header_of(tensor(1, {4096}, 2, 0, 2304)).tensors[0].bytes() == 2304);
  gguf_require_refused(header(tensor(1, {4}, gguf::kF32, 8)), "not a multiple of the alignment 32");
  gguf_require_refused(header(tensor(1, {4}, gguf::kF32, 64)),
                       "tensor w (16 bytes at data offset 64)");
  gguf_require_refused(header(tensor(1, {20}, gguf::kF32, 0)), "lies past the end");
  Raw two = raw_file(2, 0);
  two.str("a").put(uint32_t{1}).put(uint64_t{16}).put(gguf::kF32).put(uint64_t{0});
  two.str("b").put(uint32_t{1}).put(uint64_t{4}).put(gguf::kF32).put(uint64_t{32});
  two.bytes.resize((two.bytes.size() + 31) / 32 * 32 + 128, '\0');
  gguf_require_refused(header(two.bytes), "tensors a and b overlap");
  Raw twice = raw_file(2, 0);
  twice.str("a").put(uint32_t{1}).put(uint64_t{4}).put(gguf::kF32).put(uint64_t{0});
  twice.str("a").put(uint32_t{1}).put(uint64_t{4}).put(gguf::kF32).put(uint64_t{32});
  twice.bytes.resize((twice.bytes.size() + 31) / 32 * 32 + 128, '\0');
  gguf_require_refused(header(twice.bytes), "tensor a appears twice");
}

TEST_CASE("a GGUF model whose keys or tensors lie is refused naming the key or tensor") {
  const std::string good = gguf_bytes(interop_test::random_model(kConfig, 7));
  using gguf::Value;
  const auto edit = [&](const std::function<void(gguf::File&)>& e) { return rewritten(good, e); };
  gguf_require_refused(
      edit([](gguf::File& f) { set_key(f, "general.architecture", Value::string("mamba")); }),
      "general.architecture is 'mamba': only gpt2, llama, qwen2 and qwen3 are read");
  gguf_require_refused(edit([](gguf::File& f) { erase_key(f, "general.architecture"); }),
                       "key general.architecture is missing");
  for (const char* key : {"gpt2.context_length", "gpt2.embedding_length", "gpt2.block_count",
                          "gpt2.attention.head_count", "gpt2.feed_forward_length"}) {
    INFO(key);
    gguf_require_refused(edit([&](gguf::File& f) { erase_key(f, key); }),
                         std::string("key ") + key + " is missing");
    gguf_require_refused(edit([&](gguf::File& f) { set_key(f, key, Value::string("8")); }),
                         std::string("key ") + key + " is STRING, not an integer");
    if (std::string(key) != "gpt2.feed_forward_length")
      gguf_require_refused(edit([&](gguf::File& f) { set_key(f, key, Value::u32(0)); }),
                           std::string("key ") + key + " is 0");
    gguf_require_refused(edit([&](gguf::File& f) { set_key(f, key, Value::u32(0xffffffffu)); }),
                         std::string("key ") + key + " is 4294967295");
  }
  gguf_require_refused(
      edit([](gguf::File& f) { set_key(f, "gpt2.attention.head_count", Value::u32(5)); }),
      "d_model (32) must be divisible by n_heads (5)");
  gguf_require_refused(edit([](gguf::File& f) {
                         set_key(f, "gpt2.attention.layer_norm_epsilon", Value::f32(1e-6f));
                       }),
                       "layer_norm_epsilon is 1e-06");
  gguf_require_refused(edit([](gguf::File& f) { set_key(f, "gpt2.block_count", Value::u32(3)); }),
                       "no tensor blk.2.attn_norm.weight");
  gguf_require_refused(edit([](gguf::File& f) { set_key(f, "gpt2.block_count", Value::u32(1)); }),
                       "tensor blk.1.attn_norm.weight is not one of llama.cpp's gpt2 tensors");
  gguf_require_refused(
      edit([](gguf::File& f) { set_key(f, "gpt2.context_length", Value::u32(8)); }),
      "tensor position_embd.weight has ne [32, 16], the keys need [32, 8]");
  // a stranger is refused as its info is read, before the rest of the header is stored
  gguf_require_refused(edit([](gguf::File& f) { f.tensors[0].name = "tok_embd.weight"; }),
                       "tensor tok_embd.weight is not one of llama.cpp's gpt2 tensors");
  gguf_require_refused(edit([](gguf::File& f) { f.tensors.erase(f.tensors.begin()); }),
                       "no tensor token_embd.weight");
  gguf_require_refused(edit([](gguf::File& f) {
                         f.tensors[0].ne = {32, 25, 2};
                       }),
                       "tensor token_embd.weight has 3 dims");
  gguf_require_refused(edit([](gguf::File& f) {
                         f.tensors.push_back({"blk.0.ffn_gate.weight", {4}, 0, 0});
                       }),
                       "tensor blk.0.ffn_gate.weight is not one of llama.cpp's gpt2 tensors");
  gguf_require_refused(edit([](gguf::File& f) { set_key(f, "attograd.qkv_bias", Value::u32(0)); }),
                       "key attograd.qkv_bias is UINT32, not a BOOL");
  // a non-finite weight, named by its attograd name
  std::string nan_file = good;
  const gguf::File f = header_of(good);
  const float nan = std::numeric_limits<float>::infinity();
  std::memcpy(nan_file.data() + f.data_start + f.tensors[12].offset + 8, &nan, 4);
  gguf_require_refused(nan_file, "blocks.0.mlp.fc2.weight holds a non-finite value");
}

TEST_CASE("every cut of a GGUF file is refused cleanly") {
  const std::string good =
      gguf_bytes(interop_test::random_model(interop_test::gpt2_like(20, 4, 8, 2, 1), 8));
  for (size_t n = 0; n < good.size(); n += (n < 1200 ? 1 : 97)) {
    INFO("the first " << n << " bytes");
    REQUIRE_THROWS_AS(read_bytes(good.substr(0, n)), InteropError);
  }
  REQUIRE_NOTHROW(read_bytes(good));
}

namespace {

// A model whose vocabulary is the tokenizer's.
// extra: rows past the tokenizer's ids (a fine-tuning's end-of-text or chat tokens)
ModelFiles gguf_with_tokenizer(const data::Tokenizer& tok, unsigned seed, int64_t extra = 0) {
  nn::GPTConfig c = kConfig;
  c.vocab_size = tok.vocab_size() + extra;
  ModelFiles m = interop_test::random_model(c, seed);
  m.tokenizer = io::tokenizer_section(tok);
  return m;
}

const char* const kGgufText = "the cat sat on the mat; the dog's hat, then that thing. 123 4567\n";

}  // namespace

TEST_CASE(
    "attograd's bpe goes to GGUF as a gpt2 tokenizer with llama-bpe's pre-tokenizer and back") {
  const data::BpeTokenizer bpe = data::BpeTokenizer::train(kGgufText, 280);
  const ModelFiles m = gguf_with_tokenizer(bpe, 9);
  const std::string bytes = gguf_bytes(m);
  const gguf::File f = header_of(bytes);
  REQUIRE(f.find("tokenizer.ggml.model")->strings[0] == "gpt2");
  REQUIRE(f.find("tokenizer.ggml.pre")->strings[0] == "llama-bpe");
  REQUIRE(f.find("tokenizer.ggml.add_bos_token")->type == gguf::kBool);
  REQUIRE(f.find("tokenizer.ggml.add_bos_token")->ints[0] == 0);
  REQUIRE_FALSE(f.find("tokenizer.ggml.eos_token_id"));  // attograd's bpe has no special token
  const auto& tokens = f.find("tokenizer.ggml.tokens")->strings;
  REQUIRE(tokens.size() == 280);
  REQUIRE(tokens[' '] == "\xc4\xa0");  // 'Ġ': GPT-2's byte-level form
  REQUIRE(tokens['a'] == "a");
  const auto& types = f.find("tokenizer.ggml.token_type")->ints;
  REQUIRE(types == std::vector<int64_t>(280, 1));
  const auto& merges = f.find("tokenizer.ggml.merges")->strings;
  REQUIRE(merges.size() == 24);
  const auto [left, right] = bpe.merges()[0];
  REQUIRE(merges[0] == data::byte_level_text(bpe.token_bytes(left)) + " " +
                           data::byte_level_text(bpe.token_bytes(right)));
  const ModelFiles back = read_bytes(bytes);
  REQUIRE(back.tokenizer);
  REQUIRE(back.tokenizer->type == "bpe");
  REQUIRE(back.tokenizer->merges == m.tokenizer->merges);
  REQUIRE(back.tokenizer->split_pattern == std::string(data::kGpt4SplitPattern));
  interop_test::require_same_weights(back, m);
  REQUIRE(back.dropped.empty());
  const auto again = io::make_tokenizer(*back.tokenizer);
  REQUIRE(again->encode(kGgufText) == bpe.encode(kGgufText));
}

TEST_CASE(
    "a GPT-2 tokenizer goes to GGUF with gpt-2's pre-tokenizer and <|endoftext|> as bos and eos") {
  // GPT-2's byte order, a few merges in its ids, <|endoftext|> after them
  const std::vector<uint8_t> order = data::Gpt2Tokenizer::gpt2_byte_order();
  std::array<uint32_t, 256> id{};
  for (uint32_t i = 0; i < 256; ++i) id[order[i]] = i;
  const data::Gpt2Tokenizer gpt2(order, {{id[' '], id['t']}, {id['h'], id['e']}, {256, 257}});
  const ModelFiles m = gguf_with_tokenizer(gpt2, 14);
  const std::string bytes = gguf_bytes(m);
  const gguf::File f = header_of(bytes);
  REQUIRE(f.find("tokenizer.ggml.pre")->strings[0] == "gpt-2");
  const auto& tokens = f.find("tokenizer.ggml.tokens")->strings;
  REQUIRE(tokens.size() == 260);
  REQUIRE(tokens[0] == "!");  // GPT-2's id 0
  REQUIRE(tokens[258] == "\xc4\xa0the");
  REQUIRE(tokens[259] == "<|endoftext|>");
  REQUIRE(f.find("tokenizer.ggml.merges")->strings ==
          std::vector<std::string>{"\xc4\xa0 t", "h e", "\xc4\xa0t he"});
  REQUIRE(f.find("tokenizer.ggml.token_type")->ints[259] == 3);  // control
  REQUIRE(f.find("tokenizer.ggml.token_type")->ints[258] == 1);
  REQUIRE(f.find("tokenizer.ggml.bos_token_id")->ints[0] == 259);
  REQUIRE(f.find("tokenizer.ggml.eos_token_id")->ints[0] == 259);
  const ModelFiles back = read_bytes(bytes);
  REQUIRE(back.tokenizer);
  REQUIRE(back.tokenizer->type == "gpt2");
  REQUIRE(back.tokenizer->merges == m.tokenizer->merges);
  REQUIRE(back.tokenizer->byte_order == m.tokenizer->byte_order);
  REQUIRE(back.tokenizer->special_tokens == m.tokenizer->special_tokens);
  REQUIRE(back.tokenizer->split_pattern == std::string(data::kGpt2SplitPattern));
  REQUIRE(io::make_tokenizer(*back.tokenizer)->encode(" the the") == gpt2.encode(" the the"));
}

TEST_CASE("the byte tokenizer goes to GGUF and back") {
  const data::ByteTokenizer byte;
  const ModelFiles back = read_bytes(gguf_bytes(gguf_with_tokenizer(byte, 10)));
  REQUIRE(back.tokenizer);
  REQUIRE(back.tokenizer->type == "byte");
}

TEST_CASE(
    "ids a fine-tuning added past a byte vocabulary go to GGUF as control tokens, named "
    "as bos, eos and eot, with the chat template",
    "[gguf][special_tokens]") {
  const data::ByteTokenizer byte;
  const auto id_key = [](const gguf::File& f, const char* key) {
    const gguf::Value* v = f.find(std::string("tokenizer.ggml.") + key);
    return v ? v->ints.at(0) : int64_t{-1};
  };
  SECTION("instruct's end-of-text") {
    const std::string bytes = gguf_bytes(gguf_with_tokenizer(byte, 14, 1));
    const gguf::File f = header_of(bytes);
    REQUIRE(f.find("tokenizer.ggml.tokens")->strings.at(256) == "<|endoftext|>");
    REQUIRE(f.find("tokenizer.ggml.token_type")->ints.at(256) == 3);  // control
    for (const char* key : {"bos_token_id", "eos_token_id", "eot_token_id"})
      REQUIRE(id_key(f, key) == 256);
    REQUIRE_FALSE(f.find("tokenizer.chat_template"));
    const ModelFiles back = read_bytes(bytes);
    REQUIRE(data::end_of_text_id(*io::make_tokenizer(*back.tokenizer)) == 256);
    REQUIRE(io::make_tokenizer(*back.tokenizer)->encode("a\n") == std::vector<int64_t>{97, 10});
  }
  for (const data::ChatFormat format : {data::ChatFormat::chatml, data::ChatFormat::llama3}) {
    INFO(base::choice_name(format));
    const data::ChatTokens tokens(format, byte);
    ModelFiles m = gguf_with_tokenizer(byte, 15, tokens.extra_ids());
    m.chat_format = format;
    const std::string bytes = gguf_bytes(m);
    const gguf::File f = header_of(bytes);
    const auto& written = f.find("tokenizer.ggml.tokens")->strings;
    REQUIRE(static_cast<int64_t>(written.size()) == 256 + tokens.extra_ids());
    for (int64_t id = 256; id < 256 + tokens.extra_ids(); ++id) {
      REQUIRE(written.at(id) == tokens.text_of(id));
      REQUIRE(f.find("tokenizer.ggml.token_type")->ints.at(id) == 3);
    }
    REQUIRE(id_key(f, "eos_token_id") == tokens.end_of_turn());
    REQUIRE(id_key(f, "eot_token_id") == tokens.end_of_turn());
    if (format == data::ChatFormat::llama3)
      REQUIRE(written.at(id_key(f, "bos_token_id")) == "<|begin_of_text|>");
    const std::string chat_template = f.find("tokenizer.chat_template")->strings.at(0);
    REQUIRE(chat_template == data::chat_format_row(format).chat_template);
    REQUIRE(data::detect_chat_format(chat_template) == format);
    // read back: the format, and its tokens the tokenizer's own at the same ids
    const ModelFiles back = read_bytes(bytes);
    REQUIRE(back.chat_format == format);
    const std::unique_ptr<data::Tokenizer> tok = io::make_tokenizer(*back.tokenizer);
    const data::ChatTokens again(format, *tok);
    REQUIRE(again.extra_ids() == 0);
    REQUIRE(again.end_of_turn() == tokens.end_of_turn());
    const std::vector<data::ChatMessage> chat = {{data::ChatRole::user, "hi"}};
    REQUIRE(again.conversation(chat, true) == tokens.conversation(chat, true));
  }
}

TEST_CASE("a GGUF chat template of neither family is noted, not kept", "[gguf][special_tokens]") {
  ModelFiles m = gguf_with_tokenizer(data::ByteTokenizer(), 16, 2);
  m.chat_format = data::ChatFormat::chatml;
  const ModelFiles back = read_bytes(rewritten(gguf_bytes(m), [](gguf::File& f) {
    set_key(f, "tokenizer.chat_template", gguf::Value::string("[INST] {{ content }} [/INST]"));
  }));
  REQUIRE_FALSE(back.chat_format);
  REQUIRE(std::any_of(back.dropped.begin(), back.dropped.end(), [](const std::string& note) {
    return note.find("tokenizer.chat_template, which writes neither") != std::string::npos;
  }));
}

TEST_CASE("a char tokenizer is refused by GGUF with the reason") {
  const data::CharTokenizer chars = data::CharTokenizer::from_text(kGgufText);
  REQUIRE_THROWS_WITH(gguf_bytes(gguf_with_tokenizer(chars, 11)),
                      Contains("a GGUF file cannot hold this tokenizer"));
  ModelFiles m = gguf_with_tokenizer(chars, 11);
  m.tokenizer.reset();  // the weights alone can go
  REQUIRE_NOTHROW(read_bytes(gguf_bytes(m)));
}

TEST_CASE("a GGUF tokenizer that lies is refused naming the key") {
  const std::string good =
      gguf_bytes(gguf_with_tokenizer(data::BpeTokenizer::train(kGgufText, 280), 12));
  using gguf::Value;
  const auto edit = [&](const std::function<void(gguf::File&)>& e) { return rewritten(good, e); };
  gguf_require_refused(
      edit([](gguf::File& f) { set_key(f, "tokenizer.ggml.model", Value::string("llama")); }),
      "key tokenizer.ggml.model is not 'gpt2'");
  gguf_require_refused(
      edit([](gguf::File& f) { set_key(f, "tokenizer.ggml.pre", Value::string("falcon")); }),
      "key tokenizer.ggml.pre is 'falcon'");
  gguf_require_refused(edit([](gguf::File& f) { erase_key(f, "tokenizer.ggml.tokens"); }),
                       "key tokenizer.ggml.tokens is missing");
  gguf_require_refused(edit([](gguf::File& f) {
                         set_key(f, "tokenizer.ggml.tokens", Value::string_array({"a", "b"}));
                       }),
                       "key tokenizer.ggml.tokens has 2 entries, the model's vocabulary 280");
  gguf_require_refused(
      edit([](gguf::File& f) { set_key(f, "tokenizer.ggml.tokens", Value::string("a")); }),
      "key tokenizer.ggml.tokens is not an array of STRING");
  gguf_require_refused(edit([](gguf::File& f) {
                         auto m = f.find("tokenizer.ggml.merges")->strings;
                         m[3] = "ab";
                         set_key(f, "tokenizer.ggml.merges", Value::string_array(m));
                       }),
                       "tokenizer.ggml.merges: entry 3 ('ab') is not two tokens");
  gguf_require_refused(edit([](gguf::File& f) {
                         auto m = f.find("tokenizer.ggml.merges")->strings;
                         std::swap(m[0], m[20]);
                         set_key(f, "tokenizer.ggml.merges", Value::string_array(m));
                       }),
                       "keys tokenizer.ggml.tokens and merges");
  gguf_require_refused(
      edit([](gguf::File& f) { set_key(f, "tokenizer.ggml.eos_token_id", Value::u32(280)); }),
      "key tokenizer.ggml.eos_token_id is not a token id below 280");
  // what attograd cannot keep is read and noted
  const ModelFiles bos = read_bytes(edit(
      [](gguf::File& f) { set_key(f, "tokenizer.ggml.add_bos_token", Value::boolean(true)); }));
  REQUIRE(bos.dropped.size() == 1);
  REQUIRE_THAT(bos.dropped[0], Contains("add_bos_token true"));
  const ModelFiles extra =
      read_bytes(edit([](gguf::File& f) { set_key(f, "general.license", Value::string("mit")); }));
  REQUIRE(extra.dropped == std::vector<std::string>{"keys general.license"});
}

TEST_CASE("a GGUF file is written to a file whole or not at all, named after it") {
  ag_test::TempDir dir;
  const ModelFiles m = interop_test::random_model(kConfig, 13);
  const std::string path = dir.file("tiny-gpt.gguf");
  interop::write_gguf(m, path, interop::StoredType::bf16);
  const ModelFiles back = interop::read_gguf(path);
  interop_test::require_same_weights(back, bf16_matrices(m));
  REQUIRE(gguf::read_header(InputBytes::open(path)).find("general.name")->strings[0] == "tiny-gpt");
  nn::GPTConfig rms = kConfig;
  rms.norm = nn::NormKind::rms_norm;
  const std::string refused = dir.file("rms.gguf");
  REQUIRE_THROWS_WITH(
      interop::write_gguf(interop_test::random_model(rms, 13), refused, interop::StoredType::f32),
      Contains(refused + ": a GGUF file cannot hold this model"));
  REQUIRE(std::distance(std::filesystem::directory_iterator(dir.path),
                        std::filesystem::directory_iterator()) == 1);  // no temporary left
}

// The Llama family as llama.cpp's llama, qwen2 and qwen3 (interop/gguf_llama.h).
namespace {

const gguf::TensorInfo& tensor_named(const gguf::File& f, const std::string& name) {
  for (const auto& t : f.tensors)
    if (t.name == name) return t;
  FAIL("no tensor " << name);
  return f.tensors.front();
}

std::vector<float> stored_f32(const std::string& bytes, const gguf::File& f,
                              const std::string& name) {
  return gguf::read_tensor(InputBytes::of(bytes, "model.gguf"), f, tensor_named(f, name));
}

}  // namespace

TEST_CASE("Llama, Qwen2 and Qwen3 models round-trip through GGUF bit for bit") {
  for (const auto& [arch, config] : interop_test::llama_family_like()) {
    INFO(arch);
    const ModelFiles m = interop_test::random_model(config, 21);
    const ModelFiles back = read_bytes(gguf_bytes(m));
    REQUIRE(header_of(gguf_bytes(m)).find("general.architecture")->strings[0] == arch);
    interop_test::require_same_config(back.config, m.config);
    interop_test::require_same_weights(back, m);
    REQUIRE(back.dropped.empty());
    const ModelFiles back16 = read_bytes(gguf_bytes(m, interop::StoredType::bf16));
    interop_test::require_same_config(back16.config, m.config);
    interop_test::require_same_weights(back16, bf16_matrices(m));
  }
}

TEST_CASE(
    "llama's attn_q and attn_k rows are interleaved per head as llama.cpp's rope turns "
    "them; qwen's are not") {
  const auto configs = interop_test::llama_family_like();
  const ModelFiles llama = interop_test::random_model(configs[0].second, 22);
  const std::string bytes = gguf_bytes(llama);
  const gguf::File f = header_of(bytes);
  const std::map<std::string, ag::Tensor> w(llama.weights.begin(), llama.weights.end());
  // a head of 8 rows: GGUF rows 0..7 are attograd's 0, 4, 1, 5, 2, 6, 3, 7 (width 64)
  const std::vector<float> q = stored_f32(bytes, f, "blk.1.attn_q.weight");
  const std::vector<float> k = stored_f32(bytes, f, "blk.1.attn_k.weight");
  const float* wq = w.at("blocks.1.attn.W_query.weight").data<float>();
  const float* wk = w.at("blocks.1.attn.W_key.weight").data<float>();
  for (int64_t row = 0; row < 16; ++row) {
    const int64_t head = row / 8, within = row % 8, source = head * 8 + within % 2 * 4 + within / 2;
    REQUIRE(std::memcmp(&q[row * 64], wq + source * 64, 64 * 4) == 0);
    REQUIRE(std::memcmp(&k[row * 64], wk + source * 64, 64 * 4) == 0);
  }
  const std::vector<float> v = stored_f32(bytes, f, "blk.1.attn_v.weight");
  REQUIRE(std::memcmp(v.data(), w.at("blocks.1.attn.W_value.weight").data<float>(), 16 * 64 * 4) ==
          0);
  const ModelFiles qwen2 = interop_test::random_model(configs[1].second, 23);
  const std::string qwen_bytes = gguf_bytes(qwen2);
  const std::vector<float> qb = stored_f32(qwen_bytes, header_of(qwen_bytes), "blk.0.attn_q.bias");
  const std::map<std::string, ag::Tensor> qw(qwen2.weights.begin(), qwen2.weights.end());
  const ag::Tensor& bias = qw.at("blocks.0.attn.W_query.bias");
  REQUIRE(qb.size() == static_cast<size_t>(bias.numel()));
  REQUIRE(std::memcmp(qb.data(), bias.data<float>(), qb.size() * 4) == 0);
}

TEST_CASE("a Llama-family GGUF file has the keys and tensors llama.cpp's converter writes") {
  const auto configs = interop_test::llama_family_like();
  const std::string llama = gguf_bytes(interop_test::random_model(configs[0].second, 24));
  const gguf::File f = header_of(llama);
  REQUIRE(f.find("llama.attention.head_count")->ints[0] == 8);
  REQUIRE(f.find("llama.attention.head_count_kv")->ints[0] == 2);
  REQUIRE(f.find("llama.feed_forward_length")->ints[0] == 96);
  REQUIRE(f.find("llama.rope.dimension_count")->ints[0] == 8);
  REQUIRE(f.find("llama.rope.freq_base")->floats[0] == 500000);
  REQUIRE(f.find("llama.attention.layer_norm_rms_epsilon")->floats[0] == 1e-5f);
  REQUIRE(f.find("llama.vocab_size")->ints[0] == 97);
  REQUIRE(f.find("llama.attention.key_length") == nullptr);
  REQUIRE(tensor_named(f, "output.weight").ne == std::vector<uint64_t>{64, 97});
  // Llama 3's factors: 1 for short wavelengths, the factor for long ones, blended between
  const std::vector<float> factors = stored_f32(llama, f, "rope_freqs.weight");
  REQUIRE(factors.size() == 4);
  REQUIRE(factors == interop::llama3_rope_factors(configs[0].second));
  REQUIRE(factors[0] > 1.0f);  // a wavelength of 2 pi, between 16 / 4 and 16: blended
  REQUIRE(factors[0] < 32.0f);
  REQUIRE(factors[3] == 32.0f);
  const std::string qwen3 = gguf_bytes(interop_test::random_model(configs[2].second, 25));
  const gguf::File g = header_of(qwen3);
  REQUIRE(g.find("qwen3.attention.key_length")->ints[0] == 16);
  REQUIRE(g.find("qwen3.attention.value_length")->ints[0] == 16);
  REQUIRE(g.find("qwen3.attention.layer_norm_rms_epsilon")->floats[0] == 1e-6f);
  REQUIRE(tensor_named(g, "blk.0.attn_q_norm.weight").ne == std::vector<uint64_t>{16});
  REQUIRE(tensor_named(g, "blk.0.attn_q.weight").ne == std::vector<uint64_t>{48, 64});
  REQUIRE(tensor_named(g, "blk.0.attn_k.weight").ne == std::vector<uint64_t>{48, 32});
  REQUIRE(find_if(g.tensors.begin(), g.tensors.end(), [](const auto& t) {
            return t.name == "output.weight";
          }) == g.tensors.end());  // tied: llama.cpp reads token_embd
}

TEST_CASE("Llama 3's rope factors are read as Meta's scaling when attograd's keys are absent") {
  nn::GPTConfig meta = interop_test::llama_family_like()[0].second;
  meta.rope_factor = 8, meta.rope_original_context = 8192, meta.d_model = 256;
  meta.n_heads = 2, meta.n_kv_heads = 1;  // heads of 128: the long wavelengths are reached
  const std::string bytes = gguf_bytes(interop_test::random_model(meta, 26));
  const auto strip = [](gguf::File& f) {
    std::erase_if(f.keys, [](const auto& kv) { return kv.first.rfind("attograd.", 0) == 0; });
  };
  interop_test::require_same_config(read_bytes(rewritten(bytes, strip)).config, meta);
  // the test configs' factor 32 and context 16 are not Meta's: the table says so
  const std::string odd =
      gguf_bytes(interop_test::random_model(interop_test::llama_family_like()[0].second, 27));
  gguf_require_refused(rewritten(odd, strip), "tensor rope_freqs.weight: factor 0 is");
}

TEST_CASE("models no GGUF architecture holds are refused with the reason") {
  nn::GPTConfig c = interop_test::llama_family_like()[0].second;
  c.norm = nn::NormKind::layer_norm;
  REQUIRE_THROWS_WITH(gguf_bytes(interop_test::random_model(c, 28)),
                      Contains("cannot hold this model") && Contains("layernorm, not rmsnorm"));
  c = interop_test::llama_family_like()[2].second;
  c.qkv_bias = true;
  REQUIRE_THROWS_WITH(gguf_bytes(interop_test::random_model(c, 29)),
                      Contains("q/k norms and qkv biases"));
}

TEST_CASE("a Llama-family GGUF file whose keys or tensors lie is refused naming them") {
  const std::string good =
      gguf_bytes(interop_test::random_model(interop_test::llama_family_like()[2].second, 30));
  using gguf::Value;
  const auto edit = [&](const std::function<void(gguf::File&)>& e) { return rewritten(good, e); };
  gguf_require_refused(
      edit([](gguf::File& f) { set_key(f, "qwen3.attention.head_count_kv", Value::u32(3)); }),
      "key qwen3.attention.head_count_kv is 3: it must divide attention.head_count (4)");
  gguf_require_refused(
      edit([](gguf::File& f) { set_key(f, "qwen3.attention.value_length", Value::u32(8)); }),
      "key qwen3.attention.value_length differs from key_length");
  gguf_require_refused(
      edit([](gguf::File& f) { set_key(f, "qwen3.rope.dimension_count", Value::u32(8)); }),
      "key qwen3.rope.dimension_count is not the head width 16");
  gguf_require_refused(edit([](gguf::File& f) { set_key(f, "qwen3.vocab_size", Value::u32(98)); }),
                       "key qwen3.vocab_size is not token_embd.weight's 97 rows");
  gguf_require_refused(
      edit([](gguf::File& f) {
        std::erase_if(f.tensors, [](const auto& t) { return t.name == "blk.1.ffn_gate.weight"; });
      }),
      "no tensor blk.1.ffn_gate.weight");
  gguf_require_refused(edit([](gguf::File& f) { f.tensors[1].name = "blk.0.attn_qkv.weight"; }),
                       "tensor blk.0.attn_qkv.weight is not one of llama.cpp's qwen3 tensors");
  gguf_require_refused(
      edit([](gguf::File& f) { set_key(f, "qwen3.rope.freq_base", Value::string("1e6")); }),
      "key qwen3.rope.freq_base is STRING, not a FLOAT32");
  gguf_require_refused(
      edit([](gguf::File& f) { set_key(f, "qwen3.block_count", Value::u32(1u << 20)); }),
      "key qwen3.block_count is 1048576");
}
