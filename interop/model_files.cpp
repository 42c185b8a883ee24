#include "interop/model_files.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <vector>

#include "autograd/quant/packed_weight.h"
#include "base/utf8.h"

namespace interop {

namespace {

std::string shape_text(const ag::Shape& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

void check_values(const float* v, int64_t n, int64_t first, const std::string& name,
                  const std::string& source) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i]))
      throw InteropError(fmt::format("{}: tensor {} holds a non-finite value ({}) at element {}",
                                     source, excerpt(name), v[i], first + i));
}

// A tensor kept as blocks: its values unpacked a row at a time (a block's scale may be an
// infinity or a NaN), never the whole matrix in float32.
void check_finite(const ag::Tensor& t, const std::string& name, const std::string& source) {
  if (!t.packing()) return check_values(t.data<float>(), t.numel(), 0, name, source);
  const ag::quant::PackedFormat& f = *t.packing();
  const int64_t width = t.shape()[1], row_bytes = ag::quant::packed_row_bytes(f, width);
  const uint8_t* blocks = ag::quant::packed_bytes(t).data();
  std::vector<float> row(static_cast<size_t>(width));
  for (int64_t r = 0; r < t.shape()[0]; ++r) {
    f.unpack(blocks + r * row_bytes, width, row.data());
    check_values(row.data(), width, r * width, name, source);
  }
}

}  // namespace

void check_weights(ModelFiles& model, const std::string& source) {
  std::map<std::string, ag::Tensor> given;
  for (auto& [name, tensor] : model.weights)
    if (!given.emplace(name, tensor).second)
      throw InteropError(fmt::format("{}: tensor {} appears twice", source, excerpt(name)));
  nn::StateDict ordered;
  for (const auto& [name, shape] : model.config.parameter_shapes()) {
    const auto it = given.find(name);
    if (it == given.end()) throw InteropError(fmt::format("{}: no tensor for {}", source, name));
    if (it->second.shape() != shape)
      throw InteropError(fmt::format("{}: tensor {} has shape {}, the config needs {}", source,
                                     name, shape_text(it->second.shape()), shape_text(shape)));
    check_finite(it->second, name, source);
    ordered.emplace_back(name, it->second);
    given.erase(it);
  }
  if (!given.empty())
    throw InteropError(
        fmt::format("{}: tensor {} is not a parameter of the model its config states", source,
                    excerpt(given.begin()->first)));
  model.weights = std::move(ordered);
}

std::string beyond_gpt2(const nn::GPTConfig& c) {
  const nn::GPTConfig gpt2;
  if (c.position != gpt2.position) return "GPT-2 learns its positions; this model uses rope";
  if (c.mlp != gpt2.mlp) return "GPT-2's MLP is gelu; this model's is swiglu";
  if (c.kv_heads() != c.n_heads)
    return fmt::format("GPT-2's heads each have their keys; this model groups {} heads over {}",
                       c.n_heads, c.kv_heads());
  if (c.head_width() * c.n_heads != c.d_model)
    return fmt::format("GPT-2's heads are d_model / n_heads wide; this model's are {}",
                       c.head_width());
  if (c.qk_norm) return "GPT-2 has no q/k norms; this model has them";
  if (!c.linear_bias)
    return "GPT-2's projections have biases; this model's out_proj and MLP have none";
  if (c.norm_eps != gpt2.norm_eps)
    return fmt::format("GPT-2's norms use epsilon 1e-05; this model's use {}", c.norm_eps);
  return "";
}

std::string excerpt(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return base::printable(text);
  size_t cut = max_bytes;  // not inside a character: its continuation bytes go with it
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return base::printable(text.substr(0, cut)) + "...";
}

}  // namespace interop
