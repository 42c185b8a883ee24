#include "report/line_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "report/html.h"

namespace report {

namespace {

using html::escape;
using html::num;

// The drawing in viewBox units; the page scales it to its column.
constexpr double kWidth = 640, kHeight = 300;
constexpr double kLeft = 76, kRight = 612, kTop = 12, kBottom = 250;

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
};

// value -> pixel along one axis
struct Scale {
  double lo = 0, hi = 1, p0 = 0, p1 = 1;
  bool log = false;
  double at(double v) const {
    const double a = log ? std::log10(v) : v;
    const double l = log ? std::log10(lo) : lo, h = log ? std::log10(hi) : hi;
    return p0 + (a - l) / (h - l) * (p1 - p0);
  }
};

Range value_range(const LineChart& c, bool log) {
  Range r;
  for (const auto& s : c.series)
    for (double v : s.y)
      if (!log || v > 0) r.add(v);
  for (const auto& g : c.guides)
    if (!log || g.y > 0) r.add(g.y);
  return r;
}

// A little room around the values; a flat line gets a band of its own size.
Scale y_scale(const LineChart& c, bool log) {
  Range r = value_range(c, log);
  if (r.empty()) r.lo = log ? 0.1 : 0, r.hi = 1;
  if (log) {
    const double span = std::max(std::log10(r.hi / r.lo), 0.1);
    const double pad = std::pow(10.0, span * 0.05);
    return {r.lo / pad, r.hi * pad, kBottom, kTop, true};
  }
  double span = r.hi - r.lo;
  if (span <= 0) span = std::max(std::fabs(r.hi) * 0.2, 1e-6);
  double lo = r.lo - span * 0.05;
  if (r.lo >= 0 && lo < 0) lo = 0;  // values that are never negative: no axis below zero
  return {lo, r.hi + span * 0.05, kBottom, kTop, false};
}

Scale x_scale(const LineChart& c) {
  Range r;
  for (const auto& s : c.series)
    for (double v : s.x) r.add(v);
  if (r.empty()) r.lo = 0, r.hi = 1;
  if (r.hi <= r.lo) r.hi = r.lo + 1;
  return {r.lo, r.hi, kLeft, kRight, false};
}

std::string fmt4(double v) {
  return std::isfinite(v) ? fmt::format("{:.4g}", v) : "none";
}

}  // namespace

