#include "bench/decoder_micro.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "autograd/generator.h"
#include "bench/decode_bound.h"
#include "bench/micro.h"
#include "nn/block_gemv.h"
#include "nn/inference_kernels.h"

namespace bench {

namespace {

// q8_0_f32: Q8_0 blocks by float32 activations; q8_0: the blocks interleaved, by Q8_0
// activations; q4_k_f32 and q4_k: Q4_K blocks by float32 and by Q8_K activations
// (nn/block_gemv.h).
enum class Format { bf16, q8_0_f32, q8_0, q4_k_f32, q4_k };
const char* format_name(Format f) {
  return f == Format::bf16       ? "bf16"
         : f == Format::q8_0_f32 ? "q8_0-f32"
         : f == Format::q8_0     ? "q8_0"
         : f == Format::q4_k_f32 ? "q4_k-f32"
                                 : "q4_k";
}
bool q8_0_blocks(Format f) {
  return f == Format::q8_0_f32 || f == Format::q8_0;
}

// Bytes of one row of `in` weights.
int64_t row_bytes(Format f, int64_t in) {
  if (f == Format::bf16) return 2 * in;
  return q8_0_blocks(f) ? in / 32 * 34 : in / 256 * 144;
}

// `rows` random rows of `in` weights: bfloat16 of magnitudes in [0.5, 1); blocks of random
// levels with a modest half scale (and minimum) in every block, as a model's (no infinities).
std::vector<uint8_t> random_rows(Format f, int64_t rows, int64_t in, ag::Generator& gen) {
  std::vector<uint8_t> b(static_cast<size_t>(rows * row_bytes(f, in)));
  for (size_t i = 0; i + 8 <= b.size(); i += 8) {
    const uint64_t r = gen.next_u64();
    std::memcpy(&b[i], &r, 8);
  }
  const uint16_t half = 0x2400;  // 2^-6
  if (f == Format::bf16)
    for (size_t i = 0; i + 2 <= b.size(); i += 2) b[i + 1] = (b[i + 1] & 0x80) | 0x3f;
  const size_t block = q8_0_blocks(f) ? 34 : 144, scales = q8_0_blocks(f) ? 1 : 2;
  if (f != Format::bf16)
    for (size_t at = 0; at + block <= b.size(); at += block)
      for (size_t s = 0; s < scales; ++s) std::memcpy(&b[at + 2 * s], &half, 2);
  if (f == Format::q8_0) {
    std::vector<uint8_t> interleaved(b.size());
    nn::inference::interleave_q8_0(b.data(), rows, in, interleaved.data());
    return interleaved;
  }
  return b;
}

nn::inference::Weights weights_at(Format f, const uint8_t* p) {
  nn::inference::Weights w;
  if (f == Format::bf16) w.bf16 = reinterpret_cast<const ag::bfloat16*>(p);
  if (f == Format::q8_0_f32) w.q8_0 = p;
  if (f == Format::q8_0) w.q8_0_q8 = p;
  if (f == Format::q4_k_f32) w.q4_k = p;
  if (f == Format::q4_k) w.q4_k_q8 = p;
  return w;
}

struct Figures {
  double ms, gweights, gbytes, read_gbs;  // read_gbs: 0 for the cache's rows
};

// One call: y = x W^T for `calls` matrices [out, in], the next `stride` bytes on from the last
// (0: the same matrix again).
Figures measure(Format f, const std::vector<uint8_t>& b, int64_t calls, int64_t stride, int64_t out,
                int64_t in) {
  ag::Generator gen(3);
  std::vector<float> x(static_cast<size_t>(in)), y(static_cast<size_t>(out));
  for (auto& v : x) v = static_cast<float>(gen.normal());
  const double ms = median_ms([&] {
    for (int64_t c = 0; c < calls; ++c)
      nn::inference::linear(x.data(), 1, in, weights_at(f, b.data() + c * stride), nullptr, out,
                            out, y.data(), out, false);
  });
  const double weights = static_cast<double>(calls * out * in);
  return {ms, weights / ms / 1e6,
          weights / static_cast<double>(in) * static_cast<double>(row_bytes(f, in)) / ms / 1e6,
          0.0};
}

void print(const std::string& name, Format f, int64_t out, int64_t in, const char* from,
           const Figures& r, bool json) {
  if (json) {
    std::cout << nlohmann::json{{"config", name},
                                {"kernel", "decoder gemv"},
                                {"weights", format_name(f)},
                                {"out", out},
                                {"in", in},
                                {"from", from},
                                {"threads", 1},
                                {"ms", r.ms},
                                {"gweights_per_s", r.gweights},
                                {"gbytes_per_s", r.gbytes},
                                {"read_gbs", r.read_gbs}}
                     .dump()
              << "\n";
    return;
  }
  fmt::print(
      "decoder GEMV {} {:<5} [{}, {}] from {:<6} {:8.3f} ms {:6.2f} G weights/s {:6.2f} GB/s", name,
      format_name(f), out, in, from, r.ms, r.gweights, r.gbytes);
  if (r.read_gbs > 0)
    fmt::print(" (plain read {:.2f} GB/s: {:.0f}%)", r.read_gbs, 100 * r.gbytes / r.read_gbs);
  fmt::print("\n");
}

}  // namespace

int run_decoder_micro(const nn::GPTConfig& model, const std::string& name, bool json) {
  const int64_t C = model.d_model, F = model.ff_width();
  ag::Generator gen(1);
  for (const auto& [out, in] : {std::pair{F, C}, std::pair{C, F}})
    for (Format f :
         {Format::bf16, Format::q8_0_f32, Format::q8_0, Format::q4_k_f32, Format::q4_k}) {
      if (f != Format::bf16 && in % (q8_0_blocks(f) ? 32 : 256) != 0) continue;
      const int64_t matrix = out * row_bytes(f, in);
      const int64_t copies = std::max<int64_t>(1, ((int64_t{256} << 20) + matrix - 1) / matrix);
      std::vector<uint8_t> b = random_rows(f, copies * out, in, gen);
      Figures r = measure(f, b, copies, matrix, out, in);
      r.read_gbs = read_gbs(
          {{reinterpret_cast<const float*>(b.data()), static_cast<int64_t>(b.size() / 4)}}, 1, 5);
      print(name, f, out, in, "memory", r, json);
      const int64_t rows = 64, calls = std::max<int64_t>(1, (int64_t{1} << 24) / (rows * in));
      print(name, f, rows, in, "cache", measure(f, b, calls, 0, rows, in), json);
    }
  return 0;
}

}  // namespace bench
