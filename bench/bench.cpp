#include "bench/bench.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench/micro.h"
#include "nn/gpt.h"
#include "optim/optim.h"
#include "train/config.h"
#include "train/grad_reduction.h"
#include "train/world.h"

namespace bench {

namespace po = boost::program_options;

namespace {

struct BenchConfig {
  const char* name;
  nn::GPTConfig model;
  int64_t batch;
};

BenchConfig named_config(const std::string& name) {
  auto make = [](const char* n, int64_t T, int64_t C, int64_t H, int64_t L, int64_t B) {
    nn::GPTConfig m;
    m.vocab_size = 65;
    m.context_length = T;
    m.d_model = C;
    m.n_heads = H;
    m.n_layers = L;
    return BenchConfig{n, m, B};
  };
  if (name == "tiny") return make("tiny", 64, 64, 4, 2, 16);
  if (name == "small") return make("small", 128, 128, 4, 4, 16);
  if (name == "base") return make("base", 256, 256, 8, 6, 8);
  throw std::invalid_argument(fmt::format("--config must be tiny, small or base, got '{}'", name));
}

// Matmul FLOPs of one training step (forward + backward = 3x forward, 2 FLOPs per
// multiply-add), as nanoGPT and PaLM count them:
//   6 * (12 L C^2 + V C) * B T        the projections, the MLP and the head
// + 6 * 2 L C T * B T                 scores q k^T and weights @ v, full T x T (causal
//                                     masking is not subtracted)
double step_flops(const BenchConfig& c) {
  const double L = c.model.n_layers, C = c.model.d_model, V = c.model.vocab_size;
  const double T = c.model.context_length, F = c.model.ff_width(), BT = c.batch * T;
  const double matmul_params = L * (4 * C * C + 2 * C * F) + V * C;
  return 6 * matmul_params * BT + 12 * L * C * T * BT;
}

double peak_rss_mb() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;  // kB on Linux
}

// Under mpirun every process runs its own batch and the gradients are reduced as in
// training (train/grad_reduction.h, buckets overlapping backward): tokens/s counts all
// processes' tokens, and reduce_ms is the wait after backward.
int run_steps(const std::string& config, double dropout, int64_t steps, int64_t warmup, int threads,
              bool json, int64_t bucket_mb) {
  ag::set_num_threads(threads);
  const train::World& world = train::World::join();
  BenchConfig c = named_config(config);
  c.model.dropout = dropout;
  nn::GPT model(c.model, 1337);
  model.train();
  optim::AdamW opt(optim::decay_groups(model.named_parameters(), 0.1), 3e-4);
  const auto params = model.parameters();
  std::unique_ptr<train::GradReducer> reducer;
  if (world.distributed())
    reducer = std::make_unique<train::GradReducer>(world, params, 1, bucket_mb << 20);
  ag::Generator gen(7 + static_cast<uint64_t>(world.rank()));
  const int64_t B = c.batch, T = c.model.context_length;
  std::vector<int64_t> ids(B * (T + 1));
  std::vector<double> ms, fwd_ms, bwd_ms, opt_ms, reduce_ms;
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point t) {
    return std::chrono::duration<double, std::milli>(clock::now() - t).count();
  };
  for (int64_t i = 0; i < warmup + steps; ++i) {
    for (auto& id : ids) id = static_cast<int64_t>(gen.next_u64() % c.model.vocab_size);
    std::vector<int64_t> x, y;
    for (int64_t b = 0; b < B; ++b) {
      x.insert(x.end(), ids.begin() + b * (T + 1), ids.begin() + b * (T + 1) + T);
      y.insert(y.end(), ids.begin() + b * (T + 1) + 1, ids.begin() + (b + 1) * (T + 1));
    }
    const auto start = clock::now();
    opt.zero_grad();
    auto out = model.forward(ag::from_vector(x, {B, T}), ag::from_vector(y, {B, T}));
    const double t_fwd = since(start);
    {
      const auto overlap = reducer ? reducer->overlap_last_backward(nullptr) : nullptr;
      out.loss.backward();
    }
    const double t_bwd = since(start);
    if (reducer) {
      reducer->last_backward_done(nullptr);
      reducer->reduce();
    }
    const double t_reduce = since(start);
    optim::clip_grad_norm(params, 1.0);
    opt.step();
    const double elapsed = since(start);
    if (i >= warmup) {
      ms.push_back(elapsed);
      fwd_ms.push_back(t_fwd);
      bwd_ms.push_back(t_bwd - t_fwd);
      reduce_ms.push_back(t_reduce - t_bwd);
      opt_ms.push_back(elapsed - t_reduce);
    }
  }
  auto median_of = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  };
  const double median = median_of(ms);
  std::sort(ms.begin(), ms.end());
  const double tokens_per_s = world.size() * B * T / (median / 1e3);
  const double gflops = world.size() * step_flops(c) / (median / 1e3) / 1e9;
  if (!world.root()) return 0;
  if (json) {
    std::cout << nlohmann::json{{"impl", "attograd"},
                                {"config", c.name},
                                {"dropout", dropout},
                                {"threads", threads},
                                {"processes", world.size()},
                                {"ms_per_step", median},
                                {"tokens_per_s", tokens_per_s},
                                {"gflops", gflops},
                                {"peak_rss_mb", peak_rss_mb()},
                                {"steps", steps},
                                {"parameters", model.num_parameters()},
                                {"forward_ms", median_of(fwd_ms)},
                                {"backward_ms", median_of(bwd_ms)},
                                {"optimizer_ms", median_of(opt_ms)},
                                {"reduce_ms", median_of(reduce_ms)}}
                     .dump()
              << std::endl;
  } else {
    fmt::print(
        "attograd {} (dropout {}, {} process{} x {} threads, {} parameters): median {:.2f} ms/step "
        "over {} steps (min {:.2f}, max {:.2f}; forward {:.2f}, backward {:.2f}, reduction wait "
        "{:.2f}, clip+AdamW {:.2f}) | {:.0f} tokens/s | {:.1f} GFLOP/s | peak RSS {:.1f} MB\n",
        c.name, dropout, world.size(), world.size() == 1 ? "" : "es", threads,
        model.num_parameters(), median, steps, ms.front(), ms.back(), median_of(fwd_ms),
        median_of(bwd_ms), median_of(reduce_ms), median_of(opt_ms), tokens_per_s, gflops,
        peak_rss_mb());
  }
  return 0;
}

}  // namespace

