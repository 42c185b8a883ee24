// The page `train --report` keeps up to date: rendered after each evaluation and at the end.
#include <fmt/format.h>

#include <ctime>

#include "base/atomic_file.h"
#include "report/report.h"
#include "train/train.h"

namespace report {

std::string utc_now() {
  char text[32] = "";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  if (gmtime_r(&now, &utc)) std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", &utc);
  return text;
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

// The run being trained, of the runs its metrics file holds (train refuses another run's
// file, but one written by an older attograd may hold several).
MetricsRun this_run(std::vector<MetricsRun> runs, const std::string& id) {
  for (MetricsRun& r : runs)
    if (r.run_id == id) return std::move(r);
  if (runs.empty()) runs.emplace_back();
  return std::move(runs.back());
}

}  // namespace

train::RunObserver live_report(const std::string& path, const std::string& prompt) {
  return [path, prompt](const train::TrainingRun& run, bool final) {
    const train::RunConfig& cfg = run.config();
    ReportInputs in;
    in.runs.push_back(this_run(cfg.metrics.empty()
                                   ? parse_metrics_lines(run.reporter().records(), "this run")
                                   : read_metrics_runs(cfg.metrics),
                               run.reporter().identity().id));
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
        fmt::format("The last sample the run recorded (step {}).", in.runs[0].sample_step);
    in.refresh_seconds = final ? 0 : 30;
    in.generated_by =
        fmt::format("made by attograd train --report at step {} of {}, {}{}", run.step(), cfg.steps,
                    utc_now(), final ? " (the run's end)" : "");
    base::write_file_atomically(path, render_report(in));
  };
}

}  // namespace report
