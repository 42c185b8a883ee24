// llm.c's checkpoint format (interop/llmc.h): exact round trips in float32 and bfloat16,
// the layout llm.c reads, the models it cannot hold refused with the reason, and every lie
// a header can tell refused with a one-line error naming the file and the field.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/posix_file.h"
#include "gpt2_vocab_support.h"
#include "interop/formats.h"
#include "interop/llmc.h"
#include "interop/llmc_tokenizer.h"
#include "interop_support.h"
#include "io/tokenizer_section.h"
#include "support.h"

using Catch::Matchers::Contains;
using interop::InputBytes;
using interop::InteropError;
using interop::ModelFiles;

namespace {

std::string llmc_bytes(const ModelFiles& m, ag::Precision dtype) {
  std::string bytes;
  interop::write_llmc(m, dtype, [&](const char* d, size_t n) { bytes.append(d, n); });
  return bytes;
}

ModelFiles llmc_read_bytes(std::string bytes) {
  return interop::read_llmc_weights(InputBytes::of(std::move(bytes), "model.bin"));
}

int32_t header_int(const std::string& bytes, int i) {
  int32_t v;
  std::memcpy(&v, bytes.data() + 4 * i, 4);
  return v;
}

std::string with_header_int(std::string bytes, int i, int32_t v) {
  std::memcpy(bytes.data() + 4 * i, &v, 4);
  return bytes;
}

void llmc_require_refused(const std::string& bytes, const std::string& part) {
  REQUIRE_THROWS_MATCHES(llmc_read_bytes(bytes), InteropError,
                         Catch::Matchers::Predicate<InteropError>(
                             [&](const InteropError& e) {
                               const std::string w = e.what();
                               return w.rfind("model.bin: ", 0) == 0 &&
                                      w.find(part) != std::string::npos &&
                                      w.find('\n') == std::string::npos;
                             },
                             "a one-line error naming model.bin and " + part));
}

const nn::GPTConfig kLlmcConfig = interop_test::gpt2_like(300, 16, 32, 4, 2);

}  // namespace

TEST_CASE("an llm.c checkpoint round-trips every tensor bit for bit in float32") {
  const ModelFiles m = interop_test::random_model(kLlmcConfig, 1);
  const ModelFiles back = llmc_read_bytes(llmc_bytes(m, ag::Precision::fp32));
  REQUIRE(back.format == "llmc");
  interop_test::require_same_config(back.config, m.config);
  interop_test::require_same_weights(back, m);
  REQUIRE_FALSE(back.tokenizer);
  REQUIRE(back.dropped.size() == 1);
  REQUIRE_THAT(back.dropped[0], Contains("wte rows 300 to 383"));
}

TEST_CASE("an llm.c bfloat16 checkpoint holds the weights rounded to nearest even") {
  const ModelFiles m = interop_test::random_model(kLlmcConfig, 2);
  const ModelFiles back = llmc_read_bytes(llmc_bytes(m, ag::Precision::bf16));
  interop_test::require_same_weights(back, interop_test::bf16_rounded(m));
  // and a rounded model goes through bfloat16 unchanged
  interop_test::require_same_weights(llmc_read_bytes(llmc_bytes(back, ag::Precision::bf16)), back);
}

TEST_CASE("an llm.c checkpoint has llm.c's header and layout") {
  const ModelFiles m = interop_test::random_model(kLlmcConfig, 3);
  const std::string f32 = llmc_bytes(m, ag::Precision::fp32);
  const std::vector<int32_t> header{20240326, 3, 16, 300, 2, 4, 32, 384};
  for (int i = 0; i < 8; ++i) REQUIRE(header_int(f32, i) == header[static_cast<size_t>(i)]);
  for (int i = 8; i < 256; ++i) REQUIRE(header_int(f32, i) == 0);
  const int64_t C = 32, L = 2, V = 300, Vp = 384, T = 16;
  const int64_t elements = Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
  REQUIRE(f32.size() == static_cast<size_t>(1024 + 4 * elements));
  const auto at = [&](int64_t element) {
    float v;
    std::memcpy(&v, f32.data() + 1024 + 4 * element, 4);
    return v;
  };
  const auto weight = [&](const std::string& name) {
    for (const auto& [n, t] : m.weights)
      if (n == name) return t;
    FAIL("no " << name);
    return ag::Tensor();
  };
  REQUIRE(at(0) == weight("tok_emb.weight").data<float>()[0]);
  for (int64_t i = V * C; i < Vp * C; ++i) REQUIRE(at(i) == 0.0f);  // the padding rows
  REQUIRE(at(Vp * C) == weight("pos_emb.weight").data<float>()[0]);
  // qkvw of layer 1, row C (its first key row), after wte, wpe, ln1w, ln1b and layer 0's qkvw
  const int64_t qkvw = Vp * C + T * C + 2 * L * C;
  REQUIRE(at(qkvw + 3 * C * C + C * C + 1) ==
          weight("blocks.1.attn.W_key.weight").data<float>()[1]);
  const float last = weight("ln_f.bias").data<float>()[C - 1];
  REQUIRE(at(elements - 1) == last);
  REQUIRE(header_int(llmc_bytes(m, ag::Precision::bf16), 1) == 5);
}