int bench_command(const std::vector<std::string>& args) {
  std::string config = "tiny";
  double dropout = 0.0;
  int64_t steps = 20, warmup = 3;
  int threads = ag::kDefaultThreads;
  int64_t bucket_mb = train::kDefaultBucketMb;
  po::options_description desc("bench options");
  desc.add_options()("help,h", "show this help")(
      "config", po::value(&config)->default_value("tiny"), "tiny, small or base")(
      "dropout", po::value(&dropout)->default_value(0.0), "dropout probability")(
      "steps", po::value(&steps)->default_value(20), "timed steps (the median is reported)")(
      "warmup", po::value(&warmup)->default_value(3), "untimed steps first")(
      "threads", po::value(&threads)->default_value(ag::kDefaultThreads),
      "threads for kernels and BLAS")("json", "one JSON object per line")(
      "micro", "microbenchmarks of the hot kernels instead of training steps")(
      "bucket-mb", po::value(&bucket_mb)->default_value(train::kDefaultBucketMb),
      "under mpirun: gradient bucket size in MB");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << "usage: attograd bench [options]\n\n" << desc << "\n";
      return 0;
    }
    if (steps < 1) throw std::invalid_argument(fmt::format("--steps must be >= 1, got {}", steps));
    if (warmup < 0)
      throw std::invalid_argument(fmt::format("--warmup must be >= 0, got {}", warmup));
    if (threads < 1)
      throw std::invalid_argument(fmt::format("--threads must be >= 1, got {}", threads));
    if (!(dropout >= 0 && dropout < 1))
      throw std::invalid_argument(fmt::format("--dropout must be in [0, 1), got {}", dropout));
    if (vm.count("micro")) return run_micro(threads, vm.count("json") > 0);
    if (bucket_mb < 1) throw std::invalid_argument("--bucket-mb must be >= 1");
    return run_steps(config, dropout, steps, warmup, threads, vm.count("json") > 0, bucket_mb);
  } catch (const std::exception& e) {
    fmt::print(stderr, "attograd bench: error: {}\n", e.what());
    return 2;
  }
}

}  // namespace bench
