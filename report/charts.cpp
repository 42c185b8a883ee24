// The report's charts: one per quantity train reports, every run overlaid in its colour.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/html.h"
#include "report/line_chart.h"
#include "report/report.h"

namespace report {

namespace {

using html::escape;
using Field = double MetricsPoint::*;

// Config keys that name the model or the optimisation, in the order a reader looks for them.
const std::vector<std::string> kMainKeys{
    "d_model", "n_layers", "n_heads",   "context_length", "lr",           "batch_size",
    "steps",   "dropout",  "tokenizer", "vocab_size",     "weight_decay", "seed"};

const nlohmann::json* config_of(const MetricsRun& r) {
  if (!r.start.is_object()) return nullptr;
  const auto it = r.start.find("config");
  return it != r.start.end() && it->is_object() ? &*it : nullptr;
}

// What tells run i apart: the config values that are not the same in every run (or, for a
// single run, its main settings).
std::string config_difference(const std::vector<MetricsRun>& runs, size_t i) {
  const nlohmann::json* mine = config_of(runs[i]);
  if (!mine) return "config unknown (the file has no run record)";
  std::vector<std::string> parts;
  for (const auto& [key, value] : mine->items()) {
    bool differs = runs.size() == 1 && std::count(kMainKeys.begin(), kMainKeys.end(), key);
    for (const auto& other : runs) {
      const nlohmann::json* theirs = config_of(other);
      differs = differs || (runs.size() > 1 &&
                            (!theirs || !theirs->contains(key) || theirs->at(key) != value));
    }
    if (differs) parts.push_back(key + "=" + json_text(value));
  }
  if (parts.empty()) return "the same config";
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " \u00b7 ") + p;
  return out;
}

std::string prefix(const std::vector<MetricsRun>& runs, size_t i) {
  return runs.size() > 1 ? runs[i].name + ": " : "";
}

// Run i's column `field` (named `column` in the page's table of points, controls.cpp).
ChartSeries series_of(const std::vector<MetricsRun>& runs, size_t i, Field field,
                      const char* column, const std::string& name, bool strong) {
  const MetricsRun& r = runs[i];
  ChartSeries s{prefix(runs, i) + name, run_colour(i), strong, {}, {}, static_cast<int>(i), column};
  for (const auto& p : r.points)
    if (std::isfinite(p.*field)) {
      s.x.push_back(static_cast<double>(p.step));
      s.y.push_back(p.*field);
    }
  return s;
}

// --grad-clip of a run, NaN when unknown.
double grad_clip_of(const MetricsRun& r) {
  const nlohmann::json* cfg = config_of(r);
  if (!cfg || !cfg->contains("grad_clip") || !(*cfg)["grad_clip"].is_number()) return NAN;
  return (*cfg)["grad_clip"].get<double>();
}

double baseline_of(const MetricsRun& r, const char* key) {
  if (!r.start.is_object()) return NAN;
  const auto b = r.start.find("baselines");
  if (b == r.start.end() || !b->is_object()) return NAN;
  const auto v = b->find(key);
  return v != b->end() && v->is_number() ? v->get<double>() : NAN;
}

// The built-in corpus's reference losses: one line when every run has the same value, else
// one per run.
std::vector<ChartGuide> baselines(const std::vector<MetricsRun>& runs, double scale) {
  std::vector<ChartGuide> guides;
  for (const char* key : {"unigram", "bigram", "corpus_floor"}) {
    const std::string name = key == std::string("corpus_floor") ? "corpus floor (ideal)" : key;
    const double first = baseline_of(runs[0], key);
    const bool shared = std::all_of(runs.begin(), runs.end(), [&](const MetricsRun& r) {
      return baseline_of(r, key) == first;  // false for NaN
    });
    for (size_t i = 0; i < (shared ? 1 : runs.size()); ++i) {
      const double v = baseline_of(runs[i], key);
      if (std::isfinite(v)) guides.push_back({(shared ? "" : prefix(runs, i)) + name, v * scale});
    }
  }
  return guides;
}

LineChart chart(const std::string& id, const std::string& title, const std::string& y_label,
                const std::string& unit) {
  LineChart c;
  c.id = id, c.title = title, c.x_label = "step", c.y_label = y_label, c.y_unit = unit;
  return c;
}

std::vector<LineChart> build_charts(const std::vector<MetricsRun>& runs) {
  LineChart loss = chart("loss", "Loss", "loss (nats per token)", "nats");
  LineChart bpb = chart("bpb", "Validation bits per byte", "bits per byte of text", "bits/byte");
  LineChart lr = chart("lr", "Learning rate", "learning rate", "");
  LineChart norm = chart("grad-norm", "Gradient norm", "gradient norm (before clipping)", "");
  LineChart speed = chart("speed", "Throughput", "tokens per second", "tokens/s");
  loss.log_option = bpb.log_option = norm.log_option = true;
  std::vector<ChartSeries> validation;  // drawn over every training curve
  for (size_t i = 0; i < runs.size(); ++i) {
    const MetricsRun& r = runs[i];
    loss.series.push_back(series_of(runs, i, &MetricsPoint::loss, "loss", "train loss", false));
    if (r.has(&MetricsPoint::val_loss))
      validation.push_back(
          series_of(runs, i, &MetricsPoint::val_loss, "val_loss", "validation loss", true));
    if (r.has(&MetricsPoint::val_bits_per_byte))
      bpb.series.push_back(series_of(runs, i, &MetricsPoint::val_bits_per_byte, "val_bits_per_byte",
                                     "validation", true));
    lr.series.push_back(series_of(runs, i, &MetricsPoint::lr, "lr", "learning rate", false));
    norm.series.push_back(
        series_of(runs, i, &MetricsPoint::grad_norm, "grad_norm", "gradient norm", false));
    speed.series.push_back(
        series_of(runs, i, &MetricsPoint::tokens_per_s, "tokens_per_s", "throughput", false));
    const double clip = grad_clip_of(r);
    const bool seen = std::any_of(norm.guides.begin(), norm.guides.end(),
                                  [&](const ChartGuide& g) { return g.y == clip; });
    if (clip > 0 && !seen) norm.guides.push_back({"clipped above", clip});
  }
  loss.series.insert(loss.series.end(), validation.begin(), validation.end());
  loss.guides = baselines(runs, 1.0);
  bpb.guides =
      baselines(runs, 1.0 / std::log(2.0));  // the built-in corpus is ASCII: a char is a byte
  std::vector<LineChart> charts{loss};
  if (!bpb.series.empty()) charts.push_back(bpb);
  for (auto* c : {&lr, &norm, &speed}) charts.push_back(*c);
  return charts;
}

std::string legend(const std::vector<MetricsRun>& runs) {
  std::string items;
  for (size_t i = 0; i < runs.size(); ++i)
    items += fmt::format("<li>{}<strong>{}</strong> <span class=\"config-diff\">{}</span></li>",
                         run_swatch(i), escape(runs[i].name), escape(config_difference(runs, i)));
  return "<ul class=\"run-legend\" aria-label=\"runs\">" + items +
         "</ul><p class=\"note\">Thin lines: each reported step; thick lines with dots: "
         "validation. Dashed: reference lines. Hover, or focus a chart and use the arrow keys, "
         "for the exact values; drag across a chart to zoom.</p>";
}

std::string figure(const LineChart& c, const RenderedChart& r) {
  return fmt::format(
      "<figure class=\"chart-figure\" id=\"fig-{0}\"><figcaption><span class=\"chart-title\">{1}"
      "</span>{2}</figcaption>{3}<output class=\"readout\" aria-live=\"polite\"></output></figure>",
      c.id, escape(c.title),
      c.log_option
          ? fmt::format("<label class=\"log-toggle\"><input type=\"checkbox\" data-chart=\"{}\"> "
                        "log scale</label>",
                        c.id)
          : "",
      r.svg);
}

}  // namespace

