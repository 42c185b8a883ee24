#pragma once
// A causal attention matrix as an SVG heat map: rows are queries, columns keys, both
// labelled with the tokens; the cells on and below the diagonal coloured by weight on a
// fixed 0-to-1 scale (viridis, 32 steps), the future above the diagonal drawn as a hatched
// grey triangle. Cells of one colour share one path, so a 64-token map stays a few tens of
// kilobytes. The weights themselves (4 decimals, as PyTorch prints them) are in data()
// for the page's hover readout.
//
//   report::HeatMap m;
//   m.id = "l0h1";  m.title = "layer 0, head 1";  m.labels = {"Y", "o", "u"};
//   m.values = weights;               // T x T, row-major
//   std::string svg = report::render_heat_map(m);       // for a page
//   std::string file = report::render_heat_map(m, /*standalone=*/true);  // xmlns, legend
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace report {

struct HeatMap {
  std::string id;                   // unique in the page: [a-z0-9-]
  std::string title;                // "layer 1, head 2"
  std::string description;          // empty: a summary computed from the weights
  std::vector<std::string> labels;  // one per token (shown as given, escaped)
  std::vector<float> values;        // labels.size()^2, row-major; above the diagonal ignored
};

// Throws std::invalid_argument when values does not hold labels.size() squared numbers.
std::string render_heat_map(const HeatMap& map, bool standalone = false);

// {id, n, labels, v}: v holds the cells on and below the diagonal, row by row, as
// integers in units of 1e-4 (row i starts at i (i + 1) / 2).
nlohmann::json heat_map_data(const HeatMap& map);

// The colour scale: a bar from 0 to 1 with its values, and the masked swatch.
std::string heat_map_legend();

// The scale's colour for a weight in [0, 1] (clamped), as "#rrggbb".
std::string weight_colour(double weight);

// What the weights show, in words: the mean weight each query puts on itself, on the
// previous token and on the first token, and the strongest attention away from the diagonal.
std::string describe_attention(const std::vector<float>& values,
                               const std::vector<std::string>& labels);

}  // namespace report
