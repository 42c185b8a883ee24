// `train` and `resume`: options to a RunConfig, paths checked, then train::run_training.
#include <fmt/format.h>

#include <algorithm>

#include "base/utf8.h"
#include "cli/cli.h"
#include "cli/command_support.h"
#include "cli/other_runs.h"
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

// An optimiser setting given for an optimiser that does not read it is refused rather
// than silently ignored (--momentum with adamw).
void refuse_settings_of_other_optimizers(const train::RunConfig& cfg, const po::variables_map& vm) {
  const auto reads = optim::hyperparameters_of(cfg.optimizer.name);
  for (const optim::Hyperparameter& h : optim::hyperparameter_table()) {
    const std::string option = option_name(h.key);
    if (!vm.count(option) || vm[option].defaulted() ||
        std::find(reads.begin(), reads.end(), h.key) != reads.end())
      continue;
    std::vector<std::string> readers;
    for (const std::string& name : optim::optimizer_names()) {
      const auto keys = optim::hyperparameters_of(name);
      if (std::find(keys.begin(), keys.end(), h.key) != keys.end()) readers.push_back(name);
    }
    throw UsageError(fmt::format("--{} is a setting of {}, not of --optimizer {}", option,
                                 fmt::join(readers, " and "), cfg.optimizer.name));
  }
}

// --epochs counts the steps from the data: given with --steps, one of them would be ignored.
void refuse_steps_and_epochs(const po::variables_map& vm) {
  const auto given = [&](const char* option) {
    return vm.count(option) && !vm[option].defaulted();
  };
  if (given("steps") && given("epochs"))
    throw UsageError(
        "--steps and --epochs both say how long to train; give one of them (--epochs counts "
        "the steps from the data)");
}

// A run's outputs: its checkpoint (whose run it holds, cli/other_runs.h judges), metrics
// and report page.
// and report page; with --keep-best, the best evaluation's checkpoint (a fresh run's may
// not replace a file unless --overwrite; a resume's is the run's own).
std::vector<io::Output> run_outputs(const std::string& out, const train::RunConfig& cfg,
                                    io::OutputKind out_kind = io::OutputKind::run,
                                    io::OutputKind report_kind = io::OutputKind::page,
                                    io::OutputKind best_kind = io::OutputKind::checkpoint) {
  train::RunConfig at_out = cfg;
  at_out.out = out;
  return {{"--out", out, out_kind},
          {"--metrics", cfg.metrics, io::OutputKind::run},
          {"--report", cfg.report, report_kind},
          {"--keep-best", cfg.keep_best ? at_out.best_out() : "", best_kind, "--out"}};
}

train::RunObserver report_observer(const train::RunConfig& cfg) {
  if (cfg.report.empty()) return nullptr;
  return report::live_report(cfg.report, cfg.report_prompt);
}

}  // namespace

int train_command(const Args& args) {
  return guarded("train", [&] {
    train::World::join();  // MPI, when an MPI launcher started this process
    train::RunConfig cfg;
    bool dry_run = false;
    auto desc = run_options(cfg);
    desc.add_options()("dry-run", po::bool_switch(&dry_run),
                       "check the options (and --config's file), print the run's config as "
                       "JSON and stop: no file is read or written");
    auto vm = parse_options(args, desc);
    if (wants_help(vm, "train", desc)) return 0;
    for (const std::string& key : train::keys_an_init_decides())  // the rest: --init-from's
      if (vm.count(option_name(key)) && !vm[option_name(key)].defaulted())
        cfg.model_keys_given.push_back(key);
    cfg.validate();
    refuse_settings_of_other_optimizers(cfg, vm);
    refuse_steps_and_epochs(vm);
    if (dry_run) {
      fmt::print("{}\n", cfg.to_json().dump(2));
      return 0;
    }
    if (!cfg.data.empty()) require_data(cfg.data);
    refuse_text_options_for_folder(cfg, vm);
    if (!cfg.init_from.empty()) require_file(cfg.init_from, "checkpoint");
    const auto claim = claim_outputs(
        run_outputs(cfg.out, cfg),
        with_data_files({{"--config", config_file(vm)}, {"--init-from", cfg.init_from}}, cfg.data),
        {.overwrite = cfg.overwrite, .lock = train::World::current().root()});
    refuse_other_runs(cfg);  // after the lock: no other run writes them meanwhile
    cfg.program = program_path();
    return train::run_training(cfg, nullptr, report_observer(cfg));
  });
}

