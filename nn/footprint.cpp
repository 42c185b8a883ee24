#include "nn/footprint.h"

#include <algorithm>
#include <cctype>

namespace nn {

namespace {

// "blocks.12.attn" -> "blocks.*.attn": one term for every layer.
std::string any_layer(const std::string& path) {
  std::string out;
  for (size_t i = 0; i < path.size();) {
    const bool starts_part = i == 0 || path[i - 1] == '.';
    size_t j = i;
    while (j < path.size() && std::isdigit(static_cast<unsigned char>(path[j]))) ++j;
    if (starts_part && j > i && (j == path.size() || path[j] == '.')) {
      out += '*';
      i = j;
    } else {
      out += path[i++];
    }
  }
  return out;
}

std::string term_name(const std::string& path, const std::string& what) {
  return (path.empty() ? std::string("model") : any_layer(path)) + ": " + what;
}

// Adds `bytes` to the term of that name (every layer's into one).
void add_to(std::vector<Footprint::Term>& terms, const std::string& name, double bytes) {
  auto it = std::find_if(terms.begin(), terms.end(), [&](const auto& t) { return t.name == name; });
  if (it == terms.end()) it = terms.insert(terms.end(), Footprint::Term{name, 0.0});
  it->bytes += bytes;
}

double total(const std::vector<Footprint::Term>& terms) {
  double sum = 0;
  for (const auto& t : terms) sum += t.bytes;
  return sum;
}

}  // namespace

void Footprint::save(const std::string& path, const std::string& what, double elements,
                     double bytes_each) {
  const bool in_a_block = path.rfind("blocks.", 0) == 0;
  add_to(recompute_blocks && in_a_block ? recomputed : saved, term_name(path, what),
         elements * bytes_each);
}

void Footprint::save_once(const std::string& path, const std::string& what, double bytes) {
  add_to(per_step, term_name(path, what), bytes);
}

double Footprint::per_step_bytes() const {
  return total(per_step);
}

void Footprint::backward(const std::string& path, const std::string& what, double elements,
                         double bytes_each) {
  if (elements * bytes_each > backward_peak.bytes)
    backward_peak = Term{term_name(path, what), elements * bytes_each};
}

double Footprint::saved_bytes_per_token() const {
  return total(saved);
}

double Footprint::recomputed_bytes_per_token() const {
  return total(recomputed) / static_cast<double>(std::max<int64_t>(1, recomputed_layers));
}

}  // namespace nn
