#include "bench/bench.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "autograd/adaptive_threads.h"
#include "autograd/allocator.h"
#include "autograd/autocast.h"
#include "autograd/ops/gemm.h"
#include "base/error_text.h"
#include "bench/background_load.h"
#include "bench/breakdown.h"
#include "bench/decode_bound.h"
#include "bench/decoder_micro.h"
#include "bench/memory_bench.h"
#include "bench/micro.h"
#include "bench/tune_table.h"
#include "io/output_rule.h"
#include "nn/gpt.h"
#include "optim/optim.h"
#include "train/config.h"
#include "train/console.h"
#include "train/freezing.h"
#include "train/grad_reduction.h"
#include "train/world.h"

namespace bench {

namespace po = boost::program_options;

namespace {

struct BenchConfig {
  const char* name;
  nn::GPTConfig model;
  int64_t batch;
  int64_t seq = 0;  // tokens per sequence: the context length unless shorter (gpt2)
  int64_t tokens() const { return seq > 0 ? seq : model.context_length; }
};

// The small models people fine-tune on a CPU, at their Hugging Face shapes (config.json of
// HuggingFaceTB/SmolLM2-135M, Qwen/Qwen2.5-0.5B, meta-llama/Llama-3.2-1B), random weights;
// 2048 positions (their tables; the step reads T 256), batches of B 4.
std::optional<BenchConfig> llama_family_config(const std::string& name) {
  nn::GPTConfig m;
  m.norm = nn::NormKind::rms_norm, m.mlp = nn::MlpKind::swiglu;
  m.position = nn::PositionKind::rope, m.linear_bias = false, m.context_length = 2048;
  auto shape = [&](int64_t V, int64_t C, int64_t H, int64_t KV, int64_t L, int64_t F) {
    m.vocab_size = V, m.d_model = C, m.n_heads = H, m.n_kv_heads = KV, m.n_layers = L;
    m.d_ff = F;
  };
  if (name == "smollm2-135m") {
    shape(49152, 576, 9, 3, 30, 1536);
    m.rope_theta = 100000;
    return BenchConfig{"smollm2-135m", m, 4, 256};
  }
  if (name == "qwen2.5-0.5b") {
    shape(151936, 896, 14, 2, 24, 4864);
    m.rope_theta = 1e6, m.norm_eps = 1e-6, m.qkv_bias = true;
    return BenchConfig{"qwen2.5-0.5b", m, 4, 256};
  }
  if (name == "llama3.2-1b") {
    shape(128256, 2048, 32, 8, 16, 8192);
    m.rope_theta = 500000, m.rope_scaling = nn::RopeScaling::llama3, m.rope_factor = 32;
    return BenchConfig{"llama3.2-1b", m, 4, 256};
  }
  return std::nullopt;
}

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
  if (name == "gpt2") {  // GPT-2 124M (llm.c's train_gpt2.c shape): 1024 positions, B 4, T 64
    BenchConfig c = make("gpt2", 1024, 768, 12, 12, 4);
    c.model.vocab_size = 50257, c.model.qkv_bias = true, c.seq = 64;
    return c;
  }
  if (const auto llama = llama_family_config(name)) return *llama;
  throw std::invalid_argument(fmt::format(
      "--config must be tiny, small, base, gpt2, smollm2-135m, qwen2.5-0.5b or llama3.2-1b, got "
      "'{}'",
      name));
}

// Matmul FLOPs of one training step, as nanoGPT and PaLM count them: forward + backward =
// 3x the forward FLOPs the model's layers declare (nn::Footprint: 2 per multiply-add of
// the projections, the MLP and the head, and of the scores q k^T and weights @ v over the
// full T x T, causal masking not subtracted), for B T tokens.
double step_flops(const BenchConfig& c) {
  nn::Footprint f(c.tokens(), /*training=*/true);
  nn::ShapeOnlyScope description;
  nn::GPT(c.model, 0).footprint(f);
  // forward + backward's input and weight gradients: 3x the forward (nanoGPT's, PaLM's
  // count); a LoRA step's frozen base computes no weight gradient, so 2x (its adapters'
  // own are rank-wide, a fraction of a percent, left out)
  const double passes = c.model.lora_rank > 0 ? 2 : 3;
  return passes * f.forward_flops_per_token * static_cast<double>(c.batch * c.tokens());
}

// Bytes in MiB, the unit of every MB figure bench prints (the plan's, the peak RSS's).
double mib(size_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

double peak_rss_mb() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;  // kB on Linux
}

// The process's CPU time (user + system, every thread) in milliseconds.
double cpu_ms() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return 1e3 * static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         1e-3 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// Milliseconds of each phase of the timed steps.
struct StepTimes {
  std::vector<double> total, forward, backward, reduce, optimizer;
  double cpu_per_step = 0;   // the process's CPU time over the timed steps, per step
  int64_t reduced_team = 0;  // timed steps run with fewer threads than asked (AdaptiveThreads)
  static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  }
};

