// `report`: metrics files and a checkpoint to one HTML page (report/report.h draws it).
#include <fmt/format.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>

#include "base/utf8.h"
#include "cli/cli.h"
#include "cli/command_support.h"
#include "io/checkpoint.h"
#include "io/history.h"
#include "io/tokenizer_section.h"
#include "report/report.h"
#include "train/model_loading.h"
#include "train/train.h"

namespace cli {

namespace {

struct ReportOptions {
  std::vector<std::string> metrics, files;  // files: the bare arguments, sorted by content
  std::string checkpoint, prompt, out;
  int64_t sample_tokens = 200;
  double temperature = 0.8;
  uint64_t seed = 0;
  int threads = ag::kDefaultThreads;
  bool overwrite = false;
};

po::options_description report_options(ReportOptions& o) {
  po::options_description desc("report options");
  auto add = desc.add_options();
  add("help,h", "show this help");
  add("metrics", po::value(&o.metrics)->multitoken()->composing(),
      "a --metrics file of train (repeat, or name several: the runs are overlaid)");
  add("checkpoint", po::value(&o.checkpoint),
      "a checkpoint: its sample, and with --prompt its attention maps and per-token loss; "
      "without --metrics, also the curves of the history it keeps (default, without "
      "--metrics: attograd.h5 when there is one here)");
  add("prompt", po::value(&o.prompt),
      "text for the attention maps (at most context_length tokens)");
  add("out", po::value(&o.out),
      "the HTML file to write (replaced atomically; a page attograd wrote is replaced without "
      "--overwrite; default: the checkpoint's path with .html for .h5, else report.html)");
  add("sample-tokens", po::value(&o.sample_tokens)->default_value(200),
      "tokens of sample text from the checkpoint (0: none)");
  add("temperature", value_with_default(&o.temperature, 0.8), "the sample's temperature");
  add("seed", po::value(&o.seed)->default_value(0), "the sample's seed");
  add("threads", po::value(&o.threads)->default_value(ag::kDefaultThreads), "threads");
  add("config", po::value<std::string>(), "read options from an INI file");
  add_overwrite_option(desc, o.overwrite);
  return desc;
}

// Files named without an option: a checkpoint (HDF5) is --checkpoint, anything else a
// metrics file, so `attograd report run.h5 run.jsonl --out r.html` reads as meant.
void sort_bare_files(ReportOptions& o) {
  for (const std::string& f : o.files) {
    require_file(f, "file");
    if (!io::is_hdf5_file(f)) {
      o.metrics.push_back(f);
    } else if (o.checkpoint.empty() || o.checkpoint == f) {
      o.checkpoint = f;
    } else {
      throw UsageError(fmt::format("'{}' and '{}' are both checkpoints: a report shows one",
                                   base::printable(o.checkpoint), base::printable(f)));
    }
  }
}

// Whether a file's first non-blank byte opens a JSON object, as a metrics file's lines do.
bool looks_like_json_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  while (in.get(c) && std::isspace(static_cast<unsigned char>(c))) {
  }
  return in && c == '{';
}

// A checkpoint given as --metrics, or a metrics file as --checkpoint, is named for what it
// is, with the option it belongs to.
void check_file_kinds(const ReportOptions& o) {
  for (const std::string& m : o.metrics) {
    require_file(m, "metrics file");
    if (io::is_hdf5_file(m))
      throw UsageError(fmt::format(
          "--metrics '{}' is a checkpoint (HDF5), not a metrics file (train --metrics writes "
          "JSON lines): give it as --checkpoint {}",
          base::printable(m), base::printable(m)));
  }
  if (o.checkpoint.empty()) return;
  require_file(o.checkpoint, "checkpoint");
  if (!io::is_hdf5_file(o.checkpoint))
    throw UsageError(fmt::format(
        "--checkpoint '{}' is not a checkpoint (not HDF5){}: give a metrics file as --metrics {}",
        base::printable(o.checkpoint),
        looks_like_json_lines(o.checkpoint) ? "; it reads as a metrics file (JSON lines)" : "",
        base::printable(o.checkpoint)));
}

// --out's default, as train's --out has one: run.h5's page is run.html beside it; a report
// of metrics alone is report.html here.
std::string default_page(const ReportOptions& o) {
  if (o.checkpoint.empty()) return "report.html";
  return std::filesystem::path(o.checkpoint).replace_extension(".html").string();
}

void check_report_options(const ReportOptions& o) {
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
    po::options_description all;
    all.add(desc).add_options()("files", po::value(&o.files)->composing());
    auto vm = parse_options(args, all, "files", -1);
    if (wants_help(vm, "report", desc, "[FILE...]")) return 0;
    sort_bare_files(o);
    if (o.metrics.empty() && o.checkpoint.empty())
      o.checkpoint = default_checkpoint(
          "report",
          "nothing to report: give --metrics FILE (one or more) and/or --checkpoint FILE (or "
          "name them without the options)");
    if (o.out.empty()) o.out = default_page(o);
    check_report_options(o);
    check_file_kinds(o);
    io::NamedPaths inputs{{"--checkpoint", o.checkpoint}, {"--config", config_file(vm)}};
    for (const auto& m : o.metrics) inputs.push_back({"--metrics", m});
    const auto claim =
        claim_outputs({{"--out", o.out, io::OutputKind::page}}, inputs, {.overwrite = o.overwrite});
    ag::set_num_threads(o.threads);
    report::ReportInputs in;
    for (const auto& m : o.metrics)
      for (auto& run : report::read_metrics_runs(m)) in.runs.push_back(std::move(run));
    std::optional<io::Checkpoint> ckpt;
    if (!o.checkpoint.empty()) ckpt = io::load_checkpoint(o.checkpoint);
    if (ckpt) train::refuse_gradient_dump(*ckpt);
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
