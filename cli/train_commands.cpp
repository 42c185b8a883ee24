// `train` and `resume`: options to a RunConfig, paths checked, then train::run_training.
#include <fmt/format.h>

#include "base/utf8.h"
#include "cli/cli.h"
#include "cli/command_support.h"
#include "data/prepared.h"
#include "io/checkpoint.h"
#include "report/report.h"
#include "train/train.h"

namespace cli {

namespace {

// A prepared folder brings its tokenizer and split: options that would choose them for a
// text are refused rather than silently ignored.
void refuse_text_options_for_folder(const train::RunConfig& cfg, const po::variables_map& vm) {
  if (cfg.data.empty() || !data::is_prepared_folder(cfg.data)) return;
  for (const char* option : {"tokenizer", "val-fraction"})
    if (vm.count(option) && !vm[option].defaulted())
      throw UsageError(fmt::format(
          "--{} chooses how a text is tokenized and split, but '{}' is a prepared folder, "
          "which has its own (set them with 'attograd prepare')",
          option, base::printable(cfg.data)));
}

// train --report: the page refreshed at each evaluation (report/report.h).
train::RunObserver report_observer(const train::RunConfig& cfg) {
  if (cfg.report.empty()) return nullptr;
  return report::live_report(cfg.report, cfg.report_prompt);
}

}  // namespace

int train_command(const Args& args) {
  return guarded("train", [&] {
    train::World::join();  // MPI, when an MPI launcher started this process
    train::RunConfig cfg;
    auto desc = run_options(cfg);
    auto vm = parse_options(args, desc);
    if (wants_help(vm, "train", desc)) return 0;
    if (!cfg.data.empty()) require_data(cfg.data);
    refuse_text_options_for_folder(cfg, vm);
    if (!cfg.init_from.empty()) require_file(cfg.init_from, "checkpoint");
    cfg.validate();
    require_outputs(
        {{"--out", cfg.out}, {"--metrics", cfg.metrics}, {"--report", cfg.report}},
        with_data_files({{"--config", config_file(vm)}, {"--init-from", cfg.init_from}}, cfg.data));
    const auto lock = lock_output_on_root(cfg.out);
    return train::run_training(cfg, nullptr, report_observer(cfg));
  });
}

namespace {

// The text a resumed run continues on: --data when given (a corpus that moved), else the
// path its config recorded -- only when the checkpoint also records the text's identity,
// since a file could name any path on this machine as its "data".
std::string resume_data(const io::Checkpoint& ckpt, const train::RunConfig& cfg,
                        const po::variables_map& vm) {
  if (vm.count("data")) {
    const std::string given = vm["data"].as<std::string>();
    require_data(given);
    return given;
  }
  if (cfg.data.empty()) return "";  // the built-in corpus
  if (ckpt.data_identity.empty())
    throw UsageError(fmt::format(
        "'{}' does not record which text it trained on (no data_identity); give the corpus "
        "with --data (its config names '{}')",
        ckpt.source, base::printable(cfg.data)));
  try {
    if (!data::is_prepared_folder(cfg.data)) base::regular_file_size(cfg.data, "data file");
  } catch (const std::exception& e) {
    throw UsageError(
        fmt::format("the run trained on '{}', which cannot be read now ({}); if it "
                    "moved, give its new place with --data",
                    base::printable(cfg.data), e.what()));
  }
  return cfg.data;
}

// What a resume may change; everything else comes from the checkpoint's config.
struct ResumeOptions {
  std::string path, out, metrics, report, report_prompt;
  int64_t steps = -1, checkpoint_interval = -1, eval_interval = -1, grad_accum_steps = 1;
  int threads = ag::kDefaultThreads;
  int64_t bucket_mb = train::kDefaultBucketMb;
};

po::options_description resume_options(ResumeOptions& o) {
  po::options_description desc("resume options");
  auto add = desc.add_options();
  add("help,h", "show this help");
  add("checkpoint", po::value(&o.path)->required(), "the checkpoint to continue");
  add("steps", po::value(&o.steps), "total steps (default: the run's)");
  add("out", po::value(&o.out), "checkpoint path (default: the resumed file)");
  add("data", po::value<std::string>(),
      "the corpus, when it moved since the run began "
      "(checked against the text the run trained on)");
  add("eval-interval", po::value(&o.eval_interval), "steps between validation");
  add("grad-accum-steps", po::value(&o.grad_accum_steps),
      "micro-batches per step (default: the run's; another value changes the effective batch)");
  add("checkpoint-interval", po::value(&o.checkpoint_interval), "steps between checkpoints");
  add("metrics", po::value(&o.metrics), "append JSON lines of metrics to this file");
  add("report", po::value(&o.report),
      "write an HTML report here at each evaluation and at the end (replaced atomically)");
  add("report-prompt", po::value(&o.report_prompt),
      "the text of the report's attention maps (default: the start of the validation text)");
  add("threads", po::value(&o.threads)->default_value(ag::kDefaultThreads),
      "threads for kernels and BLAS");
  add("precision", po::value<std::string>(), "fp32 or bf16 (default: the run's)");
  add("bucket-mb", po::value(&o.bucket_mb)->default_value(train::kDefaultBucketMb),
      "under mpirun: gradient bucket size in MB");
  add("profile", "print where the steps' time went");
  add("reduce", po::value<std::string>()->default_value("tree"),
      "under mpirun: tree (the same bits on any number of processes) or allreduce");
  add("stop-at", po::value<int64_t>(), "end this run after this step, checkpointed");
  add("detect-anomaly", "check every op's output and gradients for NaN/inf");
  add("config", po::value<std::string>(), "read options from an INI file");
  return desc;
}

// The checkpoint's config with the options given on this command line applied.
train::RunConfig resumed_config(const io::Checkpoint& ckpt, const ResumeOptions& o,
                                const po::variables_map& vm) {
  train::RunConfig cfg = train::RunConfig::from_json(ckpt.config);
  cfg.data = resume_data(ckpt, cfg, vm);
  cfg.out = o.out;
  cfg.threads = o.threads;
  cfg.bucket_mb = o.bucket_mb;
  cfg.profile = vm.count("profile") > 0;
  cfg.reduce = vm["reduce"].as<std::string>();
  if (vm.count("steps")) cfg.steps = o.steps;
  if (vm.count("eval-interval")) cfg.eval_interval = o.eval_interval;
  if (vm.count("grad-accum-steps")) cfg.grad_accum_steps = o.grad_accum_steps;
  if (vm.count("precision")) cfg.precision = vm["precision"].as<std::string>();
  if (vm.count("checkpoint-interval")) cfg.checkpoint_interval = o.checkpoint_interval;
  if (vm.count("metrics")) cfg.metrics = o.metrics;
  cfg.report = o.report, cfg.report_prompt = o.report_prompt;
  cfg.stop_at = vm.count("stop-at") ? vm["stop-at"].as<int64_t>() : 0;
  cfg.detect_anomaly = vm.count("detect-anomaly") > 0;
  cfg.validate();
  if (cfg.steps < ckpt.step)
    throw UsageError(
        fmt::format("--steps {} is before the checkpoint's step {}", cfg.steps, ckpt.step));
  return cfg;
}

}  // namespace

int resume_command(const Args& args) {
  return guarded("resume", [&] {
    train::World::join();
    ResumeOptions o;
    auto desc = resume_options(o);
    auto vm = parse_options(args, desc);
    if (wants_help(vm, "resume", desc)) return 0;
    require_file(o.path, "checkpoint");
    if (!vm.count("out")) o.out = o.path;  // the resumed file is replaced, atomically
    const std::string data_option = vm.count("data") ? vm["data"].as<std::string>() : "";
    // --out may be the checkpoint it continues (the default); --metrics may not
    require_outputs({{"--metrics", o.metrics}, {"--report", o.report}}, {{"--checkpoint", o.path}});
    require_outputs({{"--out", o.out}, {"--metrics", o.metrics}, {"--report", o.report}},
                    with_data_files({{"--config", config_file(vm)}}, data_option));
    const auto lock = lock_output_on_root(o.out);
    io::Checkpoint ckpt = io::load_checkpoint(o.path);
    const train::RunConfig cfg = resumed_config(ckpt, o, vm);
    return train::run_training(cfg, &ckpt, report_observer(cfg));
  });
}

}  // namespace cli
