#include "train/commands.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <iostream>
#include <limits>

#include "bench/bench.h"
#include "data/utf8.h"
#include "io/checkpoint.h"
#include "io/files.h"
#include "train/options.h"
#include "train/trainer.h"

namespace train {

namespace {

constexpr const char* kUsage = R"(usage: attograd <command> [options]

commands:
  train      train a GPT (default: the spec's model on the built-in corpus)
  resume     continue a run from its checkpoint, exactly
  sample     generate text from a checkpoint
  eval       the evaluation loss of a checkpoint on a text file
  inspect    show what a checkpoint holds (--verify checks every dataset)
  gradcheck  run the finite-difference gradient checks of every op
  bench      time training steps (tiny, small, base) or the hot kernels (--micro)
  demo       the attention chapter's numbers and a small network trained by backprop

'attograd <command> --help' lists a command's options.
)";

// One line, exit code 2: the contract for every usage problem.
int usage_error(const std::string& command, const std::string& what) {
  fmt::print(stderr, "attograd {}: error: {}\n", command, what);
  return 2;
}

bool wants_help(const po::variables_map& vm, const std::string& command,
                const po::options_description& desc) {
  if (!vm.count("help")) return false;
  std::cout << "usage: attograd " << command << " [options]\n\n" << desc << "\n";
  return true;
}

// Identical weights give identical hashes: how two runs are compared bit for bit.
uint64_t fnv1a(const ag::Tensor& t) {
  ag::Tensor f = t.to(ag::DType::Float32).contiguous();
  const auto* bytes = static_cast<const unsigned char*>(f.raw_data());
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int64_t i = 0; i < f.numel() * 4; ++i) h = (h ^ bytes[i]) * 0x100000001b3ULL;
  return h;
}

// An input must be a regular file we can read: a folder, a FIFO (whose open would block)
// or a device such as /dev/zero is refused by name before any work.
void require_file(const std::string& path, const char* what) {
  try {
    io::regular_file_size(path, what);
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
}

// Before any work: every output can be written (its folder exists and takes a new file;
// what is there now, if anything, is a regular file), no two outputs are one file and
// none of them is one of the inputs, by name, hard link or symbolic link.
void require_outputs(const io::NamedPaths& outputs, const io::NamedPaths& inputs) {
  try {
    io::refuse_shared_outputs(outputs);
    for (const auto& [option, path] : outputs) {
      if (path.empty()) continue;
      io::refuse_output_over_inputs(path, option, inputs);  // first: it names both files
      io::check_can_write(path);
    }
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
}

// One run at a time per checkpoint path: a second is refused naming the first one's PID.
io::OutputLock lock_output(const std::string& path) {
  try {
    return io::OutputLock(path);
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
}

std::string config_file(const po::variables_map& vm) {
  return vm.count("config") ? vm["config"].as<std::string>() : std::string();
}

// Runs body, mapping errors to the CLI's exit codes: bad usage 2, anything else 1.
template <typename Body>
int guarded(const std::string& command, Body body) {
  try {
    return body();
  } catch (const UsageError& e) {
    return usage_error(command, e.what());
  } catch (const std::invalid_argument& e) {
    return usage_error(command, e.what());
  } catch (const std::exception& e) {
    fmt::print(stderr, "attograd {}: error: {}\n", command, e.what());
    return 1;
  }
}

}  // namespace

// An option bound to a config field, shown with its default as fmt writes it
// (0.1, not Boost's 0.10000000000000001).
namespace {
template <typename T>
po::typed_value<T>* field(T& f) {
  return po::value(&f)->default_value(f, fmt::format("{}", f));
}
}  // namespace

po::options_description run_options(RunConfig& c) {
  po::options_description model("model (the spec's config keys)");
  model.add_options()("vocab-size", field(c.model.vocab_size), "token ids (0: from the tokenizer)")(
      "context-length", field(c.model.context_length), "longest sequence T")(
      "d-model", field(c.model.d_model), "embedding width C")(
      "n-heads", field(c.model.n_heads), "attention heads")("n-layers", field(c.model.n_layers),
                                                            "transformer blocks")(
      "d-ff", field(c.model.d_ff), "MLP width (0: 4 * d-model)")("dropout", field(c.model.dropout),
                                                                 "dropout probability")(
      "qkv-bias", field(c.model.qkv_bias)->implicit_value(true), "bias in W_query/W_key/W_value")(
      "tie-weights", field(c.model.tie_weights)->implicit_value(true),
      "lm_head shares tok_emb.weight");
  po::options_description data("data");
  data.add_options()("data", field(c.data), "UTF-8 text file (default: the built-in corpus)")(
      "val-fraction", field(c.val_fraction), "last fraction of the tokens held out")(
      "tokenizer", field(c.tokenizer), "char or byte")("corpus-seed", field(c.corpus_seed),
                                                       "seed of the built-in corpus");
  po::options_description opt("optimisation (AdamW, warm-up then cosine)");
  opt.add_options()("steps", field(c.steps), "optimiser steps")("batch-size", field(c.batch_size),
                                                                "sequences per step")(
      "lr", field(c.lr), "peak learning rate")("min-lr", field(c.min_lr),
                                               "final learning rate (negative: lr / 10)")(
      "warmup-steps", field(c.warmup_steps), "linear warm-up steps")(
      "weight-decay", field(c.weight_decay), "AdamW decay of 2-D+ parameters")(
      "beta1", field(c.beta1), "AdamW beta1")("beta2", field(c.beta2), "AdamW beta2")(
      "grad-clip", field(c.grad_clip), "global gradient norm limit (0: off)");
  po::options_description run("run");
  run.add_options()("help,h", "show this help")(
      "config", po::value<std::string>(), "read options from an INI file (the command line wins)")(
      "seed", field(c.seed), "initialisation, batches and dropout")(
      "out", field(c.out), "checkpoint path")("eval-interval", field(c.eval_interval),
                                              "steps between validation (0: end only)")(
      "eval-windows", field(c.eval_windows), "validation windows per evaluation (0: all)")(
      "checkpoint-interval", field(c.checkpoint_interval),
      "steps between checkpoints (0: end only)")("log-interval", field(c.log_interval),
                                                 "steps between report lines")(
      "metrics", field(c.metrics), "append JSON lines of metrics to this file")(
      "threads", field(c.threads), "threads for kernels and BLAS")(
      "sample-tokens", field(c.sample_tokens), "length of the sample printed at the end")(
      "init-from", field(c.init_from), "start from this checkpoint's weights")(
      "stop-at", field(c.stop_at), "end this run after this step, checkpointed (0: run all steps)")(
      "detect-anomaly", po::bool_switch(&c.detect_anomaly),
      "check every op's output and gradients for NaN/inf; "
      "report the first with its op, module and input statistics")(
      "inject-nan", field(c.inject_nan),
      "testing aid: plant a NaN, forward:MODULE or backward:MODULE, "
      "optionally @STEP (e.g. backward:blocks.0.mlp.fc2@5)");
  po::options_description all;
  all.add(model).add(data).add(opt).add(run);
  return all;
}

int train_command(const Args& args) {
  return guarded("train", [&] {
    RunConfig cfg;
    auto desc = run_options(cfg);
    auto vm = parse_options(args, desc);
    if (wants_help(vm, "train", desc)) return 0;
    if (!cfg.data.empty()) require_file(cfg.data, "data file");
    if (!cfg.init_from.empty()) require_file(cfg.init_from, "checkpoint");
    cfg.validate();
    require_outputs(
        {{"--out", cfg.out}, {"--metrics", cfg.metrics}},
        {{"--data", cfg.data}, {"--config", config_file(vm)}, {"--init-from", cfg.init_from}});
    io::OutputLock lock = lock_output(cfg.out);
    return run_training(cfg);
  });
}

// The text a resumed run continues on: --data when given (a corpus that moved), else the
// path its config recorded -- only when the checkpoint also records the text's identity,
// since a file could name any path on this machine as its "data".
std::string resume_data(const io::Checkpoint& ckpt, const RunConfig& cfg,
                        const po::variables_map& vm) {
  if (vm.count("data")) {
    const std::string given = vm["data"].as<std::string>();
    require_file(given, "data file");
    return given;
  }
  if (cfg.data.empty()) return "";  // the built-in corpus
  if (ckpt.data_identity.empty())
    throw UsageError(fmt::format(
        "'{}' does not record which text it trained on (no data_identity); give the corpus "
        "with --data (its config names '{}')",
        ckpt.source, data::printable(cfg.data)));
  try {
    io::regular_file_size(cfg.data, "data file");
  } catch (const std::exception& e) {
    throw UsageError(
        fmt::format("the run trained on '{}', which cannot be read now ({}); if it "
                    "moved, give its new place with --data",
                    data::printable(cfg.data), e.what()));
  }
  return cfg.data;
}

int resume_command(const Args& args) {
  return guarded("resume", [&] {
    std::string path, out, metrics;
    int64_t steps = -1, checkpoint_interval = -1, eval_interval = -1;
    int threads = ag::kDefaultThreads;
    po::options_description desc("resume options");
    desc.add_options()("help,h", "show this help")("checkpoint", po::value(&path)->required(),
                                                   "the checkpoint to continue")(
        "steps", po::value(&steps), "total steps (default: the run's)")(
        "out", po::value(&out), "checkpoint path (default: the resumed file)")(
        "data", po::value<std::string>(),
        "the corpus, when it moved since the run began "
        "(checked against the text the run trained on)")("eval-interval", po::value(&eval_interval),
                                                         "steps between validation")(
        "checkpoint-interval", po::value(&checkpoint_interval), "steps between checkpoints")(
        "metrics", po::value(&metrics), "append JSON lines of metrics to this file")(
        "threads", po::value(&threads)->default_value(ag::kDefaultThreads),
        "threads for kernels and BLAS")("stop-at", po::value<int64_t>(),
                                        "end this run after this step, checkpointed")(
        "detect-anomaly", "check every op's output and gradients for NaN/inf")(
        "config", po::value<std::string>(), "read options from an INI file");
    auto vm = parse_options(args, desc);
    if (wants_help(vm, "resume", desc)) return 0;
    require_file(path, "checkpoint");
    if (!vm.count("out")) out = path;  // the resumed file is replaced, atomically
    const std::string data_option = vm.count("data") ? vm["data"].as<std::string>() : "";
    // --out may be the checkpoint it continues (the default); --metrics may not
    require_outputs({{"--metrics", metrics}}, {{"--checkpoint", path}});
    require_outputs({{"--out", out}, {"--metrics", metrics}},
                    {{"--data", data_option}, {"--config", config_file(vm)}});
    io::OutputLock lock = lock_output(out);
    io::Checkpoint ckpt = io::load_checkpoint(path);
    RunConfig cfg = RunConfig::from_json(ckpt.config);
    cfg.data = resume_data(ckpt, cfg, vm);
    cfg.out = out;
    cfg.threads = threads;
    if (vm.count("steps")) cfg.steps = steps;
    if (vm.count("eval-interval")) cfg.eval_interval = eval_interval;
    if (vm.count("checkpoint-interval")) cfg.checkpoint_interval = checkpoint_interval;
    if (vm.count("metrics")) cfg.metrics = metrics;
    cfg.stop_at = vm.count("stop-at") ? vm["stop-at"].as<int64_t>() : 0;
    cfg.detect_anomaly = vm.count("detect-anomaly") > 0;
    cfg.validate();
    if (cfg.steps < ckpt.step)
      throw UsageError(
          fmt::format("--steps {} is before the checkpoint's step {}", cfg.steps, ckpt.step));
    return run_training(cfg, &ckpt);
  });
}

int sample_command(const Args& args) {
  return guarded("sample", [&] {
    std::string path, prompt;
    int64_t tokens = 200, top_k = 0;
    double temperature = 1.0;
    uint64_t seed = 0;
    int threads = ag::kDefaultThreads;
    po::options_description desc("sample options");
    desc.add_options()("help,h", "show this help")("checkpoint", po::value(&path)->required(),
                                                   "checkpoint to sample from")(
        "prompt", po::value(&prompt)->default_value(""), "text to continue (default: newline)")(
        "tokens", po::value(&tokens)->default_value(200), "tokens to generate")(
        "temperature", po::value(&temperature)->default_value(1.0),
        "softmax temperature (0: greedy)")("top-k", po::value(&top_k)->default_value(0),
                                           "keep the k likeliest tokens (0: all)")(
        "seed", po::value(&seed)->default_value(0), "sampling seed")(
        "threads", po::value(&threads)->default_value(ag::kDefaultThreads), "threads")(
        "config", po::value<std::string>(), "read options from an INI file");
    auto vm = parse_options(args, desc);
    if (wants_help(vm, "sample", desc)) return 0;
    if (tokens < 0) throw UsageError(fmt::format("--tokens must be >= 0, got {}", tokens));
    if (!(temperature >= 0 && std::isfinite(temperature)))
      throw UsageError(fmt::format("--temperature must be >= 0 and finite, got {}", temperature));
    if (top_k < 0) throw UsageError(fmt::format("--top-k must be >= 0, got {}", top_k));
    if (threads < 1) throw UsageError(fmt::format("--threads must be >= 1, got {}", threads));
    require_file(path, "checkpoint");
    ag::set_num_threads(threads);
    io::Checkpoint ckpt = io::load_checkpoint(path);
    auto model = model_from_checkpoint(ckpt);
    model->eval();
    auto tok = make_tokenizer(ckpt.tokenizer);
    std::vector<int64_t> ids;
    try {
      ids = tok->encode(prompt.empty() ? "\n" : prompt);
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--prompt: {}", e.what()));
    }
    ag::Generator gen(seed);
    ag::Tensor out = model->generate(ag::from_vector(ids, {1, static_cast<int64_t>(ids.size())}),
                                     tokens, temperature, top_k, gen);
    std::vector<int64_t> all;
    for (double v : out.to_vector()) all.push_back(static_cast<int64_t>(v));
    if (prompt.empty()) all.erase(all.begin());
    // a vocabulary from a file may hold escape sequences: a terminal is shown them escaped
    const std::string text = tok->decode(all);
    fmt::print("{}\n",
               isatty(STDOUT_FILENO) ? data::printable(text, /*keep_line_breaks=*/true) : text);
    return 0;
  });
}

int eval_command(const Args& args) {
  return guarded("eval", [&] {
    std::string path, data_path, dump;
    int64_t context = 0;
    int threads = ag::kDefaultThreads;
    po::options_description desc("eval options");
    desc.add_options()("help,h", "show this help")("checkpoint", po::value(&path)->required(),
                                                   "checkpoint to evaluate")(
        "data", po::value(&data_path)->required(), "UTF-8 text file")(
        "context-length", po::value(&context)->default_value(0),
        "window length T (0: the model's)")("json", "print one JSON object as the last line")(
        "dump-grads", po::value(&dump), "also write d loss / d parameter to this HDF5 file")(
        "threads", po::value(&threads)->default_value(ag::kDefaultThreads), "threads")(
        "config", po::value<std::string>(), "read options from an INI file");
    auto vm = parse_options(args, desc);
    if (wants_help(vm, "eval", desc)) return 0;
    if (threads < 1) throw UsageError(fmt::format("--threads must be >= 1, got {}", threads));
    require_file(path, "checkpoint");
    require_file(data_path, "data file");
    require_outputs({{"--dump-grads", vm.count("dump-grads") ? dump : ""}},
                    {{"--checkpoint", path}, {"--data", data_path}, {"--config", config_file(vm)}});
    ag::set_num_threads(threads);
    io::Checkpoint ckpt = io::load_checkpoint(path);
    auto model = model_from_checkpoint(ckpt);
    if (context < 0 || context > model->config().context_length)
      throw UsageError(fmt::format("--context-length {} must be between 1 and the model's {}",
                                   context, model->config().context_length));
    auto tok = make_tokenizer(ckpt.tokenizer);
    std::vector<int64_t> ids;
    try {
      ids = tok->encode(
          io::read_input_file(data_path, "data file", std::numeric_limits<int64_t>::max()));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("{}: {}", data_path, e.what()));
    }
    auto result =
        evaluate_with_grads(*model, ids, context, vm.count("dump-grads") ? &dump : nullptr);
    if (result.tokens == 0)
      throw std::runtime_error(fmt::format("'{}' has {} tokens, fewer than one window of {} + 1",
                                           data_path, ids.size(),
                                           context ? context : model->config().context_length));
    fmt::print("loss {:.4f}\n", result.loss);
    if (vm.count("dump-grads")) fmt::print("gradients written to {}\n", dump);
    if (vm.count("json"))
      fmt::print("{}\n", nlohmann::json{{"loss", result.loss},
                                        {"tokens", result.tokens},
                                        {"windows", result.windows},
                                        {"checkpoint", path},
                                        {"data", data_path}}
                             .dump());
    return 0;
  });
}

namespace {

// "all checksums good" only when every dataset carries a checksum that held.
std::string verify_summary(const io::VerifyReport& r) {
  if (r.all_checked()) return fmt::format("verified {} datasets: all checksums good", r.datasets());
  std::string s = fmt::format(
      "verified {} datasets: {} checksums good, {} failed, {} without a checksum "
      "(unchecked)",
      r.datasets(), r.checked.size(), r.failures.size(), r.unchecked.size());
  if (!r.refused.empty()) s += fmt::format(", {} objects refused", r.refused.size());
  return s;
}

// What a checkpoint holds; every name and string from the file is escaped for the terminal.
void print_checkpoint(const io::Checkpoint& ckpt, bool sums) {
  fmt::print("checkpoint {}\nstep {}\nconfig {}\n", data::printable(ckpt.source), ckpt.step,
             data::printable(ckpt.config.dump(2), /*keep_line_breaks=*/true));
  if (!ckpt.data_identity.empty()) fmt::print("data {}\n", data::printable(ckpt.data_identity));
  fmt::print("tokenizer {} ({} entries)\n", data::printable(ckpt.tokenizer.type),
             ckpt.tokenizer.vocab.size());
  fmt::print("\n{:<40} {:>16} {:>12}{}\n", "parameter", "shape", "count", sums ? "  fnv1a" : "");
  int64_t total = 0;
  for (const auto& [name, t] : ckpt.model) {
    fmt::print("{:<40} {:>16} {:>12}{}\n", data::printable(name), ag::shape_str(t.shape()),
               t.numel(), sums ? fmt::format("  {:016x}", fnv1a(t)) : "");
    total += t.numel();
  }
  fmt::print("{:<40} {:>16} {:>12}\n", "total", "", total);
  fmt::print("\noptimizer: {}\n",
             ckpt.optimizer ? data::printable(ckpt.optimizer->type) : "none (weights only)");
  for (const auto& [name, s] : ckpt.rng) fmt::print("rng {}: saved\n", data::printable(name));
}

}  // namespace

int inspect_command(const Args& args) {
  return guarded("inspect", [&] {
    std::string path;
    po::options_description desc("inspect options");
    desc.add_options()("help,h", "show this help")("checkpoint", po::value(&path)->required(),
                                                   "checkpoint file")(
        "verify", "read every dataset and report checksum failures by name")(
        "checksums", "print a 64-bit FNV-1a hash of each parameter's float32 bytes");
    po::positional_options_description pos;
    pos.add("checkpoint", 1);
    po::variables_map vm;
    try {
      po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
      if (vm.count("help")) {
        std::cout << "usage: attograd inspect FILE [--verify]\n\n" << desc << "\n";
        return 0;
      }
      po::notify(vm);
    } catch (const po::error& e) {
      throw UsageError(e.what());
    }
    require_file(path, "checkpoint");
    // inspect shows a file with NaN weights (the load of any other command refuses it)
    const io::LoadOptions shown{.allow_non_finite = true};
    std::optional<io::VerifyReport> report;
    io::Checkpoint ckpt;
    if (vm.count("verify")) {
      // every dataset in the same pass, so each bad one is named even when loading stops
      io::Inspection r = io::inspect_checkpoint(path, shown);
      for (const auto& f : r.report.refused) fmt::print(stderr, "REFUSED {}\n", f);
      for (const auto& f : r.report.failures) fmt::print(stderr, "FAILED {}\n", f);
      for (const auto& f : r.report.unchecked) fmt::print(stderr, "UNCHECKED {}\n", f);
      if (!r.checkpoint) {
        fmt::print("{}\n", verify_summary(r.report));
        throw io::CheckpointError(r.load_error);
      }
      ckpt = std::move(*r.checkpoint);
      report = std::move(r.report);
    } else {
      ckpt = io::load_checkpoint(path, shown);
    }
    for (const auto& w : ckpt.warnings) fmt::print(stderr, "attograd inspect: warning: {}\n", w);
    print_checkpoint(ckpt, vm.count("checksums") > 0);
    if (!report) return 0;
    fmt::print("{}\n", verify_summary(*report));
    return report->failures.empty() && report->refused.empty() ? 0 : 1;
  });
}

int cli_main(int argc, char** argv) {
  if (argc < 2) {
    std::cout << kUsage;
    return 0;
  }
  const std::string command = argv[1];
  Args args(argv + 2, argv + argc);
  if (command == "train") return train_command(args);
  if (command == "resume") return resume_command(args);
  if (command == "sample") return sample_command(args);
  if (command == "eval") return eval_command(args);
  if (command == "inspect") return inspect_command(args);
  if (command == "gradcheck") return gradcheck_command(args);
  if (command == "bench") return bench::bench_command(args);
  if (command == "demo") return demo_command(args);
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  fmt::print(stderr, "attograd: error: unknown command '{}' (try 'attograd --help')\n", command);
  return 2;
}

}  // namespace train
