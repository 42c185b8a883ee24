// attograd_decode_bench: the cached decoder's parts, timed in process (no checkpoint, no
// output): what bench/sample_compare.py measures end to end, taken apart.
//
//   attograd_decode_bench [--config default|base|gpt2|all] [--steps 1000] [--rounds 5] [--json]
//
// For each config (vocab 65, or gpt2: GPT-2 124M's shape, vocab 50257; randomly initialised: the
// speed does not depend on the weights), each weight format (fp32; bf16, `sample --weights bf16`)
// and each way of running a pass (one thread; the team of 2; as timed, the default), best of
// --rounds:
//   step_us      one step at the positions a 100-token prompt leads to (100 .. T - 1, again
//                from 100 when the context is full), per token
//   prefill_ms   a prefill of T/2 + 1 positions, what the window's move costs (every T/2
//                tokens with the default slide)
//   tokens_s     1 / (step + prefill / (T/2)): what `sample` makes past the context
// and the bandwidth of the step's GEMVs alone over the blocks' weights (GB/s), float32 and
// bfloat16, on 1 and 2 threads, beside a plain read of the same float32 bytes on 1 and 2
// threads (read_gbs, read_gbs_2) and each GEMV's share of the read on as many threads: a
// token cannot cost less than reading the weights once.
#include <omp.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "autograd/bfloat16.h"
#include "autograd/threading.h"
#include "bench/decode_bound.h"
#include "nn/inference.h"
#include "nn/inference_kernels.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

nn::GPTConfig config_named(const std::string& name) {
  nn::GPTConfig c;
  c.vocab_size = 65;
  c.dropout = 0.0;
  if (name == "base") c.context_length = 256, c.d_model = 256, c.n_heads = 8, c.n_layers = 6;
  if (name == "gpt2") {  // GPT-2 124M's shape: ~500 MB of float32 weights a token reads
    c.vocab_size = 50257, c.context_length = 1024, c.d_model = 768, c.n_heads = 12;
    c.n_layers = 12, c.qkv_bias = true;
  }
  return c;
}

// Seconds per step over `steps` steps from position 100 (prefilled), best of rounds.
double step_seconds(nn::CachedInference& dec, int64_t steps, int rounds) {
  const int64_t T = dec.capacity(), start = std::min<int64_t>(100, T / 2);
  std::vector<int64_t> ids(static_cast<size_t>(start), 1), one{2};
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    dec.prefill(ids, start);
    const auto t0 = Clock::now();
    for (int64_t k = 0; k < steps; ++k) {
      if (dec.length() == T) dec.prefill(ids, start);  // untimed in effect: rare
      dec.step(one);
    }
    best = std::min(best, seconds_since(t0) / static_cast<double>(steps));
  }
  return best;
}

double prefill_seconds(nn::CachedInference& dec, int rounds) {
  const int64_t n = dec.capacity() / 2 + 1;
  std::vector<int64_t> ids(static_cast<size_t>(n), 3);
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
    dec.prefill(ids, n);
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

// The blocks' projection matrices, [out, in], with bfloat16 copies of their values.
struct Matrix {
  const float* f32;
  std::vector<ag::bfloat16> bf16;
  int64_t out, in;
};

std::vector<Matrix> block_matrices(const nn::GPT& model) {
  std::vector<Matrix> mats;
  for (const auto& [name, p] : model.named_parameters())
    if (p.dim() == 2 && name.rfind("blocks.", 0) == 0) {
      Matrix m{p.data<float>(), std::vector<ag::bfloat16>(static_cast<size_t>(p.numel())),
               p.shape()[0], p.shape()[1]};
      ag::to_bfloat16(m.f32, m.bf16.data(), p.numel());
      mats.push_back(std::move(m));
    }
  return mats;
}

double weight_bytes(const std::vector<Matrix>& mats, bool bf16) {
  double bytes = 0;
  for (const auto& m : mats) bytes += static_cast<double>(m.out * m.in);
  return bytes * (bf16 ? 2.0 : 4.0);
}

// GB/s of inference::linear over the matrices (one row of x), on `threads` threads sharing the
// output rows, best of rounds.
double gemv_gbs(const std::vector<Matrix>& mats, bool bf16, int threads, int rounds) {
  std::vector<float> x(4096, 1.0f), y(4096);
  double best = 1e30;
  nn::inference::SpinBarrier barrier;  // the decoder's: it yields the core to a thread it waits for
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads)
    for (const auto& m : mats) {
      const auto [o0, o1] = nn::inference::share(m.out, omp_get_thread_num(), threads);
      const nn::inference::Weights W{m.f32 + o0 * m.in, bf16 ? m.bf16.data() + o0 * m.in : nullptr};
      nn::inference::linear(x.data(), 1, m.in, W, nullptr, o1 - o0, m.out, y.data() + o0, m.out,
                            false);
      barrier.wait(threads);
    }
    best = std::min(best, seconds_since(t0));
  }
  return weight_bytes(mats, bf16) / best / 1e9;
}

