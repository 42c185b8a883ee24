// interop/safetensors.h: safetensors files read back as written (F32, BF16; F16 widened
// exactly), and hostile files refused with one line naming the file and the field: a header
// length past the file or over 100 MB, offsets outside the data, overlapping or leaving gaps,
// a shape that disagrees with its bytes, an unknown dtype, a name twice; every dtype of the
// format named in a header, F64 and F8 read, the rest refused when read.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "interop/model_files.h"
#include "interop/safetensors.h"
#include "support.h"

using Catch::Matchers::Contains;

namespace {

// A safetensors image: the 8-byte little-endian length, the header text, the data.
std::string image(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

// The one-line InteropError reading bytes gives.
std::string safetensors_refusal(const std::string& bytes) {
  try {
    interop::SafetensorsReader::from_bytes(bytes, "x.safetensors");
  } catch (const interop::InteropError& e) {
    const std::string what = e.what();
    CHECK(what.find('\n') == std::string::npos);
    CHECK(what.rfind("x.safetensors: ", 0) == 0);
    return what;
  }
  FAIL("read without an error");
  return "";
}

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

}  // namespace

TEST_CASE("safetensors written F32 and BF16 read back as written", "[safetensors]") {
  ag_test::TempDir dir;
  const std::vector<float> a = {1.0f, -2.5f, 3.14159f, 1e-20f, 65504.0f, -0.0f};
  const std::vector<interop::SafetensorsTensor> tensors = {
      {"b.weight", {2, 3}, [&](float* out) { std::copy(a.begin(), a.end(), out); }},
      {"a.bias", {1}, [](float* out) { out[0] = 7.0f; }},
      {"empty", {0, 4}, [](float*) {}}};
  for (auto dtype : {interop::StoredType::f32, interop::StoredType::bf16}) {
    const std::string path = dir.file(std::string(interop::dtype_name(dtype)) + ".safetensors");
    interop::write_safetensors(path, tensors, dtype, {{"format", "pt"}});
    interop::SafetensorsReader in(path);
    REQUIRE(in.entries().size() == 3);
    CHECK(in.metadata().at("format") == "pt");
    const auto* w = in.find("b.weight");
    REQUIRE(w);
    CHECK(w->shape == ag::Shape{2, 3});
    CHECK(std::string(w->dtype->name) == interop::dtype_name(dtype));
    const ag::Tensor t = in.read(*w);
    for (size_t i = 0; i < a.size(); ++i)
      CHECK(t.data<float>()[i] ==
            (dtype == interop::StoredType::f32 ? a[i] : ag::bf16_rounded(a[i])));
    CHECK(in.read(*in.find("a.bias")).data<float>()[0] == 7.0f);
    CHECK(in.read(*in.find("empty")).numel() == 0);
    // the header is padded with spaces so that the data starts 8-byte aligned
    const std::string bytes = base::read_input_file(path, "test file");
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    CHECK(n % 8 == 0);
  }
}

TEST_CASE("safetensors F16 and BF16 are widened exactly", "[safetensors]") {
  // 1, 2^-24 (the smallest subnormal), -0, 65504 (the largest), +inf, -inf, NaN
  const uint16_t f16[] = {0x3C00, 0x0001, 0x8000, 0x7BFF, 0x7C00, 0xFC00, 0x7E00};
  std::string data(sizeof f16, '\0');
  std::memcpy(data.data(), f16, sizeof f16);
  const std::string bytes =
      image(R"({"h":{"dtype":"F16","shape":[7],"data_offsets":[0,14]}})", data);
  auto in = interop::SafetensorsReader::from_bytes(bytes, "x.safetensors");
  const ag::Tensor t = in.read(in.entries()[0]);
  const float* v = t.data<float>();
  CHECK(v[0] == 1.0f);
  CHECK(v[1] == std::ldexp(1.0f, -24));
  CHECK((v[2] == 0.0f && std::signbit(v[2])));
  CHECK(v[3] == 65504.0f);
  CHECK(v[4] == INFINITY);
  CHECK(v[5] == -INFINITY);
  CHECK(std::isnan(v[6]));
  const uint16_t bf16[] = {0x3F80, 0xC0A0};  // 1, -5
  std::memcpy(data.data(), bf16, 4);
  const std::string bf16_bytes =
      image(R"({"b":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", data.substr(0, 4));
  auto b = interop::SafetensorsReader::from_bytes(bf16_bytes, "x.safetensors");
  const ag::Tensor bt = b.read(b.entries()[0]);
  CHECK(bt.data<float>()[0] == 1.0f);
  CHECK(bt.data<float>()[1] == -5.0f);
}

TEST_CASE("safetensors header lengths past the file or over 100 MB are refused", "[safetensors]") {
  CHECK_THAT(safetensors_refusal("abc"), Contains("too short"));
  std::string lying = image("{}");
  lying[0] = 100;  // 100 bytes of header in a file of 10
  CHECK_THAT(safetensors_refusal(lying), Contains("header length 100 is past the end of the file"));
  // a sparse file of 101 MB whose header claims 100,000,001 bytes: refused before reading
  ag_test::TempDir dir;
  const std::string path = dir.file("big.safetensors");
  {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    const uint64_t n = interop::kMaxSafetensorsHeader + 1;
    REQUIRE(::pwrite(fd, &n, 8, 0) == 8);
    REQUIRE(::ftruncate(fd, 101'000'000) == 0);
    ::close(fd);
  }
  try {
    interop::SafetensorsReader in(path);
    FAIL("read");
  } catch (const interop::InteropError& e) {
    CHECK_THAT(e.what(), Contains("header length 100000001 is too large"));
    CHECK_THAT(e.what(), Contains(path));
  }
}

TEST_CASE("safetensors offsets outside the data, overlaps and gaps are refused", "[safetensors]") {
  const std::string data = floats({1, 2, 3, 4});
  auto two = [&](const std::string& a, const std::string& b) {
    return image(fmt::format(R"({{"a":{{"dtype":"F32","shape":[2],"data_offsets":{}}},)"
                             R"("b":{{"dtype":"F32","shape":[2],"data_offsets":{}}}}})",
                             a, b),
                 data);
  };
  CHECK_THAT(safetensors_refusal(two("[0,8]", "[8,24]")),
             Contains("tensor 'b': data_offsets [8, 24] lie outside the data region of 16 bytes"));
  CHECK_THAT(safetensors_refusal(two("[0,8]", "[4,12]")),
             Contains("tensor 'b' (bytes 4 to 12) overlaps tensor 'a'"));
  CHECK_THAT(safetensors_refusal(
                 image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", data)),
             Contains("bytes 0 to 4 of the data region to no tensor"));
  CHECK_THAT(
      safetensors_refusal(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data)),
      Contains("bytes 8 to 16 of the data region to no tensor (after the last)"));
  CHECK_THAT(safetensors_refusal(two("[8,0]", "[0,8]")),
             Contains("tensor 'a': data_offsets [8, 0] lie outside"));
  CHECK_THAT(safetensors_refusal(two("[0,8,9]", "[8,16]")),
             Contains("data_offsets [0,8,9] is not a pair"));
  CHECK_THAT(safetensors_refusal(two("[-1,8]", "[8,16]")),
             Contains("is not a pair of byte offsets"));
}

TEST_CASE("safetensors shapes that disagree with their bytes are refused", "[safetensors]") {
  const std::string data = floats({1, 2, 3, 4});
  auto one = [&](const std::string& shape) {
    return image(
        fmt::format(R"({{"a":{{"dtype":"F32","shape":{},"data_offsets":[0,16]}}}})", shape), data);
  };
  CHECK_THAT(safetensors_refusal(one("[3]")),
             Contains("tensor 'a': shape [3] of F32 needs 12 bytes, but "
                      "data_offsets [0, 16] hold 16"));
  CHECK_THAT(safetensors_refusal(one("[-4]")), Contains("holds -4, not a size"));
  CHECK_THAT(safetensors_refusal(one("[2.0,2]")), Contains("not a size"));
  // an element count that overflows 64 bits is no allocation, only an error
  CHECK_THAT(safetensors_refusal(one("[4294967296,4294967296,4294967296]")),
             Contains("needs more than the file's bytes"));
  CHECK_THAT(safetensors_refusal(one("[1,1,1,1,1,1,1,1,4]")), Contains("more than 8"));
  CHECK_THAT(safetensors_refusal(one("\"4\"")), Contains("shape is a string, not an array"));
}

TEST_CASE(
    "safetensors headers may name every dtype; only a tensor of one without weights is "
    "refused, when read",
    "[safetensors]") {
  std::string header = "{", data;
  for (const interop::SafetensorsDtype& d : interop::safetensors_dtypes()) {
    const uint64_t count = d.bits == 6 ? 4 : 2;  // whole bytes: two of F6 are 12 bits
    const uint64_t size = count * d.bits / 8;
    header += fmt::format(R"({}"t_{}":{{"dtype":"{}","shape":[{}],"data_offsets":[{},{}]}})",
                          header.size() > 1 ? "," : "", d.name, d.name, count, data.size(),
                          data.size() + size);
    data.append(size, '\0');
  }
  auto in = interop::SafetensorsReader::from_bytes(image(header + "}", data), "x.safetensors");
  REQUIRE(in.entries().size() == interop::safetensors_dtypes().size());
  for (const char* name : {"F32", "F16", "BF16", "F64", "F8_E4M3", "F8_E5M2"})
    CHECK(in.read(*in.find(std::string("t_") + name)).data<float>()[1] == 0.0f);
  for (const char* name : {"BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64", "C64",
                           "F8_E8M0", "F6_E2M3", "F4"})
    CHECK_THROWS_WITH(
        in.read(*in.find(std::string("t_") + name)),
        Contains(fmt::format("tensor 't_{}' is {}, which holds no weights", name, name)));
  CHECK_THAT(safetensors_refusal(image(R"({"a":{"dtype":"Q4_K","shape":[1],"data_offsets":[0,8]}})",
                                       std::string(8, '\0'))),
             Contains("unknown dtype \"Q4_K\""));
  CHECK_THAT(safetensors_refusal(image(R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})",
                                       std::string(2, '\0'))),
             Contains("tensor 'a': shape [3] of F4 is 12 bits, not a whole number of bytes"));
  CHECK_THAT(
      safetensors_refusal(
          image(R"({"a":{"dtype":"I64","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'))),
      Contains(
          "shape [2] of I64 needs more than the file's bytes, but data_offsets [0, 8] hold 8"));
}

TEST_CASE("safetensors F64 is rounded to float32, F8_E4M3 and F8_E5M2 widened exactly",
          "[safetensors]") {
  const double f64[] = {0.1, -3.0, 1e300};
  std::string data(sizeof f64, '\0');
  std::memcpy(data.data(), f64, sizeof f64);
  // E4M3 (PyTorch's float8_e4m3fn): 1, -448 (the largest), 2^-9 (the smallest subnormal),
  // 0.875 * 2^-6 (the largest subnormal), NaN; E5M2: 1, -57344, 2^-16, +inf, NaN
  const uint8_t e4m3[] = {0x38, 0xFE, 0x01, 0x07, 0x7F};
  const uint8_t e5m2[] = {0x3C, 0xFB, 0x01, 0x7C, 0x7E};
  data.append(reinterpret_cast<const char*>(e4m3), 5);
  data.append(reinterpret_cast<const char*>(e5m2), 5);
  auto in = interop::SafetensorsReader::from_bytes(
      image(R"({"d":{"dtype":"F64","shape":[3],"data_offsets":[0,24]},)"
            R"("a":{"dtype":"F8_E4M3","shape":[5],"data_offsets":[24,29]},)"
            R"("b":{"dtype":"F8_E5M2","shape":[5],"data_offsets":[29,34]}})",
            data),
      "x.safetensors");
  const ag::Tensor d = in.read(*in.find("d")), a = in.read(*in.find("a")),
                   b = in.read(*in.find("b"));
  CHECK(d.data<float>()[0] == 0.1f);
  CHECK(d.data<float>()[1] == -3.0f);
  CHECK(d.data<float>()[2] == INFINITY);
  const float* av = a.data<float>();
  CHECK(av[0] == 1.0f);
  CHECK(av[1] == -448.0f);
  CHECK(av[2] == std::ldexp(1.0f, -9));
  CHECK(av[3] == 0.875f * std::ldexp(1.0f, -6));
  CHECK(std::isnan(av[4]));
  const float* bv = b.data<float>();
  CHECK(bv[0] == 1.0f);
  CHECK(bv[1] == -57344.0f);
  CHECK(bv[2] == std::ldexp(1.0f, -16));
  CHECK(bv[3] == INFINITY);
  CHECK(std::isnan(bv[4]));
}

TEST_CASE("safetensors headers that are not what the format says are refused", "[safetensors]") {
  const std::string data = floats({1, 2});
  const std::string entry = R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  CHECK_THAT(safetensors_refusal(image(R"({"a":)" + entry + R"(,"a":)" + entry + "}", data)),
             Contains("twice"));
  CHECK_THAT(safetensors_refusal(image("[1,2]", data)),
             Contains("header is an array, not a JSON object"));
  CHECK_THAT(safetensors_refusal(image("{\"a\":", data)), Contains("header: "));
  CHECK_THAT(safetensors_refusal(image(R"({"a":{"dtype":"F32","shape":[2]}})", data)),
             Contains("tensor 'a': no data_offsets"));
  CHECK_THAT(safetensors_refusal(
                 image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", data)),
             Contains("tensor 'a': unknown field 'x'"));
  CHECK_THAT(safetensors_refusal(image(R"({"__metadata__":{"k":1},"a":)" + entry + "}", data)),
             Contains("__metadata__ 'k' is an unsigned integer, not a string"));
  CHECK_THAT(safetensors_refusal(image(std::string(20, '[') + std::string(20, ']'), data)),
             Contains("header is an array, not a JSON object"));
  CHECK_THAT(safetensors_refusal(
                 image("{\"a\":" + std::string(20, '[') + std::string(20, ']') + "}", data)),
             Contains("deeper than"));
  // spaces after the JSON, as the format allows for alignment
  CHECK_NOTHROW(interop::SafetensorsReader::from_bytes(image(R"({"a":)" + entry + "}    ", data),
                                                       "x.safetensors"));
}