// Random windows of ids: inputs [B, T] and targets shifted by one.
std::pair<ag::Tensor, ag::Tensor> random_batch(ag::Generator& gen, int64_t B, int64_t T,
                                               int64_t vocab) {
  std::vector<int64_t> ids(B * (T + 1)), x, y;
  for (auto& id : ids) id = static_cast<int64_t>(gen.next_u64() % vocab);
  for (int64_t b = 0; b < B; ++b) {
    x.insert(x.end(), ids.begin() + b * (T + 1), ids.begin() + b * (T + 1) + T);
    y.insert(y.end(), ids.begin() + b * (T + 1) + 1, ids.begin() + (b + 1) * (T + 1));
  }
  return {ag::from_vector(x, {B, T}), ag::from_vector(y, {B, T})};
}

struct StepPrecision {
  ag::Precision precision;
  ag::Bf16WeightCopies* copies;  // kept from step to step (bf16), as training keeps them
};

// One training step, its phases timed into `times` when `record`.
// Forward and backward run in the step's precision (bfloat16 weight copies kept from step to
// step and refreshed by AdamW, as training keeps them).
void timed_step(nn::GPT& model, optim::AdamW& opt, const std::vector<ag::Tensor>& params,
                train::GradReducer* reducer, const std::pair<ag::Tensor, ag::Tensor>& batch,
                StepPrecision precision, bool record, StepTimes& times) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto since = [&] {
    return std::chrono::duration<double, std::milli>(clock::now() - start).count();
  };
  opt.zero_grad();
  double t_fwd;
  {
    const ag::AutocastScope autocast(precision.precision, precision.copies);
    auto out = model.forward(batch.first, batch.second);
    t_fwd = since();
    const auto overlap = reducer ? reducer->overlap_last_backward(nullptr) : nullptr;
    out.loss.backward();
  }
  const double t_bwd = since();
  if (reducer) {
    const ag::profile::Timer timer("reduction wait");
    reducer->last_backward_done(nullptr);
    reducer->reduce();
  }
  const double t_reduce = since();
  opt.step(optim::clip_factor(optim::grad_norm(params), 1.0));  // clipping fused into AdamW
  const double elapsed = since();
  if (!record) return;
  times.total.push_back(elapsed);
  times.forward.push_back(t_fwd);
  times.backward.push_back(t_bwd - t_fwd);
  times.reduce.push_back(t_reduce - t_bwd);
  times.optimizer.push_back(elapsed - t_reduce);
}

// What `attograd bench` (training steps) was asked for.
struct StepOptions {
  std::string config = "tiny";
  double dropout = 0.0;
  int64_t steps = 20, warmup = 3;
  int threads = ag::kDefaultThreads;
  bool json = false;
  int64_t bucket_mb = train::kDefaultBucketMb;
  ag::Precision precision = ag::Precision::fp32;
  int64_t lora_rank = 0;  // > 0: LoRA adapters on all four targets, the base frozen
  // how the frozen base is held (nn/frozen_base.h; with lora_rank only)
  ag::quant::BasePrecision base_precision = ag::quant::BasePrecision::fp32;
  int64_t batch = 0, tokens = 0;        // > 0: the config's B and T replaced
  bool background_load = false;         // a busy process pinned to one core while the steps run
  bool report = true;                   // false: the steps run for their side effects (--tune)
  bool breakdown = false;               // report where the step's time went instead (breakdown.h)
  bool checkpoint_activations = false;  // blocks recomputed in backward, as train's option
  std::string save_checkpoint;  // after the steps, a checkpoint saved here, its memory measured
  bool overwrite = false;       // --save-checkpoint may replace what is there
};