// ------------------------------------------------------------------ ticks
std::vector<double> linear_ticks(double lo, double hi, int count) {
  if (!(hi > lo) || count < 1) return {lo};
  const double rough = (hi - lo) / count;
  const double power = std::pow(10.0, std::floor(std::log10(rough)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (power * m >= rough) {
      step = power * m;
      break;
    }
  // counted, not accumulated: at 1e15 adding 0.2 changes nothing, and a metrics file may
  // hold any value
  std::vector<double> ticks;
  const double first = std::ceil(lo / step);
  for (int k = 0; k < 4 * count + 4; ++k) {
    const double t = (first + k) * step;
    if (!(t <= hi + step * 1e-9)) break;
    if (ticks.empty() || t > ticks.back()) ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

std::vector<double> log_ticks(double lo, double hi) {
  if (!(lo > 0 && hi > lo)) return {lo};
  if (hi / lo < 10) return linear_ticks(lo, hi, 4);
  std::vector<double> all, decades;
  for (int d = static_cast<int>(std::floor(std::log10(lo)));
       d <= static_cast<int>(std::ceil(std::log10(hi))); ++d)
    for (double m : {1.0, 2.0, 5.0}) {
      const double t = m * std::pow(10.0, d);
      if (t < lo || t > hi) continue;
      all.push_back(t);
      if (m == 1.0) decades.push_back(t);
    }
  return all.size() <= 9 || decades.size() < 2 ? all : decades;
}

std::string tick_label(double value, double spacing) {
  if (value == 0) return "0";
  const double a = std::fabs(value);
  spacing = std::fabs(spacing) > 0 ? std::fabs(spacing) : a;
  auto decimals = [](double s) {
    return std::max(0, -static_cast<int>(std::floor(std::log10(s) + 1e-9)));
  };
  if (a >= 1e6 && spacing >= 1e5)
    return fmt::format("{:.{}f}M", value / 1e6, decimals(spacing / 1e6));
  if (a >= 1e4 && spacing >= 1e3)
    return fmt::format("{:.{}f}k", value / 1e3, decimals(spacing / 1e3));
  if (a < 1e-3) {
    const int digits = std::max(
        0, static_cast<int>(std::floor(std::log10(a)) - std::floor(std::log10(spacing) + 1e-9)));
    std::string s = fmt::format("{:.{}e}", value, digits);
    const auto e = s.find('e');  // 3e-04 -> 3e-4
    std::string mantissa = s.substr(0, e), exponent = s.substr(e + 1);
    const int power = std::stoi(exponent);
    return fmt::format("{}e{}", mantissa, power);
  }
  return fmt::format("{:.{}f}", value, decimals(spacing));
}

std::vector<size_t> thin_points(const std::vector<double>& y, size_t max_points) {
  std::vector<size_t> keep;
  const size_t n = y.size();
  if (n <= max_points || max_points < 8) {
    for (size_t i = 0; i < n; ++i) keep.push_back(i);
    return keep;
  }
  const size_t buckets = max_points / 4;
  for (size_t b = 0; b < buckets; ++b) {
    const size_t first = b * n / buckets, last = (b + 1) * n / buckets - 1;
    size_t lo = first, hi = first;
    for (size_t i = first; i <= last; ++i) {
      if (!std::isfinite(y[i])) continue;
      if (!std::isfinite(y[lo]) || y[i] < y[lo]) lo = i;
      if (!std::isfinite(y[hi]) || y[i] > y[hi]) hi = i;
    }
    for (size_t i : {first, std::min(lo, hi), std::max(lo, hi), last})
      if (keep.empty() || keep.back() < i) keep.push_back(i);
  }
  return keep;
}

namespace {

// ------------------------------------------------------------------ drawing
std::string series_path(const ChartSeries& s, const std::vector<size_t>& keep, const Scale& xs,
                        const Scale& ys) {
  std::string d;
  bool pen_down = false;
  for (size_t i : keep) {
    const double v = s.y[i];
    if (!std::isfinite(v) || (ys.log && v <= 0)) {
      pen_down = false;
      continue;
    }
    d += fmt::format("{}{} {}", pen_down ? " " : "M", num(xs.at(s.x[i])), num(ys.at(v)));
    pen_down = true;
  }
  return d;
}

std::string series_markers(const ChartSeries& s, const std::vector<size_t>& keep, const Scale& xs,
                           const Scale& ys) {
  std::string out;
  if (!s.strong || keep.size() > 80) return out;
  for (size_t i : keep)
    if (std::isfinite(s.y[i]) && (!ys.log || s.y[i] > 0))
      out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"2.6\" fill=\"{}\"/>", num(xs.at(s.x[i])),
                         num(ys.at(s.y[i])), escape(s.colour));
  return out;
}

std::string y_grid(const Scale& ys) {
  const std::vector<double> ticks =
      ys.log ? log_ticks(ys.lo, ys.hi) : linear_ticks(ys.lo, ys.hi, 5);
  std::string out;
  for (size_t k = 0; k < ticks.size(); ++k) {
    const double spacing = ys.log ? ticks[k] : (ticks.size() > 1 ? ticks[1] - ticks[0] : ticks[k]);
    const std::string y = num(ys.at(ticks[k]));
    out += fmt::format(
        "<line class=\"grid\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>"
        "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\" dy=\"0.32em\">{}</text>",
        kLeft, kRight, y, y, kLeft - 6, y, escape(tick_label(ticks[k], spacing)));
  }
  return out;
}

std::string x_grid(const Scale& xs) {
  std::vector<double> ticks = linear_ticks(xs.lo, xs.hi, 6);
  std::string out;
  const double spacing = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  for (double t : ticks) {
    const std::string x = num(xs.at(t));
    out += fmt::format(
        "<line class=\"grid\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>"
        "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        x, x, kTop, kBottom, x, kBottom + 16, escape(tick_label(t, spacing)));
  }
  return out;
}

constexpr double kLabelSpan = 170;  // the width a guide's label takes, about

// Whether a guide's label goes at the left end: where the lines pass farther from it under
// the label.
bool label_at_left(const LineChart& c, double y, const Scale& xs, const Scale& ys) {
  double left = INFINITY, right = INFINITY;
  for (const auto& s : c.series)
    for (size_t i = 0; i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i]) || (ys.log && s.y[i] <= 0)) continue;
      const double x = xs.at(s.x[i]), gap = std::fabs(ys.at(s.y[i]) - ys.at(y));
      if (x <= kLeft + kLabelSpan) left = std::min(left, gap);
      if (x >= kRight - kLabelSpan) right = std::min(right, gap);
    }
  return left > right;
}

std::string guide_lines(const LineChart& c, const Scale& xs, const Scale& ys) {
  std::string out;
  for (const auto& g : c.guides) {
    if (!std::isfinite(g.y) || (ys.log && g.y <= 0)) continue;
    const std::string y = num(ys.at(g.y));
    const bool left = label_at_left(c, g.y, xs, ys);
    out += fmt::format(
        "<line class=\"guide\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>"
        "<text class=\"guide-label\" x=\"{}\" y=\"{}\" text-anchor=\"{}\" dy=\"-3\">{} {}</text>",
        kLeft, kRight, y, y, left ? kLeft + 4 : kRight - 4, y, left ? "start" : "end",
        escape(g.label), escape(fmt4(g.y)));
  }
  return out;
}

// Everything that depends on the y scale, as one group the page can show or hide.
std::string scale_group(const LineChart& c, const std::vector<std::vector<size_t>>& kept,
                        const Scale& xs, const Scale& ys) {
  std::string out = fmt::format("<g class=\"scale {}\">", ys.log ? "log" : "lin");
  out += y_grid(ys) + guide_lines(c, xs, ys);
  for (size_t k = 0; k < c.series.size(); ++k) {
    const ChartSeries& s = c.series[k];
    const std::string d = series_path(s, kept[k], xs, ys);
    if (d.empty()) continue;  // nothing drawable (on a log scale: nothing above zero)
    out += fmt::format("<path class=\"line{}\" stroke=\"{}\" d=\"{}\"><title>{}</title></path>",
                       s.strong ? " strong" : "", escape(s.colour), series_path(s, kept[k], xs, ys),
                       escape(s.name));
    out += series_markers(s, kept[k], xs, ys);
  }
  return out + "</g>";
}

std::string axes(const LineChart& c) {
  return fmt::format(
      "<g class=\"axes\"><path class=\"axis\" d=\"M{} {}V{}H{}\"/>"
      "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>"
      "<text class=\"axis-label\" transform=\"translate(16 {}) rotate(-90)\" "
      "text-anchor=\"middle\">{}</text></g>",
      kLeft, kTop, kBottom, kRight, (kLeft + kRight) / 2, kHeight - 10, escape(c.x_label),
      (kTop + kBottom) / 2, escape(c.y_label));
}

// The chart in words, for its <desc>: where each line starts, ends and is lowest.
std::string describe(const LineChart& c) {
  std::string out = fmt::format("{} against {}.", c.y_label, c.x_label);
  for (const auto& s : c.series) {
    size_t first = s.y.size(), last = 0, low = s.y.size();
    for (size_t i = 0; i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      first = std::min(first, i), last = i;
      if (low == s.y.size() || s.y[i] < s.y[low]) low = i;
    }
    if (low == s.y.size()) continue;
    out += fmt::format(" {}: {} at {} {} to {} at {} {}, lowest {} at {} {}.", s.name,
                       fmt4(s.y[first]), c.x_label, fmt4(s.x[first]), fmt4(s.y[last]), c.x_label,
                       fmt4(s.x[last]), fmt4(s.y[low]), c.x_label, fmt4(s.x[low]));
  }
  for (const auto& g : c.guides) out += fmt::format(" Reference line: {} {}.", g.label, fmt4(g.y));
  return out;
}

nlohmann::json chart_data(const LineChart& c, const std::vector<std::vector<size_t>>& kept,
                          const Scale& xs, const Scale& lin, const Scale& log) {
  nlohmann::json series = nlohmann::json::array();
  for (size_t k = 0; k < c.series.size(); ++k) {
    nlohmann::json x = nlohmann::json::array(), y = nlohmann::json::array();
    for (size_t i : kept[k]) {
      x.push_back(c.series[k].x[i]);
      y.push_back(std::isfinite(c.series[k].y[i]) ? nlohmann::json(c.series[k].y[i]) : nullptr);
    }
    const ChartSeries& s = c.series[k];
    series.push_back(
        {{"name", s.name}, {"colour", s.colour}, {"strong", s.strong}, {"x", x}, {"y", y}});
    if (s.run >= 0) series.back().update({{"run", s.run}, {"field", s.field}});
  }
  nlohmann::json guides = nlohmann::json::array();
  for (const auto& g : c.guides)
    if (std::isfinite(g.y)) guides.push_back({{"label", g.label}, {"y", g.y}});
  nlohmann::json j = {{"id", c.id},
                      {"plot", {kLeft, kTop, kRight, kBottom}},
                      {"x", {xs.lo, xs.hi}},
                      {"y", {{"lin", {lin.lo, lin.hi}}}},
                      {"series", series},
                      {"unit", c.y_unit},
                      {"x_label", c.x_label},
                      {"guides", guides},
                      {"log_option", c.log_option}};
  if (c.log_option) j["y"]["log"] = {log.lo, log.hi};
  return j;
}

}  // namespace

RenderedChart render_line_chart(const LineChart& c) {
  std::vector<std::vector<size_t>> kept;
  for (const auto& s : c.series) kept.push_back(thin_points(s.y, c.max_points));
  const Scale xs = x_scale(c), lin = y_scale(c, false), log = y_scale(c, true);
  const std::string id = "chart-" + c.id;
  RenderedChart r;
  r.svg = fmt::format(
      "<svg class=\"chart\" id=\"{0}\" viewBox=\"0 0 {1} {2}\" role=\"img\" tabindex=\"0\" "
      "aria-labelledby=\"{0}-t {0}-d\"><title id=\"{0}-t\">{3}</title><desc id=\"{0}-d\">{4}"
      "</desc><g class=\"xgrid\">{5}</g>",
      id, kWidth, kHeight, escape(c.title), escape(describe(c)), x_grid(xs));
  r.svg += scale_group(c, kept, xs, lin);
  if (c.log_option) r.svg += scale_group(c, kept, xs, log);
  r.svg += axes(c) + "<g class=\"cursor\"></g></svg>";
  r.data = chart_data(c, kept, xs, lin, log);
  return r;
}

}  // namespace report
