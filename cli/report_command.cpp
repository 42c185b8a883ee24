// `report`: metrics files and a checkpoint to one HTML page (report/report.h draws it).
#include <fmt/format.h>

#include <optional>

#include "cli/cli.h"
#include "cli/command_support.h"
#include "io/checkpoint.h"
#include "io/history.h"
#include "io/tokenizer_section.h"
#include "report/report.h"
#include "train/train.h"

namespace cli {

namespace {

struct ReportOptions {
  std::vector<std::string> metrics;
  std::string checkpoint, prompt, out;
  int64_t sample_tokens = 200;
  double temperature = 0.8;
  uint64_t seed = 0;
  int threads = ag::kDefaultThreads;
};

po::options_description report_options(ReportOptions& o) {
  po::options_description desc("report options");
  auto add = desc.add_options();
  add("help,h", "show this help");
  add("metrics", po::value(&o.metrics)->multitoken()->composing(),
      "a --metrics file of train (repeat, or name several: the runs are overlaid)");
  add("checkpoint", po::value(&o.checkpoint),
      "a checkpoint: its sample, and with --prompt its attention maps and per-token loss; "
      "without --metrics, also the curves of the history it keeps");
  add("prompt", po::value(&o.prompt),
      "text for the attention maps (at most context_length tokens)");
  add("out", po::value(&o.out)->required(), "the HTML file to write (replaced atomically)");
  add("sample-tokens", po::value(&o.sample_tokens)->default_value(200),
      "tokens of sample text from the checkpoint (0: none)");
  add("temperature", po::value(&o.temperature)->default_value(0.8, "0.8"),
      "the sample's temperature");
  add("seed", po::value(&o.seed)->default_value(0), "the sample's seed");
  add("threads", po::value(&o.threads)->default_value(ag::kDefaultThreads), "threads");
  add("config", po::value<std::string>(), "read options from an INI file");
  return desc;
}

void check_report_options(const ReportOptions& o) {
  if (o.metrics.empty() && o.checkpoint.empty())
    throw UsageError(
        "nothing to report: give --metrics FILE (one or more) and/or --checkpoint FILE");
  if (!o.prompt.empty() && o.checkpoint.empty())
    throw UsageError("--prompt needs --checkpoint: the model whose attention it shows");
  if (o.sample_tokens < 0)
    throw UsageError(fmt::format("--sample-tokens must be >= 0, got {}", o.sample_tokens));
  if (!(o.temperature >= 0 && std::isfinite(o.temperature)))
    throw UsageError(fmt::format("--temperature must be >= 0 and finite, got {}", o.temperature));
  if (o.threads < 1) throw UsageError(fmt::format("--threads must be >= 1, got {}", o.threads));
}

report::ModelView checkpoint_view(const ReportOptions& o, const io::Checkpoint& ckpt) {
  auto model = train::model_from_checkpoint(ckpt);
  model->eval();
  const auto tokenizer = io::make_tokenizer(ckpt.tokenizer);
  report::ModelViewOptions mo;
  mo.source = o.checkpoint, mo.step = ckpt.step, mo.config = ckpt.config, mo.prompt = o.prompt;
  mo.sample_tokens = o.sample_tokens, mo.temperature = o.temperature, mo.seed = o.seed;
  return report::model_view(*model, *tokenizer, mo);
}

}  // namespace

int report_command(const Args& args) {
  return guarded("report", [&] {
    ReportOptions o;
    auto desc = report_options(o);
    auto vm = parse_options(args, desc);
    if (wants_help(vm, "report", desc)) return 0;
    check_report_options(o);
    io::NamedPaths inputs{{"--checkpoint", o.checkpoint}, {"--config", config_file(vm)}};
    for (const auto& m : o.metrics) {
      require_file(m, "metrics file");
      inputs.push_back({"--metrics", m});
    }
    if (!o.checkpoint.empty()) require_file(o.checkpoint, "checkpoint");
    require_outputs({{"--out", o.out}}, inputs);
    ag::set_num_threads(o.threads);
    report::ReportInputs in;
    for (const auto& m : o.metrics)
      for (auto& run : report::read_metrics_runs(m)) in.runs.push_back(std::move(run));
    std::optional<io::Checkpoint> ckpt;
    if (!o.checkpoint.empty()) ckpt = io::load_checkpoint(o.checkpoint);
    if (ckpt && o.metrics.empty()) {  // the curves the checkpoint keeps (io/history.h)
      if (ckpt->history.empty())
        fmt::print(
            "note: {} keeps no metrics history (an older attograd or another tool wrote "
            "it): no curves\n",
            o.checkpoint);
      else
        in.runs.push_back(report::run_of_checkpoint_history(
            io::parse_history(ckpt->history, ckpt->source), ckpt->config, ckpt->run_id,
            ckpt->run_name, o.checkpoint));
    }
    report::name_runs(in.runs);
    if (ckpt) in.model = checkpoint_view(o, *ckpt);
    in.generated_by = "made by attograd report, " + report::utc_now();
    const std::string page = report::render_report(in);
    base::write_file_atomically(o.out, page);
    fmt::print("wrote {} ({:.0f} KB)\n", o.out, page.size() / 1024.0);
    return 0;
  });
}

}  // namespace cli