// The memory plan beside the peak RSS and the tensors' own peak (the allocator's live
// bytes: the plan's error apart from the heap's and the libraries' memory), then its
// activation terms of at least a twentieth of the activations, largest first, and a packed
// base's unpacking scratch: where a step's memory goes.
void print_memory_plan(const nlohmann::json& budget) {
  const double planned =
      budget["plan_state_mb"].get<double>() + budget["plan_activations_mb"].get<double>();
  const double tensors_mb = mib(ag::allocator_stats().peak_live_bytes);
  fmt::print(
      "memory plan: state {:.1f} MB + activations {:.1f} MB; peak RSS {:.2f}x of it; the "
      "tensors' peak {:.1f} MB ({:.2f}x)\n",
      budget["plan_state_mb"].get<double>(), budget["plan_activations_mb"].get<double>(),
      peak_rss_mb() / planned, tensors_mb, tensors_mb / planned);
  std::vector<std::pair<double, std::string>> terms;
  const double total = budget["plan_activations_mb"].get<double>();
  for (const auto& [name, mb] : budget["plan_activation_terms"].items())
    if (mb.get<double>() >= total / 20) terms.emplace_back(mb.get<double>(), name);
  std::sort(terms.rbegin(), terms.rend());
  std::string line;
  for (const auto& [mb, name] : terms)
    line += fmt::format("{}{} {:.1f}", line.empty() ? "" : "; ", name, mb);
  fmt::print("largest activation terms (MB): {}; base unpacking scratch {:.1f} MB\n", line,
             budget["plan_base_scratch_mb"].get<double>());
}

// load_cpu: the core a --background-load process spun on, -1 without one.
void report_steps(const BenchConfig& c, const StepOptions& o, int processes, int64_t parameters,
                  const StepTimes& t, int load_cpu, const nlohmann::json& budget) {
  const double median = StepTimes::median(t.total);
  const double tokens_per_s = processes * c.batch * c.tokens() / (median / 1e3);
  const double gflops = processes * step_flops(c) / (median / 1e3) / 1e9;
  const auto [lo, hi] = std::minmax_element(t.total.begin(), t.total.end());
  if (o.json) {
    std::cout << nlohmann::json{{"impl", "attograd"},
                                {"config", c.name},
                                {"dropout", o.dropout},
                                {"threads", o.threads},
                                {"precision", base::choice_name(o.precision)},
                                {"processes", processes},
                                {"ms_per_step", median},
                                {"tokens_per_s", tokens_per_s},
                                {"gflops", gflops},
                                {"peak_rss_mb", peak_rss_mb()},
                                {"tensor_peak_mb", mib(ag::allocator_stats().peak_live_bytes)},
                                {"tensor_cached_mb", mib(ag::allocator_stats().cached_bytes)},
                                {"steps", t.total.size()},
                                {"parameters", parameters},
                                {"lora_rank", o.lora_rank},
                                {"base_precision", base::choice_name(o.base_precision)},
                                {"checkpoint_activations", o.checkpoint_activations},
                                {"forward_ms", StepTimes::median(t.forward)},
                                {"backward_ms", StepTimes::median(t.backward)},
                                {"optimizer_ms", StepTimes::median(t.optimizer)},
                                {"reduce_ms", StepTimes::median(t.reduce)},
                                {"cpu_ms_per_step", t.cpu_per_step},
                                {"reduced_team_steps", t.reduced_team},
                                {"background_load", load_cpu >= 0},
                                {"background_load_cpu", load_cpu},
                                {"plan_state_mb", budget.at("plan_state_mb")},
                                {"plan_activations_mb", budget.at("plan_activations_mb")},
                                {"plan_activation_terms", budget.at("plan_activation_terms")},
                                {"plan_base_scratch_mb", budget.at("plan_base_scratch_mb")}}
                     .dump()
              << std::endl;
    return;
  }
  fmt::print(
      "attograd {}{}{}{} ({}, dropout {}, {} process{} x {} threads, {} parameters): median {:.2f} "
      "ms/step "
      "over {} steps (min {:.2f}, max {:.2f}; forward {:.2f}, backward {:.2f}, reduction wait "
      "{:.2f}, clip+AdamW {:.2f}) | {:.0f} tokens/s | {:.1f} GFLOP/s | peak RSS {:.1f} MB{}{}\n",
      c.name, o.lora_rank > 0 ? fmt::format(" LoRA rank {}", o.lora_rank) : "",
      o.base_precision != ag::quant::BasePrecision::fp32
          ? fmt::format(" over a {} base", base::choice_name(o.base_precision))
          : "",
      o.checkpoint_activations ? ", blocks recomputed in backward" : "",
      base::choice_name(o.precision), o.dropout, processes, processes == 1 ? "" : "es", o.threads,
      parameters, median, t.total.size(), *lo, *hi, StepTimes::median(t.forward),
      StepTimes::median(t.backward), StepTimes::median(t.reduce), StepTimes::median(t.optimizer),
      tokens_per_s, gflops, peak_rss_mb(),
      load_cpu >= 0 ? fmt::format(" | a busy process on CPU {}", load_cpu) : "",
      t.reduced_team > 0 ? fmt::format(" | {} steps on fewer threads", t.reduced_team) : "");
  print_memory_plan(budget);
}

