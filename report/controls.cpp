// The charts' controls (smoothing, the x axis, zoom, the CSV download), the table of every
// reported point they work from, and each run's samples. The controls are hidden until the
// page's script shows them: the page without it is the static charts, complete.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/utf8.h"
#include "report/html.h"
#include "report/report.h"

namespace report {

namespace {

using html::escape;
using Json = nlohmann::json;

struct Column {
  const char* name;  // in the page's data and the CSV's header
  double MetricsPoint::*field;
};

const Column kColumns[] = {
    {"tokens", &MetricsPoint::tokens},
    {"wall_s", &MetricsPoint::wall_s},
    {"loss", &MetricsPoint::loss},
    {"val_loss", &MetricsPoint::val_loss},
    {"val_bits_per_byte", &MetricsPoint::val_bits_per_byte},
    {"lr", &MetricsPoint::lr},
    {"grad_norm", &MetricsPoint::grad_norm},
    {"tokens_per_s", &MetricsPoint::tokens_per_s},
    {"elapsed_s", &MetricsPoint::elapsed_s},
};

// A run's points in the page's table: every one up to kMaxTablePoints (about 2.6 MB of
// page); past that an even stride of them, the last, and every evaluation (while those are
// at most half as many), so a run logged at every step of millions makes a page of
// megabytes, not hundreds. The metrics file keeps every point.
constexpr size_t kMaxTablePoints = 20000;

std::vector<size_t> table_points(const MetricsRun& r) {
  const size_t n = r.points.size();
  std::vector<size_t> keep;
  const size_t stride = (n + kMaxTablePoints - 1) / kMaxTablePoints;
  const bool evaluations = static_cast<size_t>(std::count_if(r.points.begin(), r.points.end(),
                                                             [](const MetricsPoint& p) {
                                                               return std::isfinite(p.val_loss);
                                                             })) <= kMaxTablePoints / 2;
  for (size_t i = 0; i < n; ++i)
    if (i % std::max<size_t>(stride, 1) == 0 || i + 1 == n ||
        (evaluations && std::isfinite(r.points[i].val_loss)))
      keep.push_back(i);
  return keep;
}

bool any_run_has(const std::vector<MetricsRun>& runs, double MetricsPoint::*field) {
  return std::any_of(runs.begin(), runs.end(), [&](const MetricsRun& r) { return r.has(field); });
}

// An x-axis choice; unavailable (disabled, with the reason) when no run has its values.
std::string axis_choice(const char* value, const char* label, bool available, const char* reason) {
  return fmt::format("<label{}><input type=\"radio\" name=\"x-axis\" value=\"{}\"{}{}> {}</label>",
                     available ? "" : fmt::format(" title=\"{}\"", reason), value,
                     value == std::string("step") ? " checked" : "", available ? "" : " disabled",
                     label);
}

}  // namespace

Json run_tables(const std::vector<MetricsRun>& runs) {
  Json tables = Json::array();
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::vector<size_t> kept = table_points(runs[i]);
    const auto& points = runs[i].points;
    Json steps = Json::array(), columns = Json::object();
    for (size_t k : kept) steps.push_back(points[k].step);
    for (const Column& c : kColumns) {
      Json values = Json::array();
      for (size_t k : kept)
        values.push_back(std::isfinite(points[k].*c.field) ? Json(points[k].*c.field) : Json());
      columns[c.name] = std::move(values);
    }
    columns["step"] = std::move(steps);
    tables.push_back({{"name", base::printable(runs[i].name)}, {"columns", std::move(columns)}});
  }
  return tables;
}

std::string chart_controls(const std::vector<MetricsRun>& runs) {
  const bool tokens = any_run_has(runs, &MetricsPoint::tokens);
  const bool wall = any_run_has(runs, &MetricsPoint::wall_s);
  std::string thinned;
  for (const MetricsRun& r : runs)
    if (const size_t kept = table_points(r).size(); kept < r.points.size())
      thinned += fmt::format("{}{}: {} of its {} points", thinned.empty() ? "" : "; ",
                             escape(r.name), kept, r.points.size());
  if (!thinned.empty())
    thinned =
        "<p class=\"note\">The controls and the CSV work from every evaluation and an "
        "even share of the other points (" +
        thinned + "); the metrics file holds them all.</p>";
  return thinned +
         "<div class=\"chart-controls\" id=\"chart-controls\" role=\"group\" "
         "aria-label=\"chart controls\" hidden><label class=\"control\" for=\"smoothing\">"
         "smoothing</label> <input type=\"range\" id=\"smoothing\" min=\"0\" max=\"0.99\" "
         "step=\"0.01\" value=\"0\"> <output id=\"smoothing-value\" for=\"smoothing\">0</output>"
         "<fieldset class=\"control\"><legend>x axis</legend>" +
         axis_choice("step", "step", true, "") +
         axis_choice("tokens", "tokens", tokens, "no run record gives the tokens per step") +
         axis_choice("wall", "wall time", wall, "no point records its elapsed time") +
         "</fieldset><fieldset class=\"control\" id=\"zoom\"><legend>zoom, in <span "
         "id=\"zoom-unit\">steps</span></legend><label>from <input type=\"number\" "
         "id=\"zoom-from\" step=\"any\"></label> <label>to <input type=\"number\" id=\"zoom-to\" "
         "step=\"any\"></label> <button type=\"button\" id=\"zoom-in\">zoom in</button> <button "
         "type=\"button\" id=\"zoom-out\">zoom out</button> <button type=\"button\" "
         "id=\"zoom-reset\">reset zoom</button></fieldset><a id=\"csv-download\" "
         "download=\"metrics.csv\" href=\"#charts\">download the metrics (CSV)</a></div>";
}

std::string samples_section(const std::vector<MetricsRun>& runs) {
  std::string parts;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& samples = runs[i].samples;
    if (samples.empty()) continue;
    std::string items;
    for (const MetricsSample& s : samples)
      items += fmt::format(
          "<li data-step=\"{0}\"><p class=\"sample-step\">{1}</p><pre class=\"sample\">{2}"
          "</pre></li>",
          s.step, s.step >= 0 ? fmt::format("step {}", s.step) : "step unknown",
          escape(s.text, true));
    parts += fmt::format(
        "<div class=\"sample-run\"><h3 id=\"samples-{2}-h\">{0}{1}</h3><div "
        "class=\"sample-control\" hidden><label id=\"samples-{2}-l\" for=\"samples-{2}\">"
        "evaluation</label> <input type=\"range\" id=\"samples-{2}\" "
        "aria-labelledby=\"samples-{2}-l "
        "samples-{2}-h\" min=\"0\" max=\"{3}\" step=\"1\" value=\"{3}\"> <output "
        "for=\"samples-{2}\" "
        "aria-live=\"polite\"></output></div><ol class=\"samples\" id=\"samples-{2}-list\">{4}"
        "</ol></div>",
        run_swatch(i), escape(runs[i].name), i, samples.size() - 1, items);
  }
  if (parts.empty()) return "";
  return "<section id=\"samples\" aria-labelledby=\"samples-h\"><h2 id=\"samples-h\">Samples"
         "</h2><p class=\"note\">The text each run's model wrote where it recorded a sample, "
         "oldest first; choose one with the slider.</p>" +
         parts + "</section>";
}

}  // namespace report
