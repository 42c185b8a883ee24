// The report page: its head (the security policy, the style), the summary and configuration
// tables, and the data and script the other sections' readouts use.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_set>

#include "report/html.h"
#include "report/report.h"
#include "train/memory_plan.h"
#include "train/reporter.h"

namespace report {

namespace {

using html::escape;
using Json = nlohmann::json;

// A field of a run record (or of an object in it), or null.
Json field(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? Json() : *it;
}

std::string number_or_dash(double v, const char* format = "{:.4f}") {
  return std::isfinite(v) ? fmt::format(fmt::runtime(format), v) : "\u2013";
}

struct RunFigures {
  double last_loss = NAN, best_val = NAN, last_bpb = NAN, median_speed = NAN;
  int64_t last_step = -1, best_val_step = -1;
};

RunFigures figures_of(const MetricsRun& r) {
  RunFigures f;
  std::vector<double> speeds;
  for (const auto& p : r.points) {
    f.last_step = p.step;
    if (std::isfinite(p.loss)) f.last_loss = p.loss;
    if (std::isfinite(p.val_bits_per_byte)) f.last_bpb = p.val_bits_per_byte;
    if (std::isfinite(p.tokens_per_s)) speeds.push_back(p.tokens_per_s);
    if (std::isfinite(p.val_loss) && !(p.val_loss >= f.best_val))
      f.best_val = p.val_loss, f.best_val_step = p.step;
  }
  if (!speeds.empty()) {
    std::nth_element(speeds.begin(), speeds.begin() + speeds.size() / 2, speeds.end());
    f.median_speed = speeds[speeds.size() / 2];
  }
  return f;
}

std::string summary_row(const MetricsRun& r, size_t i) {
  const RunFigures f = figures_of(r);
  const Json floor = field(field(r.start, "baselines"), "corpus_floor");
  const Json params = field(r.start, "parameters");
  const Json steps = field(field(r.start, "config"), "steps");
  // a run named by its record (train --name) says which file it came from
  const std::string file =
      r.name == r.path ? "" : "<div class=\"run-file\">" + escape(r.path) + "</div>";
  return fmt::format(
      "<tr><th scope=\"row\">{}{}{}</th><td>{}{}</td><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td>"
      "<td>{}</td><td>{}</td><td>{}</td></tr>",
      run_swatch(i), escape(r.name), file,
      f.last_step >= 0 ? std::to_string(f.last_step) : "\u2013",
      steps.is_number_integer() ? " of " + escape(json_text(steps)) : "",
      number_or_dash(f.last_loss), number_or_dash(f.best_val),
      f.best_val_step >= 0 ? fmt::format(" (step {})", f.best_val_step) : "",
      number_or_dash(f.last_bpb, "{:.3f}"),
      floor.is_number() && std::isfinite(f.best_val)
          ? fmt::format("{:+.4f}", f.best_val - floor.get<double>())
          : "\u2013",
      params.is_number_integer() ? thousands(params.get<int64_t>()) : "\u2013",
      r.sessions ? escape(train::format_duration(r.wall_seconds)) +
                       (r.sessions > 1 ? fmt::format(" ({} sessions)", r.sessions) : "")
                 : "\u2013",
      number_or_dash(f.median_speed, "{:.0f}"));
}

std::string notes_of(const std::vector<MetricsRun>& runs) {
  std::string out;
  for (const auto& r : runs)
    for (const auto& note : r.notes) out += "<li>" + escape(r.name) + ": " + escape(note) + "</li>";
  return out.empty() ? "" : "<ul class=\"notes\">" + out + "</ul>";
}

}  // namespace

std::string json_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{:g}", v.get<double>());
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string thousands(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

std::string summary_section(const ReportInputs& in) {
  if (in.runs.empty()) return "";
  std::string rows;
  for (size_t i = 0; i < in.runs.size(); ++i) rows += summary_row(in.runs[i], i);
  return "<section id=\"summary\" aria-labelledby=\"summary-h\"><h2 id=\"summary-h\">Summary</h2>"
         "<div class=\"scroll\"><table class=\"data\"><thead><tr><th scope=\"col\">run</th>"
         "<th scope=\"col\">step</th><th scope=\"col\">last train loss</th><th scope=\"col\">best "
         "validation loss</th><th scope=\"col\">bits per byte</th><th scope=\"col\">above the "
         "corpus floor</th><th scope=\"col\">parameters</th><th scope=\"col\">wall time</th><th "
         "scope=\"col\">tokens/s (median)</th></tr></thead><tbody>" +
         rows + "</tbody></table></div>" + notes_of(in.runs) + "</section>";
}

namespace {

// Columns: each run's record, and the model's config when there is one. They point into
// the inputs: a config from a file may be large, and is never copied.
struct RunColumn {
  std::string name;
  const Json *config, *record;
};

const Json kNoJson;

const Json& config_in(const Json& record) {
  if (!record.is_object()) return kNoJson;
  const auto it = record.find("config");
  return it == record.end() ? kNoJson : *it;
}

std::vector<RunColumn> columns_of(const ReportInputs& in) {
  std::vector<RunColumn> cols;
  for (const auto& r : in.runs) cols.push_back({r.name, &config_in(r.start), &r.start});
  if (in.model) cols.push_back({"model: " + in.model->source, &in.model->config, &kNoJson});
  return cols;
}

std::string table(const std::vector<RunColumn>& cols, const std::vector<std::string>& keys,
                  const std::function<Json(const RunColumn&, const std::string&)>& get,
                  const std::function<std::string(const std::string&, const Json&)>& show) {
  std::string head, rows;
  for (const auto& c : cols) head += "<th scope=\"col\">" + escape(c.name) + "</th>";
  for (const auto& key : keys) {
    std::string cells;
    bool differs = false;
    for (const auto& c : cols) {
      const Json v = get(c, key);
      differs = differs || v != get(cols[0], key);
      cells += "<td>" + (v.is_null() ? std::string("\u2013") : escape(show(key, v))) + "</td>";
    }
    rows +=
        fmt::format("<tr{}><th scope=\"row\">{}{}</th>{}</tr>", differs ? " class=\"diff\"" : "",
                    escape(key), differs ? " <span class=\"differs\">(differs)</span>" : "", cells);
  }
  return "<div class=\"scroll\"><table class=\"data config\"><thead><tr><th "
         "scope=\"col\">key</th>" +
         head + "</tr></thead><tbody>" + rows + "</tbody></table></div>";
}

// Every column's keys, each once, in the order first seen (a set: a config from a file may
// hold any number of keys, and the page is built in time linear in them).
std::vector<std::string> config_keys(const std::vector<RunColumn>& cols) {
  std::vector<std::string> keys;
  std::unordered_set<std::string> seen;
  for (const auto& c : cols)
    if (c.config->is_object())
      for (const auto& [key, value] : c.config->items())
        if (seen.insert(key).second) keys.push_back(key);
  return keys;
}

std::string run_value(const std::string& key, const Json& v) {
  if (key == "data" && v == "") return "(the built-in corpus)";
  if (v.is_number_integer() && key != "first_step" && key != "threads" && key != "processes")
    return thousands(v.get<int64_t>());
  return json_text(v);
}

std::string bytes_or_value(const std::string& key, const Json& v) {
  if (key == "gradient_sets" || !v.is_number_integer()) return json_text(v);
  return v.get<int64_t>() > 0 ? train::format_bytes(v.get<int64_t>()) : "unknown";
}

}  // namespace

std::string config_section(const ReportInputs& in) {
  const std::vector<RunColumn> cols = columns_of(in);
  const std::vector<std::string> keys = config_keys(cols);
  if (keys.empty()) return "";
  auto plain = [](const std::string& key, const Json& v) {
    return key == "data" && v == "" ? "(the built-in corpus)" : json_text(v);
  };
  std::string out =
      "<section id=\"config\" aria-labelledby=\"config-h\"><h2 id=\"config-h\">Configuration"
      "</h2>" +
      table(
          cols, keys,
          [](const RunColumn& c, const std::string& k) { return field(*c.config, k.c_str()); },
          plain);
  std::vector<RunColumn> runs(cols.begin(), cols.begin() + static_cast<long>(in.runs.size()));
  if (!runs.empty()) {
    out += "<h3>Run</h3>" +
           table(
               runs,
               {"data", "train_tokens", "val_tokens", "parameters", "processes", "threads",
                "started_at", "first_step"},
               [](const RunColumn& c, const std::string& k) { return field(*c.record, k.c_str()); },
               run_value);
    out +=
        "<h3>Memory plan</h3><p class=\"note\">What each run planned to hold in memory "
        "before its first step.</p>" +
        table(
            runs,
            {"parameters", "gradients", "gradient_sets", "optimizer", "activations", "data",
             "checkpoint", "runtime", "total", "available"},
            [](const RunColumn& c, const std::string& k) {
              return field(field(*c.record, "memory_plan"), k.c_str());
            },
            bytes_or_value);
  }
  return out + "</section>";
}

namespace {

std::string page_header(const ReportInputs& in) {
  std::string what;
  for (const auto& r : in.runs) what += (what.empty() ? "" : ", ") + escape(r.name);
  if (in.model)
    what += (what.empty() ? "" : "; ") +
            fmt::format("model {} at step {}", escape(in.model->source), in.model->step);
  std::string nav = "<a href=\"#summary\">Summary</a><a href=\"#charts\">Training</a>";
  if (in.runs.empty()) nav.clear();
  if (std::any_of(in.runs.begin(), in.runs.end(),
                  [](const MetricsRun& r) { return !r.samples.empty(); }))
    nav += "<a href=\"#samples\">Samples</a>";
  if (in.model) nav += "<a href=\"#model\">Model</a>";
  if (in.model && in.model->prompt_view) nav += "<a href=\"#attention\">Attention</a>";
  nav += "<a href=\"#config\">Configuration</a>";
  return fmt::format(
      "<header><h1>attograd training report</h1><p class=\"subtitle\">{}</p><p class=\"note\">{}{}"
      "</p><nav aria-label=\"sections\">{}</nav></header>",
      what, escape(in.generated_by),
      in.refresh_seconds > 0
          ? fmt::format(" \u00b7 live: this page reloads itself every {} s while the run goes on",
                        in.refresh_seconds)
          : "",
      nav);
}

std::string page_head(const ReportInputs& in) {
  std::string title = "attograd report";
  if (!in.runs.empty()) title += ": " + in.runs[0].name;
  if (in.runs.size() > 1) title += fmt::format(" and {} more", in.runs.size() - 1);
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src "
      "'{}'; style-src '{}'; img-src 'none'; base-uri 'none'; form-action 'none'\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">{}"
      "<title>{}</title><style>{}</style><script>{}</script></head>",
      html::csp_hash(report_script()), html::csp_hash(report_style()),
      in.refresh_seconds > 0
          ? fmt::format("<meta http-equiv=\"refresh\" content=\"{}\">", in.refresh_seconds)
          : "",
      escape(title), report_style(), report_script());
}

}  // namespace

std::string render_report(const ReportInputs& in) {
  Json data = {{"charts", Json::array()}, {"maps", Json::array()}, {"runs", Json::array()}};
  std::string body = page_header(in) + "<main>" + summary_section(in) +
                     charts_section(in.runs, data) + samples_section(in.runs);
  if (in.runs.empty())
    body += "<p class=\"note\">No <code>--metrics</code> file was given: no training curves.</p>";
  if (in.model) body += model_section(*in.model, data);
  body += config_section(in) + "</main>";
  return page_head(in) + "<body>" + body +
         "<div id=\"page-errors\" role=\"alert\" hidden><h2>Errors on this page</h2><ul></ul></div>"
         "<pre id=\"selftest\" hidden></pre><script type=\"application/json\" id=\"report-data\">" +
         html::script_json(data) + "</script></body></html>\n";
}

}  // namespace report