// The timed steps' kernels (--breakdown), and oneDNN's primitive cache as they began
struct TimedKernels {
  ag::profile::Breakdown kernels;
  ag::detail::OneDnnCacheStats onednn_at_start = ag::detail::onednn_cache_stats();
  std::vector<ag::profile::Row> rows() const { return kernels.rows(); }
};

BreakdownRun breakdown_run(const BenchConfig& c, const StepOptions& o, int processes,
                           const StepTimes& t, const TimedKernels& timed) {
  double measured_ms = 0;
  for (double ms : t.total) measured_ms += ms;
  const ag::detail::OneDnnCacheStats now = ag::detail::onednn_cache_stats();
  return {fmt::format("{}{} {} (dropout {}, {} process{} x {} threads)", c.name,
                      o.lora_rank > 0 ? fmt::format(" LoRA rank {}", o.lora_rank) : "",
                      base::choice_name(o.precision), o.dropout, processes,
                      processes == 1 ? "" : "es", o.threads),
          static_cast<int64_t>(t.total.size()), measured_ms / 1e3,
          now.hits + now.made - timed.onednn_at_start.hits - timed.onednn_at_start.made,
          now.made - timed.onednn_at_start.made};
}

// The config --config names, with the options' dropout, adapters, B and T.
BenchConfig step_config(const StepOptions& o) {
  BenchConfig c = named_config(o.config);
  if (o.batch > 0) c.batch = o.batch;
  if (o.tokens > 0) c.seq = std::min(o.tokens, c.model.context_length);
  c.model.dropout = o.dropout;
  c.model.lora_rank = o.lora_rank;
  c.model.validate();
  return c;
}

