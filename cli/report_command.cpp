// `report`: metrics files and a checkpoint to one HTML page; and the page `train --report`
// keeps up to date.
#include <fmt/format.h>

#include <ctime>

#include "cli/cli.h"
#include "cli/command_support.h"
#include "cli/report.h"
#include "io/checkpoint.h"
#include "io/tokenizer_section.h"
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
      "a checkpoint: its sample, and with --prompt its "
      "attention maps and per-token loss");
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

std::string utc_now() {
  char text[32] = "";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  if (gmtime_r(&now, &utc)) std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", &utc);
  return text;
}

ModelView checkpoint_view(const ReportOptions& o) {
  const io::Checkpoint ckpt = io::load_checkpoint(o.checkpoint);
  auto model = train::model_from_checkpoint(ckpt);
  model->eval();
  const auto tokenizer = io::make_tokenizer(ckpt.tokenizer);
  ModelViewOptions mo;
  mo.source = o.checkpoint, mo.step = ckpt.step, mo.config = ckpt.config, mo.prompt = o.prompt;
  mo.sample_tokens = o.sample_tokens, mo.temperature = o.temperature, mo.seed = o.seed;
  return model_view(*model, *tokenizer, mo);
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
    ReportInputs in;
    for (const auto& m : o.metrics) in.runs.push_back(read_metrics(m));
    name_runs(in.runs);
    if (!o.checkpoint.empty()) in.model = checkpoint_view(o);
    in.generated_by = "made by attograd report, " + utc_now();
    const std::string page = render_report(in);
    io::write_file_atomically(o.out, page);
    fmt::print("wrote {} ({:.0f} KB)\n", o.out, page.size() / 1024.0);
    return 0;
  });
}

namespace {

// The prompt of a live report: the one given, else the start of the validation text.
std::string live_prompt(const train::TrainingRun& run, const std::string& prompt) {
  if (!prompt.empty()) return prompt;
  const train::RunData& d = run.data();
  const data::TokenStore& text = d.val.empty() ? d.train : d.val;
  const int64_t n =
      std::min<int64_t>({32, run.config().model.context_length, static_cast<int64_t>(text.size())});
  return d.tokenizer->decode(text.slice(0, n));
}

}  // namespace

train::RunObserver live_report(const std::string& path, const std::string& prompt) {
  return [path, prompt](const train::TrainingRun& run, bool final) {
    const train::RunConfig& cfg = run.config();
    ReportInputs in;
    in.runs.push_back(cfg.metrics.empty()
                          ? parse_metrics_lines(run.reporter().records(), "this run")
                          : read_metrics(cfg.metrics));
    name_runs(in.runs);
    ModelViewOptions mo;
    mo.source = final ? cfg.out : "the model being trained";
    mo.step = run.step(), mo.config = cfg.to_json(), mo.sample_tokens = 0;
    mo.prompt = live_prompt(run, prompt);
    try {
      in.model = model_view(run.model(), *run.data().tokenizer, mo);
    } catch (const std::invalid_argument& e) {  // a --report-prompt the tokenizer refuses
      mo.prompt.clear();
      in.model = model_view(run.model(), *run.data().tokenizer, mo);
      in.model->prompt_problem = fmt::format("--report-prompt: {}", e.what());
    }
    in.model->sample = in.runs[0].sample;
    in.model->sample_note =
        fmt::format("The sample printed at the end of training (step {}).", in.runs[0].sample_step);
    in.refresh_seconds = final ? 0 : 30;
    in.generated_by =
        fmt::format("made by attograd train --report at step {} of {}, {}{}", run.step(), cfg.steps,
                    utc_now(), final ? " (the run's end)" : "");
    io::write_file_atomically(path, render_report(in));
  };
}

}  // namespace cli
