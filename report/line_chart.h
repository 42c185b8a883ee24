#pragma once
// A line chart as inline SVG, static and complete without any script: axes with ticks, the
// axis labels (units included), one path per series, dashed reference lines, and a <title>
// and <desc> that say in words what the lines show. The page's script adds the hover
// readout from data(), which holds exactly the points drawn.
//
//   report::LineChart c;
//   c.id = "loss";  c.title = "Loss";  c.x_label = "step";  c.y_label = "loss (nats/token)";
//   c.series.push_back({"train loss", "#0072b2", false, steps, losses});
//   c.guides.push_back({"corpus floor", 1.02});
//   c.log_option = true;                       // a log-y drawing too, for the page's toggle
//   report::RenderedChart r = report::render_line_chart(c);   // r.svg, r.data (JSON)
//
// A series with more than max_points points is thinned per pixel column to its first,
// lowest, highest and last point (so spikes survive); the values kept are exact.
// Non-finite values are gaps. Every text is escaped (html.h).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace report {

struct ChartSeries {
  std::string name;     // in the legend, the readout and the description
  std::string colour;   // "#0072b2"
  bool strong = false;  // thicker, with point markers (validation curves)
  std::vector<double> x, y;
  int run = -1;         // the run it belongs to, and its column in the page's table of the
  std::string field{};  // run's points (controls.cpp); -1 and "" when it has none
};

struct ChartGuide {  // a horizontal reference line, labelled at its right end
  std::string label;
  double y = 0;
};

struct LineChart {
  std::string id;  // unique in the page: [a-z0-9-]
  std::string title, x_label, y_label;
  std::string y_unit;  // after values in the readout ("nats"), may be empty
  std::vector<ChartSeries> series;
  std::vector<ChartGuide> guides;
  bool log_option = false;  // also drawn on a log scale, class "log" (hidden until chosen)
  size_t max_points = 1200;
};

struct RenderedChart {
  std::string svg;
  nlohmann::json data;  // {id, plot: [left, top, right, bottom], x: [lo, hi], y: {lin, log},
                        //  series: [{name, colour, strong, x: [...], y: [...], run?, field?}],
                        //  guides: [{label, y}], unit, x_label, log_option}
};

RenderedChart render_line_chart(const LineChart& chart);

// The indices of the points a series keeps when thinned to about max_points (all of them
// when it has no more): per bucket of consecutive points, the first, lowest, highest and last.
std::vector<size_t> thin_points(const std::vector<double>& y, size_t max_points);

// Axis ticks: about `count` round values (1, 2 or 5 times a power of ten apart) within
// [lo, hi]; on a log axis, powers of ten and their 2 and 5 multiples (or finer, when the
// range is under a decade). Labels print with the precision the spacing needs.
std::vector<double> linear_ticks(double lo, double hi, int count);
std::vector<double> log_ticks(double lo, double hi);
std::string tick_label(double value, double spacing);

}  // namespace report