std::string run_swatch(size_t i) {
  return fmt::format(
      "<svg class=\"swatch\" viewBox=\"0 0 28 10\" aria-hidden=\"true\"><line x1=\"0\" y1=\"5\" "
      "x2=\"28\" y2=\"5\" stroke=\"{}\" stroke-width=\"3\"/></svg>",
      run_colour(i));
}

std::string run_colour(size_t i) {
  // Okabe and Ito's palette, told apart by the colour-blind
  static const char* kColours[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
                                   "#e69f00", "#56b4e9", "#000000", "#999933"};
  return kColours[i % (sizeof kColours / sizeof *kColours)];
}

std::string charts_section(const std::vector<MetricsRun>& runs, nlohmann::json& data) {
  if (runs.empty()) return "";
  std::string figures;
  for (LineChart c : build_charts(runs)) {
    c.series.erase(std::remove_if(c.series.begin(), c.series.end(),
                                  [](const ChartSeries& s) { return s.x.empty(); }),
                   c.series.end());
    if (c.series.empty()) continue;  // nothing reported yet
    RenderedChart r = render_line_chart(c);
    for (auto& s : r.data["series"]) s.erase("x"), s.erase("y");  // the page has every point
    data["charts"].push_back(r.data);
    figures += figure(c, r);
  }
  if (figures.empty()) figures = "<p class=\"note\">No step has been reported yet.</p>";
  data["runs"] = run_tables(runs);
  return "<section id=\"charts\" aria-labelledby=\"charts-h\"><h2 id=\"charts-h\">Training</h2>" +
         legend(runs) + chart_controls(runs) + "<div class=\"charts\">" + figures +
         "</div></section>";
}

}  // namespace report
