#include "bench/decode_bound.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "nn/gpt.h"
#include "nn/inference.h"
#include "nn/inference_kernels.h"
#include "nn/lanes.h"

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
// bandwidth (GB/s, `read`) measured just before and just after the steps, their mean: a
// shared machine's bandwidth moved by a third from one minute to the next (28 to 40 GB/s),
// so one read for all the formats bounded none of them.
struct Round {
  double step, cpu, read_gbs;
};
Round timed_round(nn::CachedInference& dec, int64_t start, int64_t steps,
                  const std::function<double()>& read) {
  std::vector<int64_t> ids(static_cast<size_t>(start), 1), one{2};
  dec.prefill(ids, start);
  dec.step(one);  // the threads' pace settled, the caches warm
  dec.prefill(ids, start);
  const double before = read();
  const auto t0 = Clock::now();
  const double c0 = cpu_seconds();
  for (int64_t k = 0; k < steps; ++k) dec.step(one);
  const double step = seconds_since(t0) / static_cast<double>(steps);
  const double cpu = (cpu_seconds() - c0) / static_cast<double>(steps);
  return {step, cpu, 0.5 * (before + read())};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

double read_gbs(const std::vector<std::pair<const float*, int64_t>>& spans, int threads,
                int rounds) {
  using nn::inference::v16;  // (a 64-byte vector type stays in memory on AVX2: nn/lanes.h)
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
          for (int k = 0; k < 4; ++k) acc[k] += nn::inference::load(p + i + 16 * k);
      }
      sink += (acc[0] + acc[1] + acc[2] + acc[3])[0];
    }
    best = std::min(best, seconds_since(t0));
  }
  if (sink == 1e30f) std::cout << ' ';  // keeps the sums
  return bytes / best / 1e9;
}

namespace {

// One format's rounds: each round's tokens/s and share of the bound its reads set.
struct DecodeFigures {
  const char* weights;
  double bytes_per_token;
  std::vector<double> read_gbs, tokens_s, cpu_ms, share;
  void add(const Round& r) {
    read_gbs.push_back(r.read_gbs);
    tokens_s.push_back(1 / r.step);
    cpu_ms.push_back(1e3 * r.cpu);
    share.push_back(tokens_s.back() / (r.read_gbs * 1e9 / bytes_per_token));
  }
};

std::string range(const std::vector<double>& v, double scale, const char* spec) {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return fmt::format(fmt::runtime(std::string("{:") + spec + "}-{:" + spec + "}"), *lo * scale,
                     *hi * scale);
}

void print_bound(const std::string& name, int threads, const DecodeFigures& f, bool json) {
  const double read = median(f.read_gbs), tokens = median(f.tokens_s), share = median(f.share);
  if (json) {
    std::cout << nlohmann::json{{"config", name},
                                {"mode", "decode"},
                                {"weights", f.weights},
                                {"threads", threads},
                                {"rounds", f.tokens_s.size()},
                                {"weight_bytes_per_token", f.bytes_per_token},
                                {"read_gbs", read},
                                {"bound_tokens_s", read * 1e9 / f.bytes_per_token},
                                {"tokens_s", tokens},
                                {"tokens_s_each_round", f.tokens_s},
                                {"cpu_ms_per_token", median(f.cpu_ms)},
                                {"share_of_bound", share},
                                {"share_of_bound_each_round", f.share}}
                     .dump()
              << "\n";
    return;
  }
  std::cout << fmt::format(
      "{} {} weights: {:.1f} MB a token / {:.1f} GB/s read on {} threads around the steps = "
      "bound {:.1f} tokens/s; decoding {:.1f} tokens/s ({:.0f}% of the bound; {:.3g} ms of CPU a "
      "token) - medians of {} rounds: {} tokens/s, {}% of the bound\n",
      name, f.weights, f.bytes_per_token / 1e6, read, threads, read * 1e9 / f.bytes_per_token,
      tokens, 100 * share, median(f.cpu_ms), f.tokens_s.size(), range(f.tokens_s, 1, ".1f"),
      range(f.share, 100, ".0f"));
}

}  // namespace

namespace {

void round_to_q4_k(nn::GPT& model) {
  nn::round_weights_to_q4_k(model);
}

constexpr int kDecodeRounds = 3;

// a's tokens/s over b's, round by round (the same minute's machine), their median
void print_ratio(const std::string& name, const DecodeFigures& a, const DecodeFigures& b,
                 bool json) {
  std::vector<double> ratio;
  for (size_t r = 0; r < a.tokens_s.size(); ++r) ratio.push_back(a.tokens_s[r] / b.tokens_s[r]);
  if (json) {
    std::cout << nlohmann::json{{"config", name},         {"mode", "decode_ratio"},
                                {"weights", a.weights},   {"against", b.weights},
                                {"ratio", median(ratio)}, {"ratio_each_round", ratio}}
                     .dump()
              << "\n";
    return;
  }
  std::cout << fmt::format("{} {} / {}: {:.2f}x (median of the rounds' ratios: {})\n", name,
                           a.weights, b.weights, median(ratio), range(ratio, 1, ".2f"));
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
                            {nn::WeightFormat::q8_0_f32, "q8_0-f32", nn::round_weights_to_q8_0},
                            {nn::WeightFormat::q8_0, "q8_0", nn::round_weights_to_q8_0},
                            {nn::WeightFormat::q4_k_f32, "q4_k-f32", round_to_q4_k},
                            {nn::WeightFormat::q4_k, "q4_k", nullptr}};
  // Every format's decoder made first (each rounds the model further; a decoder's steps
  // read its own copies, and the model's floats only for what they do not hold), then
  // rounds of steps taking the formats in turn, so that a change of the machine's speed
  // meets them all: each figure is the median of its rounds, and a ratio of two formats
  // the median of the rounds' ratios.
  std::vector<std::unique_ptr<nn::CachedInference>> decoders;
  std::vector<DecodeFigures> figures;
  for (const Format& f : formats) {
    if (f.round) f.round(model);
    decoders.push_back(std::make_unique<nn::CachedInference>(model, 1, f.format, start + steps));
    figures.push_back({f.name, nn::streamed_bytes(model, f.format), {}, {}, {}, {}});
  }
  for (int r = 0; r < kDecodeRounds; ++r)
    for (size_t i = 0; i < decoders.size(); ++i)
      figures[i].add(timed_round(*decoders[i], start, steps, read));
  for (const DecodeFigures& f : figures) print_bound(name, threads, f, json);
  print_ratio(name, figures[3], figures[1], json);  // q8_0 against bf16
  print_ratio(name, figures[2], figures[1], json);  // q8_0-f32 against bf16
  return 0;
}

}  // namespace bench