namespace {

// The text a resumed run continues on: --data when given (a corpus that moved; cfg.data
// holds it), else the path its config recorded -- only when the checkpoint also records
// the text's identity, since a file could name any path on this machine as its "data".
std::string resume_data(const io::Checkpoint& ckpt, const train::RunConfig& cfg,
                        const po::variables_map& vm) {
  if (vm.count("data")) {
    require_data(cfg.data);
    return cfg.data;
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

// What a resume may change is train's options marked so (run_options.cpp), without
// defaults: cfg holds only the options given until the checkpoint's config is under them.
po::options_description resume_options(train::RunConfig& cfg, std::string& path, bool& overwrite) {
  po::options_description desc(
      "resume options (each defaults to the run's, from the checkpoint; --out to the "
      "checkpoint itself)");
  desc.add_options()("checkpoint", po::value(&path)->required(),
                     "the checkpoint to continue (also the first bare argument)");
  desc.add(run_options(cfg, RunOptions::resume));
  // not the run's --overwrite, which would empty its metrics file
  desc.add_options()("overwrite", po::bool_switch(&overwrite),
                     "replace what is at an --out other than the checkpoint continued");
  return desc;
}

// The checkpoint's config with the options given on this command line over it: storing
// vm again writes exactly the options given into the fields they are bound to, cfg's.
void resume_config(train::RunConfig& cfg, const io::Checkpoint& ckpt, po::variables_map& vm,
                   const std::string& out) {
  cfg = train::RunConfig::from_json(ckpt.config);
  po::notify(vm);
  cfg.data = resume_data(ckpt, cfg, vm);
  cfg.out = out;
  cfg.validate();
  if (cfg.steps < ckpt.step)
    throw UsageError(
        fmt::format("--steps {} is before the checkpoint's step {}", cfg.steps, ckpt.step));
}

}  // namespace

int resume_command(const Args& args) {
  return guarded("resume", [&] {
    train::World::join();
    train::RunConfig cfg;  // the options given (on train's defaults), then the resumed run's
    std::string path;
    bool overwrite = false;
    auto desc = resume_options(cfg, path, overwrite);
    auto vm = parse_options(args, desc, "checkpoint");
    if (wants_help(vm, "resume", desc, "CHECKPOINT")) return 0;
    require_file(path, "checkpoint");
    const std::string out = vm.count("out") ? cfg.out : path;  // replaced atomically
    const std::string data_option = vm.count("data") ? cfg.data : "";
    // --out may be the checkpoint it continues (the default); --metrics and --report may not
    const bool continues = io::same_file(out, path);
    claim_outputs({{"--metrics", cfg.metrics, io::OutputKind::run},
                   {"--report", cfg.report, io::OutputKind::run}},
                  {{"--checkpoint", path}}, {.lock = false});
    io::NamedPaths inputs = with_data_files({{"--config", config_file(vm)}}, data_option);
    if (!continues) inputs.emplace_back("--checkpoint", path);
    // locked now; what is at them is judged once the run's data is known, an input too
    const auto claim =
        claim_outputs(run_outputs(out, cfg, io::OutputKind::run, io::OutputKind::run), inputs,
                      {.lock = train::World::current().root()});
    // a frozen base's blocks kept as they are: the resume holds them as the run did
    io::Checkpoint ckpt = io::load_checkpoint(path, {.keep_packed = true});
    train::refuse_gradient_dump(ckpt);  // before its config is taken for a run's
    resume_config(cfg, ckpt, vm, out);
    if (data_option.empty()) inputs = with_data_files(inputs, cfg.data, "the run's data");
    const io::OutputKind kind = continues ? io::OutputKind::run : io::OutputKind::checkpoint;
    std::vector<io::Output> outputs = run_outputs(out, cfg, kind, io::OutputKind::page, kind);
    const io::Output best = outputs.back();  // the run's --keep-best, known only now
    outputs.pop_back();
    claim_outputs(outputs, inputs, {.overwrite = overwrite, .lock = false});
    const auto best_claim = claim_outputs(
        {best}, inputs, {.overwrite = overwrite, .lock = train::World::current().root()});
    refuse_other_run_metrics(cfg.metrics, ckpt);
    cfg.program = program_path();
    return train::run_training(cfg, &ckpt, report_observer(cfg));
  });
}

}  // namespace cli