TEST_CASE("models llm.c cannot hold are refused with the reason") {
  auto refused = [](nn::GPTConfig c, const std::string& why) {
    REQUIRE_THAT(interop::llmc_cannot_express(c), Contains(why));
    REQUIRE_THROWS_WITH(llmc_bytes(interop_test::random_model(c, 4), ag::Precision::fp32),
                        Contains("llm.c cannot hold this model") && Contains(why));
  };
  nn::GPTConfig c = kLlmcConfig;
  c.qkv_bias = false;
  refused(c, "biases in W_query");
  c = kLlmcConfig, c.tie_weights = false;
  refused(c, "lm_head");
  c = kLlmcConfig, c.norm = nn::NormKind::rms_norm;
  refused(c, "rmsnorm");
  c = kLlmcConfig, c.d_ff = 48;
  refused(c, "d_ff");
  c = kLlmcConfig, c.d_ff = 4 * c.d_model;  // the same as 0
  REQUIRE(interop::llmc_cannot_express(c).empty());
}

TEST_CASE("an llm.c header that lies is refused naming the field") {
  const std::string good =
      llmc_bytes(interop_test::random_model(kLlmcConfig, 5), ag::Precision::fp32);
  llmc_require_refused(with_header_int(good, 0, 20240325), "header[0] (magic)");
  llmc_require_refused(with_header_int(good, 1, 1), "header[1] (version)");
  llmc_require_refused(with_header_int(good, 1, 4), "header[1] (version)");
  const std::vector<std::string> fields{"maxT", "V,", "L,", "NH", "C,"};
  for (int i = 2; i <= 6; ++i) {
    INFO("header[" << i << "]");
    llmc_require_refused(with_header_int(good, i, 0),
                         fmt::format("header[{}] ({}", i, fields[i - 2]));
    llmc_require_refused(with_header_int(good, i, -7), fmt::format("header[{}]", i));
    llmc_require_refused(with_header_int(good, i, std::numeric_limits<int32_t>::max()),
                         fmt::format("header[{}]", i));
  }
  llmc_require_refused(with_header_int(good, 7, 299), "header[7] (Vp");
  llmc_require_refused(with_header_int(good, 5, 5), "not divisible by header[5] (NH)");
  // sizes that agree with each other but not with the file: checked before any allocation
  llmc_require_refused(with_header_int(good, 4, 16384), "needs exactly");
  llmc_require_refused(with_header_int(good, 7, 1 << 30), "needs exactly");
  llmc_require_refused(good.substr(0, good.size() - 1), "needs exactly");
  llmc_require_refused(good + "x", "needs exactly");
  llmc_require_refused(good.substr(0, 1000), "the header");
  llmc_require_refused("", "the header");
}

TEST_CASE("an llm.c checkpoint with a non-finite weight is refused naming the tensor") {
  std::string bytes = llmc_bytes(interop_test::random_model(kLlmcConfig, 6), ag::Precision::fp32);
  const int64_t C = 32, Vp = 384, T = 16, L = 2;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // ln1b of layer 1: after wte, wpe, ln1w
  std::memcpy(bytes.data() + 1024 + 4 * (Vp * C + T * C + L * C + C + 3), &nan, 4);
  llmc_require_refused(bytes, "blocks.1.ln1.bias");
  // a NaN in the padding rows is no weight of the model: dropped with them
  std::string padded = llmc_bytes(interop_test::random_model(kLlmcConfig, 6), ag::Precision::fp32);
  std::memcpy(padded.data() + 1024 + 4 * (300 * C + 5), &nan, 4);
  REQUIRE_NOTHROW(llmc_read_bytes(padded));
}

