#include "report/heat_map.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include "base/utf8.h"
#include "report/html.h"

namespace report {

namespace {

using html::escape;
using html::num;

constexpr int kLevels = 32;  // colour steps of the scale
constexpr double kCell = 12;
constexpr size_t kMaxLabelChars = 10;
constexpr double kCharWidth = 6.2;  // of the 10px label font, about
constexpr const char* kLabelFont = "ui-monospace, DejaVu Sans Mono, monospace";

// matplotlib's viridis at 0, 1/8, ..., 1: dark purple to yellow, readable in grey and by
// the colour-blind
constexpr std::array<std::array<int, 3>, 9> kViridis{{{68, 1, 84},
                                                      {72, 40, 120},
                                                      {62, 73, 137},
                                                      {49, 104, 142},
                                                      {38, 130, 142},
                                                      {31, 158, 137},
                                                      {53, 183, 121},
                                                      {110, 206, 88},
                                                      {253, 231, 37}}};

int level_of(double weight) {
  const double w = std::isfinite(weight) ? std::clamp(weight, 0.0, 1.0) : 0.0;
  return static_cast<int>(std::lround(w * (kLevels - 1)));
}

std::string level_colour(int level) {
  return weight_colour(level / double(kLevels - 1));
}

// A label cut to kMaxLabelChars characters (an ellipsis marks the cut).
std::string short_label(const std::string& label) {
  std::vector<uint32_t> cps;
  try {
    cps = base::utf8_decode(label);
  } catch (const std::exception&) {
    return label.substr(0, kMaxLabelChars);  // escape() shows the bad bytes
  }
  if (cps.size() <= kMaxLabelChars) return label;
  std::string out;
  for (size_t i = 0; i + 1 < kMaxLabelChars; ++i) base::utf8_append(out, cps[i]);
  return out + "\u2026";
}

size_t label_chars(const std::string& label) {
  try {
    return base::utf8_decode(label).size();
  } catch (const std::exception&) {
    return label.size();
  }
}

struct Geometry {
  size_t n = 0;
  double left = 0, top = 0, width = 0, height = 0;
  bool rotated = false;  // column labels written upwards (labels longer than 2 characters)
};

Geometry geometry_of(const HeatMap& m) {
  Geometry g;
  g.n = m.labels.size();
  size_t longest = 1;
  for (const auto& l : m.labels) longest = std::max(longest, label_chars(short_label(l)));
  g.rotated = longest > 2;
  g.left = 20 + 6 + kCharWidth * static_cast<double>(longest);
  g.top = 18 + (g.rotated ? 6 + kCharWidth * static_cast<double>(longest) : 14);
  g.width = g.left + kCell * static_cast<double>(g.n) + 8;
  g.height = g.top + kCell * static_cast<double>(g.n) + 8;
  return g;
}

// Rows at the left, columns above (written upwards when long); each group positioned by a
// transform so that a label is a bare <text> (a 64-token map has 128 of them).
std::string token_labels(const HeatMap& m, const Geometry& g) {
  std::string rows, columns;
  for (size_t i = 0; i < g.n; ++i) {
    const std::string text = escape(short_label(m.labels[i]));
    const std::string mid = num(kCell * (static_cast<double>(i) + 0.5));
    rows += fmt::format("<text y=\"{}\">{}</text>", mid, text);
    columns += fmt::format("<text {}=\"{}\">{}</text>", g.rotated ? "y" : "x", mid, text);
  }
  return fmt::format(
      "<g class=\"tokens\" font-size=\"10\" font-family=\"{}\" fill=\"#1f2328\">"
      "<g transform=\"translate({} {})\" text-anchor=\"end\" dominant-baseline=\"central\">{}</g>"
      "<g transform=\"translate({} {}){}\" {}>{}</g></g>"
      "<g class=\"axes\" font-size=\"11\" fill=\"#1f2328\" text-anchor=\"middle\">"
      "<text class=\"axis-label\" x=\"{}\" y=\"12\">keys</text>"
      "<text class=\"axis-label\" transform=\"translate(12 {}) rotate(-90)\">queries</text></g>",
      kLabelFont, num(g.left - 4), num(g.top), rows, num(g.left), num(g.top - 4),
      g.rotated ? " rotate(-90)" : "",
      g.rotated ? "dominant-baseline=\"central\"" : "text-anchor=\"middle\"", columns,
      num(g.left + kCell * g.n / 2), num(g.top + kCell * g.n / 2));
}

// The triangle on and below the diagonal, and the masked one above it, in cell units.
std::string triangles(size_t n, const std::string& hatch_id) {
  std::string lower = "M0 0", upper = fmt::format("M1 0H{}V{}", n, n - 1);
  for (size_t k = 1; k <= n; ++k) lower += fmt::format("H{}V{}", k, k);
  for (size_t k = n - 1; k >= 1; --k) upper += fmt::format("H{}V{}", k, k - 1);
  std::string out =
      fmt::format("<path class=\"cells\" fill=\"{}\" d=\"{}H0Z\"/>", level_colour(0), lower);
  if (n > 1)
    out += fmt::format("<path class=\"masked\" fill=\"url(#{})\" d=\"{}Z\"/>", hatch_id, upper);
  return out;
}

// One path per colour level, runs of equal cells in a row merged; level 0 is the
// triangle's own fill.
std::string cell_paths(const HeatMap& m) {
  const size_t n = m.labels.size();
  std::vector<std::string> paths(kLevels);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j <= i;) {
      const int level = level_of(m.values[i * n + j]);
      size_t end = j + 1;
      while (end <= i && level_of(m.values[i * n + end]) == level) ++end;
      if (level > 0) paths[level] += fmt::format("M{} {}h{}v1h-{}z", j, i, end - j, end - j);
      j = end;
    }
  std::string out;
  for (int level = 1; level < kLevels; ++level)
    if (!paths[level].empty())
      out += fmt::format("<path class=\"cells\" fill=\"{}\" d=\"{}\"/>", level_colour(level),
                         paths[level]);
  return out;
}

std::string hatch_pattern(const std::string& id) {
  return fmt::format(
      "<pattern id=\"{}\" patternUnits=\"userSpaceOnUse\" width=\"0.5\" height=\"0.5\" "
      "patternTransform=\"rotate(45)\"><rect width=\"0.5\" height=\"0.5\" fill=\"#eeeeee\"/>"
      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"0.5\" stroke=\"#bdbdbd\" stroke-width=\"0.12\"/>"
      "</pattern>",
      id);
}

// The colour bar and the masked swatch at (x, y), 340 x 40.
std::string legend_body(double x, double y, const std::string& hatch_id) {
  std::string out = fmt::format(
      "<g class=\"legend\" transform=\"translate({} {})\" font-size=\"10\" fill=\"#59636e\">"
      "<text class=\"axis-label\" x=\"0\" y=\"10\" font-size=\"11\" fill=\"#1f2328\">"
      "attention weight</text>",
      num(x), num(y));
  for (int level = 0; level < kLevels; ++level)
    out += fmt::format("<rect x=\"{}\" y=\"15\" width=\"6.5\" height=\"12\" fill=\"{}\"/>",
                       num(level * 6.25), level_colour(level));
  for (int k = 0; k <= 4; ++k)
    out += fmt::format("<text class=\"tick\" x=\"{}\" y=\"39\" text-anchor=\"middle\">{}</text>",
                       num(3.1 + k * 48.4),
                       k == 0   ? "0"
                       : k == 4 ? "1"
                                : fmt::format("{:g}", k / 4.0));
  out += fmt::format(
      "<g transform=\"translate(216 15) scale(12)\"><rect width=\"1\" height=\"1\" "
      "fill=\"url(#{})\"/></g><text class=\"tick\" x=\"232\" y=\"25\">future (masked)</text></g>",
      hatch_id);
  return out;
}

}  // namespace

