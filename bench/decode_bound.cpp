#include "bench/decode_bound.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "nn/gpt.h"
#include "nn/inference.h"
#include "nn/inference_kernels.h"

namespace bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// A step's seconds from position `start` (prefilled) over `steps` steps, by the wall clock
// and by the CPU time of the process's threads (under other programs' load the wall clock
// also counts the time they held the cores: a team of 2 that held its cores takes half its
// CPU time by the clock; a step the pace runs on one thread, all of it), and the read
// bandwidth (GB/s, `read`) measured just before and just after the steps: a shared
// machine's bandwidth moved by a third from one minute to the next (28 to 40 GB/s), so one
// read for all the formats bounded none of them. The fastest of `rounds` is kept, with the
// mean of the reads around it.
struct Round {
  double step, cpu, read_gbs;
};
Round fastest_round(nn::CachedInference& dec, int64_t start, int64_t steps, int rounds,
                    const std::function<double()>& read) {
  std::vector<int64_t> ids(static_cast<size_t>(start), 1), one{2};
  Round best{1e30, 1e30, 0};
  for (int r = 0; r < rounds; ++r) {
    dec.prefill(ids, start);
    const double before = read();
    const auto t0 = Clock::now();
    const double c0 = cpu_seconds();
    for (int64_t k = 0; k < steps; ++k) dec.step(one);
    const double step = seconds_since(t0) / static_cast<double>(steps);
    const double cpu = (cpu_seconds() - c0) / static_cast<double>(steps);
    const double after = read();
    if (step < best.step) best = {step, cpu, 0.5 * (before + after)};
  }
  return best;
}

}  // namespace

double read_gbs(const std::vector<std::pair<const float*, int64_t>>& spans, int threads,
                int rounds) {
  typedef float v16 __attribute__((vector_size(64)));
  double best = 1e30, bytes = 0;
  for (const auto& [p, n] : spans) bytes += 4.0 * static_cast<double>(n);
  float sink = 0;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      v16 acc[4] = {};
      for (const auto& [p, n] : spans) {
        const auto [i0, i1] = nn::inference::share(n, omp_get_thread_num(), threads, 64);
        for (int64_t i = i0; i + 64 <= i1; i += 64)
          for (int k = 0; k < 4; ++k) {
            v16 v;
            std::memcpy(&v, p + i + 16 * k, sizeof v);
            acc[k] += v;
          }
      }
      sink += (acc[0] + acc[1] + acc[2] + acc[3])[0];
    }
    best = std::min(best, seconds_since(t0));
  }
  if (sink == 1e30f) std::cout << ' ';  // keeps the sums
  return bytes / best / 1e9;
}

namespace {

struct DecodeFigures {
  const char* weights;
  double bytes_per_token, read_gbs, tokens_s;
  double cpu_ms;  // the CPU time of the process's threads a token
  double bound_tokens_s() const { return read_gbs * 1e9 / bytes_per_token; }
};

void print(const std::string& name, int threads, const DecodeFigures& f, bool json) {
  const double share = f.tokens_s / f.bound_tokens_s();
  if (json) {
    std::cout << nlohmann::json{{"config", name},
                                {"mode", "decode"},
                                {"weights", f.weights},
                                {"threads", threads},
                                {"weight_bytes_per_token", f.bytes_per_token},
                                {"read_gbs", f.read_gbs},
                                {"bound_tokens_s", f.bound_tokens_s()},
                                {"tokens_s", f.tokens_s},
                                {"cpu_ms_per_token", f.cpu_ms},
                                {"share_of_bound", share}}
                     .dump()
              << "\n";
    return;
  }
  std::cout << fmt::format(
      "{} {} weights: {:.1f} MB a token / {:.1f} GB/s read on {} threads around the steps = "
      "bound {:.1f} tokens/s; decoding {:.1f} tokens/s ({:.0f}% of the bound; {:.3g} ms of CPU a "
      "token)\n",
      name, f.weights, f.bytes_per_token / 1e6, f.read_gbs, threads, f.bound_tokens_s(), f.tokens_s,
      100 * share, f.cpu_ms);
}

}  // namespace

namespace {

// Bytes of the streamed matrices a token reads in `format` (q4_k's short rows as Q8_0).
double weight_bytes(const nn::GPT& model, nn::WeightFormat format) {
  double bytes = 0;
  for (const auto& m : model.streamed_matrices()) {
    const auto* l = nn::decoder_blocks(format, m.weight.numel() / m.weight.shape()[0]);
    const double per_weight = l ? static_cast<double>(l->bytes) / static_cast<double>(l->elements)
                              : format == nn::WeightFormat::bf16 ? 2.0
                                                                 : 4.0;
    bytes += per_weight * static_cast<double>(m.elements);
  }
  return bytes;
}

void round_to_q4_k(nn::GPT& model) {
  nn::round_weights_to_q4_k(model);
}

}  // namespace

// One sequence, a step at positions 100 and on: the steps `sample` takes after a prompt.
int run_decode(const nn::GPTConfig& cfg, const std::string& name, int threads, int64_t steps,
               bool json) {
  nn::GPTConfig c = cfg;
  c.dropout = 0.0;
  const int64_t start = std::min<int64_t>(100, c.context_length / 2);
  c.context_length = std::max(c.context_length, start + steps + 1);
  nn::GPT model(c, 1);
  model.eval();
  std::vector<std::pair<const float*, int64_t>> spans;
  double elements = 0;
  for (const auto& m : model.streamed_matrices()) {
    spans.emplace_back(m.weight.data<float>(), m.elements);
    elements += static_cast<double>(m.elements);
  }
  // weights smaller than 256 MB may stay in the caches between reads: the bandwidth of
  // memory is then measured on a 256 MB buffer of its own (the bound is memory's, loose)
  constexpr int64_t kReadFloats = int64_t{64} << 20;
  std::vector<float> own;
  if (elements < static_cast<double>(kReadFloats)) {
    own.assign(static_cast<size_t>(kReadFloats), 1.0f);
    spans = {{own.data(), kReadFloats}};
  }
  const auto read = [&] { return read_gbs(spans, threads, 3); };
  // each format's bytes a weight, and how the model's matrices are rounded to it first
  struct Format {
    nn::WeightFormat format;
    const char* name;
    void (*round)(nn::GPT&);
  };
  const Format formats[] = {{nn::WeightFormat::fp32, "fp32", nullptr},
                            {nn::WeightFormat::bf16, "bf16", nn::round_weights_to_bfloat16},
                            {nn::WeightFormat::q8_0, "q8_0", nn::round_weights_to_q8_0},
                            {nn::WeightFormat::q4_k, "q4_k", round_to_q4_k}};
  for (const Format& f : formats) {
    if (f.round) f.round(model);
    nn::CachedInference dec(model, 1, f.format, start + steps);
    const Round r = fastest_round(dec, start, steps, 2, read);
    print(name, threads,
          {f.name, weight_bytes(model, f.format), r.read_gbs, 1 / r.step, 1e3 * r.cpu}, json);
  }
  return 0;
}

}  // namespace bench
