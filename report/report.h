#pragma once
// The training report, the map of report/: one self-contained HTML page (inline SVG, one
// inline script and one style element, no request of any kind: it opens from disk, offline)
// built from --metrics files and, optionally, a model with a prompt. The command line
// (cli/report_command.cpp, and train --report) only calls it.
//
//   report::ReportInputs in;
//   in.runs.push_back(report::read_metrics("run.jsonl"));
//   in.model = report::model_view(model, *tokenizer, {.source = "run.h5", .step = 2000,
//                                                    .prompt = "Your journey starts"});
//   base::write_file_atomically("report.html", report::render_report(in));
//
//   report.h        this map, and the page: render_report, model_view, live_report
//   page.cpp        the page's head (security policy, style), summary and configuration
//   charts.cpp      the training charts, every run overlaid
//   controls.cpp    the charts' controls and the table of points they use; the samples
//   model_view.cpp  the model section: sample, per-token loss, attention heat maps
//   live_report.cpp the page train --report refreshes after each evaluation
//   metrics_log.h   a --metrics file read back (hostile input): every run it holds; a
//                   checkpoint's history as a run (report --checkpoint alone)
//   line_chart.h    a line chart as inline SVG
//   heat_map.h      an attention matrix as an SVG heat map
//   html.h          escaping everything from elsewhere into HTML, SVG and embedded JSON
//   report.js, report.css  the page's script and style, built in as strings (assets.cpp.in)
//
// The page: a summary per run; charts of loss (train, validation, the built-in corpus's
// baselines; log scale on demand), bits per byte, learning rate, gradient norm and tokens/s,
// several runs overlaid with a legend naming what differs in their configs (or the runs'
// names); controls as TensorBoard has them: smoothing, the x axis (step, tokens, wall time),
// zoom on a range, the metrics as a CSV download; the samples each run recorded; the configs,
// memory plans and wall times; the model's sample; the prompt's per-token loss coloured over
// its text; and every layer's and head's attention weights as heat maps.
//
// Hostile input stays text: everything from a file or the user is escaped (html.h), the
// embedded data is JSON that cannot end its script element, and a Content-Security-Policy
// (default-src 'none', the script and style allowed by their SHA-256 only) forbids every
// request and any other script. The page's script (report.js) adds the hover readouts,
// the log-scale switch, the charts' controls, the samples' slider and enlarging a heat map; it
// records any error it meets, and any policy violation, in the page itself (#page-errors), and with
// #selftest in the address it exercises those itself and writes what it saw into #selftest
// (tests/cli/report_test.sh).
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "nn/gpt.h"
#include "report/metrics_log.h"
#include "train/training_run.h"

namespace report {

// A prompt as the model sees it: its tokens, each layer's attention, the loss of each token.
struct PromptView {
  std::vector<int64_t> ids;
  std::vector<std::string> tokens;          // each token's text (its bytes as decoded)
  std::vector<std::vector<float>> weights;  // [layer * H + head] -> T x T, row-major
  int64_t layers = 0, heads = 0;
  std::vector<double> loss;              // nats; NaN for the first token (nothing predicts it)
  std::vector<std::string> predictions;  // per token: the model's three likeliest there
};

struct ModelView {
  std::string source;  // the checkpoint's path, or "the model being trained"
  int64_t step = 0;
  nlohmann::json config;  // the run's config (a checkpoint's `config`)
  int64_t parameters = 0, vocab_size = 0;
  std::string prompt;                     // as given
  std::string sample_prompt, sample;      // the text a sample continued (may be ""), and it
  std::string sample_note;                // how it was made, in words
  std::optional<PromptView> prompt_view;  // when a prompt was given
  std::string prompt_problem;             // why there is no prompt view, when a prompt was given
};

struct ModelViewOptions {
  std::string source;
  int64_t step = 0;
  nlohmann::json config;
  std::string prompt;           // empty: no attention maps; the sample starts from a newline
  int64_t sample_tokens = 200;  // 0: no sample
  double temperature = 0.8;
  uint64_t seed = 0;
};

// Runs the model (dropout off, no graph): the prompt's attention maps and token losses, and a
// sample. A prompt the tokenizer cannot encode, or longer than the context, is a
// std::invalid_argument naming the problem.
ModelView model_view(const nn::GPT& model, const data::Tokenizer& tokenizer,
                     const ModelViewOptions& options);

struct ReportInputs {
  std::vector<MetricsRun> runs;
  std::optional<ModelView> model;
  std::string generated_by;  // "attograd report" or "attograd train --report"
  int refresh_seconds = 0;   // > 0: a live page that reloads itself (train --report)
};

std::string render_report(const ReportInputs& inputs);

// `train --report PATH`: after each evaluation and at the end, the page for the run so far
// (its --metrics file when it has one, so a resumed run shows all its sessions; else this
// session's lines), with the attention maps of `prompt` (empty: the first 32 tokens of the
// validation text) in the model as it is, written atomically: a reload never sees half a page.
train::RunObserver live_report(const std::string& path, const std::string& prompt);

// A config value as a person writes it: strings bare, floats short (0.0003), the rest as JSON.
std::string json_text(const nlohmann::json& value);

// 1234567 -> "1,234,567"
std::string thousands(int64_t n);

// A token as a label: spaces, newlines and tabs as visible symbols (␣ ↵ ⇥), anything a
// reader could be fooled by escaped (base::printable).
std::string token_label(const std::string& token);

// The time now, "2024-05-01 12:34 UTC", for a page's "made by" line.
std::string utc_now();

// ---- the page's parts (report_*.cpp), each a <section>
std::string run_colour(size_t run);  // the colour of run i in every chart and legend
std::string run_swatch(size_t run);  // a short line of that colour (SVG), for tables
std::string summary_section(const ReportInputs& in);
std::string charts_section(const std::vector<MetricsRun>& runs, nlohmann::json& data);
// controls.cpp: the charts' controls, hidden until the script shows them; every reported
// point of each run as the page's data ({name, columns: {step: [...], tokens: [...], ...}});
// each run's recorded samples, one at a time under a slider.
std::string chart_controls(const std::vector<MetricsRun>& runs);
nlohmann::json run_tables(const std::vector<MetricsRun>& runs);
std::string samples_section(const std::vector<MetricsRun>& runs);
std::string config_section(const ReportInputs& in);
std::string model_section(const ModelView& model, nlohmann::json& data);
// The embedded script and style (report.js, report.css, built in by CMake).
const std::string& report_script();
const std::string& report_style();

}  // namespace report