// GB/s of a plain read of the float32 matrices (bench::read_gbs), the bound the GEMVs are
// measured against.
double read_gbs(const std::vector<Matrix>& mats, int threads, int rounds) {
  std::vector<std::pair<const float*, int64_t>> spans;
  for (const auto& m : mats) spans.emplace_back(m.f32, m.out * m.in);
  return bench::read_gbs(spans, threads, rounds);
}

void print_bandwidth(const std::string& name, const nn::GPT& model, int rounds, bool json) {
  const auto mats = block_matrices(model);
  const int n = rounds * 20;
  const double read = read_gbs(mats, 1, n), read2 = read_gbs(mats, 2, n);
  const double f1 = gemv_gbs(mats, false, 1, n), f2 = gemv_gbs(mats, false, 2, n);
  const double b1 = gemv_gbs(mats, true, 1, n), b2 = gemv_gbs(mats, true, 2, n);
  if (json) {
    std::printf("%s\n", nlohmann::json{{"config", name},
                                       {"read_gbs", read},
                                       {"read_gbs_2", read2},
                                       {"gemv_gbs_1", f1},
                                       {"gemv_gbs_2", f2},
                                       {"gemv_bf16_gbs_1", b1},
                                       {"gemv_bf16_gbs_2", b2}}
                            .dump()
                            .c_str());
    return;
  }
  std::printf("%-8s plain read of the weights: %.1f GB/s on 1 thread, %.1f on 2\n", name.c_str(),
              read, read2);
  std::printf("%-8s GEMV fp32: %.1f GB/s on 1 thread (%.0f%%), %.1f on 2 (%.0f%%)\n", name.c_str(),
              f1, 100 * f1 / read, f2, 100 * f2 / read2);
  std::printf("%-8s GEMV bf16: %.1f GB/s on 1 thread (%.0f%%), %.1f on 2 (%.0f%%)\n", name.c_str(),
              b1, 100 * b1 / read, b2, 100 * b2 / read2);
}

void measure(const std::string& name, int64_t steps, int rounds, bool json) {
  const nn::GPTConfig cfg = config_named(name);
  nn::GPT model(cfg, 1);
  model.eval();
  using P = nn::CachedInference::Threads;
  for (auto format : {nn::WeightFormat::fp32, nn::WeightFormat::bf16}) {
    const char* weights = format == nn::WeightFormat::fp32 ? "fp32" : "bf16";
    if (format == nn::WeightFormat::bf16) nn::round_weights_to_bfloat16(model);
    for (auto [policy, label] :
         {std::pair{P::kOne, "one"}, {P::kTeam, "team"}, {P::kTimed, "timed"}}) {
      nn::CachedInference dec(model, 1, format);
      dec.set_threads(policy);
      const double step = step_seconds(dec, steps, rounds), prefill = prefill_seconds(dec, rounds);
      const double tokens_s = 1.0 / (step + prefill / static_cast<double>(cfg.context_length / 2));
      if (json)
        std::printf("%s\n", nlohmann::json{{"config", name},
                                           {"weights", weights},
                                           {"threads", label},
                                           {"step_us", step * 1e6},
                                           {"prefill_ms", prefill * 1e3},
                                           {"tokens_s", tokens_s}}
                                .dump()
                                .c_str());
      else
        std::printf("%-8s %s %-6s step %7.1f us  prefill %6.2f ms  -> %7.0f tokens/s\n",
                    name.c_str(), weights, label, step * 1e6, prefill * 1e3, tokens_s);
    }
  }
  print_bandwidth(name, model, rounds, json);
}

}  // namespace

int main(int argc, char** argv) {
  ag::select_blas_kernel(argv);
  namespace po = boost::program_options;
  std::string config = "all";
  int64_t steps = 1000;
  int rounds = 5;
  po::options_description desc("attograd_decode_bench");
  desc.add_options()("help,h", "this help")("config", po::value(&config),
                                            "default, base, gpt2 or all (all but gpt2)")(
      "steps", po::value(&steps), "steps timed per round")("rounds", po::value(&rounds), "rounds")(
      "json", "one JSON object per line");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::printf("%s\n", (std::ostringstream() << desc).str().c_str());
    return 0;
  }
  ag::set_num_threads(2);
  for (const std::string name : {"default", "base", "gpt2"})
    if ((config == "all" && name != "gpt2") || config == name)
      measure(name, steps, rounds, vm.count("json") > 0);
  return 0;
}