TEST_CASE("an llm.c checkpoint is written to a file whole or not at all") {
  ag_test::TempDir dir;
  const ModelFiles m = interop_test::random_model(kLlmcConfig, 7);
  const std::string path = dir.file("gpt2.bin");
  interop::write_llmc(m, path, ag::Precision::fp32);
  interop_test::require_same_weights(interop::read_llmc_weights(InputBytes::open(path)), m);
  nn::GPTConfig untied = kLlmcConfig;
  untied.tie_weights = false;
  const std::string refused = dir.file("untied.bin");
  REQUIRE_THROWS_WITH(
      interop::write_llmc(interop_test::random_model(untied, 7), refused, ag::Precision::fp32),
      Contains(refused + ": llm.c cannot hold this model"));
  REQUIRE_FALSE(std::filesystem::exists(refused));
  REQUIRE(std::distance(std::filesystem::directory_iterator(dir.path),
                        std::filesystem::directory_iterator()) == 1);    // no temporary left
  REQUIRE_THROWS_AS(InputBytes::open(dir.path.string()), InteropError);  // a folder
  REQUIRE_THROWS_AS(InputBytes::open(dir.file("missing.bin")), InteropError);
}

TEST_CASE("llm.c's tokenizer file holds GPT-2's tokens as llm.c reads them") {
  const auto tokenizer = data::tokenizer_from_byte_level(ag_test::small_gpt2_vocab());
  const auto& gpt2 = dynamic_cast<const data::Gpt2Tokenizer&>(*tokenizer);
  std::string bytes;
  interop::write_llmc_tokenizer(gpt2, [&](const char* d, size_t n) { bytes.append(d, n); });
  // llm.c's llmc/tokenizer.h: 256 int32, then per token a length byte and the bytes
  REQUIRE(header_int(bytes, 0) == 20240328);
  REQUIRE(header_int(bytes, 1) == 2);
  REQUIRE(header_int(bytes, 2) == 260);
  REQUIRE(header_int(bytes, 3) == 259);
  for (int i = 4; i < 256; ++i) REQUIRE(header_int(bytes, i) == 0);
  size_t at = 1024;
  std::vector<std::string> tokens;
  while (at < bytes.size()) {
    const size_t length = static_cast<uint8_t>(bytes[at]);
    REQUIRE(length > 0);
    tokens.push_back(bytes.substr(at + 1, length));
    at += 1 + length;
  }
  REQUIRE(at == bytes.size());
  REQUIRE(tokens.size() == 260);
  CHECK(tokens[0] == "!");  // GPT-2's byte order starts at '!'
  CHECK(tokens[256] == " t");
  CHECK(tokens[258] == " the");
  CHECK(tokens[259] == "<|endoftext|>");
}

TEST_CASE("an llm.c export writes GPT-2's tokenizer beside the model, or says why not") {
  ag_test::TempDir dir;
  ModelFiles m = interop_test::random_model(kLlmcConfig, 5);
  const std::string path = dir.file("gpt2_run.bin");
  CHECK_THAT(interop::llmc_tokenizer_of(m, path).note, Contains("the model has no tokenizer"));
  m.tokenizer = io::tokenizer_section(data::ByteTokenizer());
  CHECK_THAT(interop::llmc_tokenizer_of(m, path).note,
             Contains("llm.c's tokenizer file holds GPT-2's tokenizer, and this model's is byte"));
  m.tokenizer =
      io::tokenizer_section(*data::tokenizer_from_byte_level(ag_test::small_gpt2_vocab()));
  CHECK(interop::llmc_tokenizer_of(m, path).path == dir.file("gpt2_tokenizer.bin"));
  CHECK_THAT(interop::llmc_tokenizer_of(m, dir.file("gpt2_tokenizer.bin")).note,
             Contains("the model itself is written under that name"));
  interop::export_model(m, "llmc", path);
  const std::string written = base::read_input_file(dir.file("gpt2_tokenizer.bin"), "tokenizer");
  CHECK(header_int(written, 3) == 259);
}