// Under mpirun every process runs its own batch and the gradients are reduced as in
// training (train/grad_reduction.h, buckets overlapping backward): tokens/s counts all
// processes' tokens, and reduce_ms is the wait after backward.
int run_steps(const StepOptions& o) {
  ag::set_num_threads(o.threads);
  const train::World& world = train::World::join();
  // the output rule every command that writes follows, checked before the steps: a
  // benchmark never replaces a run's checkpoint unasked, nor one a running train writes
  const io::ClaimedOutputs claim({{"--save-checkpoint", o.save_checkpoint}}, {},
                                 {.overwrite = o.overwrite, .lock = world.root()});
  const BenchConfig c = step_config(o);
  train::RunConfig run;  // what a training run of this model freezes (LoRA: the base)
  run.model = c.model;
  run.base_precision = o.base_precision;
  run.checkpoint_activations = o.checkpoint_activations;
  run.validate();
  const nn::FrozenBase base = train::frozen_base(run);  // drawn straight into its blocks
  nn::GPT model(c.model, 1337, &base);
  model.train();
  model.set_activation_checkpointing(o.checkpoint_activations);
  train::freeze_parameters(run, model);
  optim::AdamW opt(optim::decay_groups(train::trainable_named_parameters(model), 0.1), 3e-4);
  ag::Bf16WeightCopies copies;  // as training keeps them: refreshed by AdamW
  ag::Bf16WeightCopies* const kept = train::kept_bf16_copies(o.precision, opt, model, copies);
  const auto params = model.trainable_parameters();
  int64_t trainable = 0;
  for (const auto& p : params) trainable += p.numel();
  const auto budget =
      step_budget(run, c.batch, c.tokens(), model.num_parameters(), trainable, o.precision);
  // the cache held to the plan, as training holds it (train/training_run.cpp)
  ag::set_cache_budget(budget["plan_tensor_bytes"].get<size_t>());
  std::unique_ptr<train::GradReducer> reducer;
  if (world.distributed())
    reducer = std::make_unique<train::GradReducer>(world, params, 1, o.bucket_mb << 20);
  ag::Generator gen(7 + static_cast<uint64_t>(world.rank()));
  StepTimes times;
  double cpu_start = 0;
  ag::AdaptiveThreads team(o.threads);  // as training adapts it
  std::optional<BackgroundLoad> load;   // from the first timed step to the report
  std::optional<TimedKernels> timed;    // the timed steps' kernels (--breakdown)
  for (int64_t i = 0; i < o.warmup + o.steps; ++i) {
    if (i == o.warmup) {
      cpu_start = cpu_ms();
      if (o.background_load && world.root()) load.emplace();  // one for the machine
      if (o.breakdown) timed.emplace();
    }
    const auto batch = random_batch(gen, c.batch, c.tokens(), c.model.vocab_size);
    const auto step = team.step();
    timed_step(model, opt, params, reducer.get(), batch, {o.precision, kept}, i >= o.warmup, times);
    times.reduced_team += i >= o.warmup && team.team() < o.threads;
  }
  times.cpu_per_step = (cpu_ms() - cpu_start) / static_cast<double>(o.steps);
  const int load_cpu = load ? load->cpu() : -1;
  load.reset();
  if (world.root() && timed)
    print_breakdown(breakdown_run(c, o, world.size(), times, *timed), timed->rows(), o.json);
  else if (world.root() && o.report)
    report_steps(c, o, world.size(), model.num_parameters(), times, load_cpu, budget);
  if (world.root() && !o.save_checkpoint.empty())
    print_save(measure_save(o.save_checkpoint, model, opt, run.to_json()), o.save_checkpoint,
               o.json);
  return 0;
}

// --tune: one step of each config and precision asked for decides every GEMM class a
// training step meets (measured now, or read from the cache file), then the table
int run_tune(StepOptions o) {
  const std::vector<std::string> configs =
      o.config == "all" ? std::vector<std::string>{"tiny", "small", "base", "gpt2"}
                        : std::vector<std::string>{o.config};
  o.steps = 1, o.warmup = 0, o.report = false, o.save_checkpoint.clear();
  for (const std::string& config : configs)
    for (ag::Precision precision : {ag::Precision::fp32, ag::Precision::bf16}) {
      o.config = config, o.precision = precision;
      run_steps(o);
    }
  print_tune_table(o.json);
  return 0;
}