std::string weight_colour(double weight) {
  const double w = std::isfinite(weight) ? std::clamp(weight, 0.0, 1.0) : 0.0;
  const double pos = w * (kViridis.size() - 1);
  const size_t k = std::min(static_cast<size_t>(pos), kViridis.size() - 2);
  const double f = pos - static_cast<double>(k);
  int rgb[3];
  for (int c = 0; c < 3; ++c)
    rgb[c] = static_cast<int>(std::lround(kViridis[k][c] * (1 - f) + kViridis[k + 1][c] * f));
  return fmt::format("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2]);
}

std::string describe_attention(const std::vector<float>& v,
                               const std::vector<std::string>& labels) {
  const size_t n = labels.size();
  double self = 0, previous = 0, first = 0;
  size_t best_i = 0, best_j = 0;
  for (size_t i = 0; i < n; ++i) {
    self += v[i * n + i];
    if (i == 0) continue;
    previous += v[i * n + i - 1], first += v[i * n];
    for (size_t j = 0; j < i; ++j)
      if (best_i == 0 || v[i * n + j] > v[best_i * n + best_j]) best_i = i, best_j = j;
  }
  std::string out = fmt::format(
      "Attention weights over {} tokens: rows are queries, columns keys, the future above the "
      "diagonal masked. Mean weight on the token itself {:.2f}",
      n, n ? self / static_cast<double>(n) : 0.0);
  if (n < 2) return out + ".";
  const double rows = static_cast<double>(n - 1);
  return out + fmt::format(
                   ", on the previous token {:.2f}, on the first token {:.2f}. Strongest away "
                   "from the diagonal: query {} '{}' on key {} '{}', {:.4f}.",
                   previous / rows, first / rows, best_i, base::printable(labels[best_i]), best_j,
                   base::printable(labels[best_j]), v[best_i * n + best_j]);
}

std::string render_heat_map(const HeatMap& m, bool standalone) {
  const size_t n = m.labels.size();
  if (n == 0 || m.values.size() != n * n)
    throw std::invalid_argument(
        fmt::format("heat map '{}': {} values for {} labels", m.id, m.values.size(), n));
  const Geometry g = geometry_of(m);
  const std::string id = "map-" + m.id, hatch = id + "-mask";
  const double heading = standalone ? 22 : 0;  // a file shows its title
  const double height = heading + g.height + (standalone ? 52 : 0);
  const double width = std::max(g.width, standalone ? 350.0 : 0.0);
  std::string out = fmt::format(
      "<svg class=\"heat-map\" id=\"{0}\" {1}viewBox=\"0 0 {2} {3}\" role=\"img\" tabindex=\"0\" "
      "aria-labelledby=\"{0}-t {0}-d\" data-grid=\"{4} {5} {6} {7}\"><title id=\"{0}-t\">{8}"
      "</title><desc id=\"{0}-d\">{9}</desc><defs>{10}</defs>",
      id,
      standalone ? "xmlns=\"http://www.w3.org/2000/svg\" font-family=\"system-ui, DejaVu Sans, "
                   "sans-serif\" "
                 : "",
      num(width), num(height), num(g.left), num(g.top + heading), kCell, n, escape(m.title),
      escape(m.description.empty() ? describe_attention(m.values, m.labels) : m.description),
      hatch_pattern(hatch));
  if (standalone)
    out += fmt::format(
        "<text x=\"4\" y=\"15\" font-size=\"13\" font-weight=\"600\">{}</text><g "
        "transform=\"translate(0 {})\">",
        escape(m.title), heading);
  out += token_labels(m, g);
  out +=
      fmt::format("<g transform=\"translate({} {}) scale({})\">", num(g.left), num(g.top), kCell);
  out += triangles(n, hatch) + "<g shape-rendering=\"crispEdges\">" + cell_paths(m) + "</g>";
  out += "<g class=\"cursor\"></g></g>";
  if (standalone) out += legend_body(10, g.height + 4, hatch) + "</g>";
  return out + "</svg>";
}

nlohmann::json heat_map_data(const HeatMap& m) {
  const size_t n = m.labels.size();
  nlohmann::json v = nlohmann::json::array();
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j <= i; ++j) v.push_back(std::lround(double(m.values[i * n + j]) * 1e4));
  return {{"id", "map-" + m.id}, {"title", m.title}, {"n", n}, {"labels", m.labels}, {"v", v}};
}

std::string heat_map_legend() {
  return fmt::format(
      "<svg class=\"legend\" viewBox=\"0 0 340 46\" role=\"img\" aria-labelledby=\"legend-t\">"
      "<title id=\"legend-t\">Colour scale: attention weight from 0 (dark purple) to 1 "
      "(yellow); hatched grey: future tokens, masked</title><defs>{}</defs>{}</svg>",
      hatch_pattern("legend-mask"), legend_body(4, 2, "legend-mask"));
}

}  // namespace report