po::options_description bench_options(StepOptions& o, std::string& precision,
                                      std::string& base_precision) {
  po::options_description desc("bench options");
  desc.add_options()("help,h", "show this help")(
      "config", po::value(&o.config)->default_value("tiny"),
      "tiny, small, base, gpt2 (GPT-2 124M, B 4, T 64), or smollm2-135m, qwen2.5-0.5b, "
      "llama3.2-1b (their Hugging Face shapes, B 4, T 256); with --tune also all, its default")(
      "dropout", po::value(&o.dropout)->default_value(0.0), "dropout probability")(
      "steps", po::value(&o.steps)->default_value(20), "timed steps (the median is reported)")(
      "warmup", po::value(&o.warmup)->default_value(3), "untimed steps first")(
      "threads", po::value(&o.threads)->default_value(ag::kDefaultThreads),
      "threads for kernels and BLAS")(
      "precision", po::value(&precision)->default_value("fp32"),
      "fp32, or bf16 (autocast: bfloat16 matmul operands, float32 accumulation)")(
      "json", "one JSON object per line")(
      "breakdown",
      "where the timed steps' time goes, by kernel class (each GEMM class with its kernel and "
      "GFLOP/s, the attention, each op's forward and backward, roundings, copies, the "
      "optimiser, the reduction wait), instead of the step summary")(
      "micro",
      "microbenchmarks of the hot kernels instead of training steps; with --decode, the "
      "decoder's GEMVs alone at --config's MLP shapes (one thread, bf16, q8_0, q4_k)")(
      "decode",
      "the cached decoder's tokens/s at --config's shape (--steps steps from position 100), "
      "fp32, bf16, q8_0 and q4_k weights, against the bound of its weight bytes a token over "
      "the read bandwidth measured around the steps: 3 rounds taking the formats in turn, "
      "medians, and q8_0's tokens/s over bf16's")(
      "tune",
      "decide the GEMM kernels of a training step of --config (or all) in fp32 and bf16 and "
      "print the measured table (ATTOGRAD_TUNE=fresh measures again)")(
      "bucket-mb", po::value(&o.bucket_mb)->default_value(train::kDefaultBucketMb),
      "under mpirun: gradient bucket size in MB")(
      "lora-rank", po::value(&o.lora_rank)->default_value(0),
      "LoRA adapters of this rank on every projection of the blocks (q, k, v, the output "
      "projection and the MLP's), the base frozen (0: full training)")(
      "batch", po::value(&o.batch)->default_value(0), "sequences a step (0: the config's)")(
      "tokens", po::value(&o.tokens)->default_value(0),
      "tokens a sequence, at most the context (0: the config's)")(
      "base-precision", po::value(&base_precision)->default_value("fp32"),
      "with --lora-rank: the frozen base held as fp32, bf16, or blocks: q8_0, q4_k, q6_k, ... "
      "(nn/frozen_base.h; not own: bench draws its model, no file holds it)")(
      "checkpoint-activations",
      "each block's activations recomputed in backward, as train --checkpoint-activations")(
      "background-load",
      "while the steps run, a busy process pinned to one of the cores this one may use (the "
      "last); it is killed when the benchmark ends")(
      "save-checkpoint", po::value(&o.save_checkpoint),
      "after the steps, save a checkpoint here as training does and report the resident memory "
      "it adds")("overwrite", po::bool_switch(&o.overwrite),
                 "let --save-checkpoint replace what is there (a checkpoint, any other file)");
  return desc;
}

void check_step_options(const StepOptions& o) {
  if (o.steps < 1)
    throw std::invalid_argument(fmt::format("--steps must be >= 1, got {}", o.steps));
  if (o.warmup < 0)
    throw std::invalid_argument(fmt::format("--warmup must be >= 0, got {}", o.warmup));
  if (o.threads < 1)
    throw std::invalid_argument(fmt::format("--threads must be >= 1, got {}", o.threads));
  if (!(o.dropout >= 0 && o.dropout < 1))
    throw std::invalid_argument(fmt::format("--dropout must be in [0, 1), got {}", o.dropout));
}

}  // namespace

int bench_command(const std::vector<std::string>& args) {
  StepOptions o;
  std::string precision = "fp32", base_precision = "fp32";
  const po::options_description desc = bench_options(o, precision, base_precision);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << "usage: attograd bench [options]\n\n" << desc << "\n";
      return 0;
    }
    check_step_options(o);
    o.precision = base::parse_choice<ag::Precision>(precision);
    o.base_precision = base::parse_choice<ag::quant::BasePrecision>(base_precision);
    if (o.base_precision == ag::quant::BasePrecision::own)
      throw std::invalid_argument(
          "--base-precision own holds an --init-from file's blocks as they are; bench draws its "
          "model: give a format (q8_0, q4_k, ...)");
    o.json = vm.count("json") > 0;
    o.background_load = vm.count("background-load") > 0;
    o.breakdown = vm.count("breakdown") > 0;
    o.checkpoint_activations = vm.count("checkpoint-activations") > 0;
    if (vm.count("micro") && vm.count("decode"))
      return run_decoder_micro(named_config(o.config).model, o.config, o.json);
    if (vm.count("micro")) return run_micro(o.threads, o.json);
    if (vm.count("decode")) {
      ag::set_num_threads(o.threads);
      return run_decode(named_config(o.config).model, o.config, o.threads, o.steps, o.json);
    }
    if (vm.count("tune")) {
      if (vm["config"].defaulted()) o.config = "all";
      return run_tune(o);
    }
    if (o.bucket_mb < 1) throw std::invalid_argument("--bucket-mb must be >= 1");
    return run_steps(o);
  } catch (const std::exception& e) {
    train::noticef("attograd bench: error: {}\n", base::without_error_prefix(e.what()));
    return 2;
  }
}

}  // namespace bench
