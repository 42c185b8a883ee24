#include "train/freezing.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <stdexcept>

#include "base/utf8.h"

namespace train {

namespace {

// The comma-separated patterns of `freeze`, empty ones left out.
std::vector<std::string> freeze_patterns(const std::string& freeze) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= freeze.size()) {
    const size_t comma = std::min(freeze.find(',', start), freeze.size());
    if (comma > start) out.push_back(freeze.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

bool matches(const std::string& pattern, const std::string& name) {
  return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

}  // namespace

bool is_adapter_parameter(const std::string& name) {
  return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
}

std::vector<bool> frozen_parameters(const RunConfig& cfg, const std::vector<std::string>& names) {
  std::vector<bool> frozen(names.size(), false);
  if (cfg.model.lora_rank > 0)
    for (size_t i = 0; i < names.size(); ++i)
      frozen[i] = !is_adapter_parameter(names[i]) && names[i].rfind("classifier.", 0) != 0;
  for (const std::string& pattern : freeze_patterns(cfg.freeze)) {
    bool any = false;
    for (size_t i = 0; i < names.size(); ++i)
      if (matches(pattern, names[i])) frozen[i] = any = true;
    if (!any)
      throw std::invalid_argument(fmt::format(
          "--freeze '{}' matches no parameter (names are like tok_emb.weight, "
          "blocks.0.attn.W_query.weight, blocks.*.mlp.*; 'attograd inspect' lists them)",
          base::printable(pattern)));
  }
  if (!names.empty() && std::find(frozen.begin(), frozen.end(), false) == frozen.end())
    throw std::invalid_argument(fmt::format(
        "--freeze '{}' freezes every parameter: nothing would train", base::printable(cfg.freeze)));
  return frozen;
}

void freeze_parameters(const RunConfig& cfg, nn::Module& model) {
  const nn::StateDict params = model.named_parameters();
  std::vector<std::string> names;
  for (const auto& [name, t] : params) names.push_back(name);
  const std::vector<bool> frozen = frozen_parameters(cfg, names);
  for (size_t i = 0; i < params.size(); ++i) {
    ag::Tensor t = params[i].second;
    t.requires_grad_(!frozen[i]);
  }
}

nn::FrozenBase frozen_base(const RunConfig& cfg) {
  nn::FrozenBase base;
  base.format = ag::quant::packed_format(cfg.base_precision);
  base.own = cfg.base_precision == ag::quant::BasePrecision::own;
  if (!base.format && !base.own) return base;
  const nn::ShapeList shapes = cfg.model.parameter_shapes();
  std::vector<std::string> names;
  for (const auto& [name, shape] : shapes) names.push_back(name);
  const std::vector<bool> frozen = frozen_parameters(cfg, names);
  for (size_t i = 0; i < names.size(); ++i)
    if (frozen[i]) base.frozen.insert(names[i]);
  return base;
}

nn::StateDict trainable_named_parameters(const nn::Module& model) {
  nn::StateDict out;
  for (const auto& [name, t] : model.named_parameters())
    if (t.requires_grad()) out.emplace_back(name, t);
  return out;
}

ag::Bf16WeightCopies* kept_bf16_copies(ag::Precision precision, optim::Optimizer& opt,
                                       const nn::Module& model, ag::Bf16WeightCopies& copies) {
  if (precision != ag::Precision::bf16 || !opt.keep_bf16_copies(&copies)) return nullptr;
  std::vector<ag::Tensor> frozen;
  for (const auto& [name, t] : model.named_parameters())
    if (!t.requires_grad() && !t.packing()) frozen.push_back(t);  // packed: unpacked per use
  copies.add_frozen(frozen);
  return &copies;
}

ParameterCounts count_parameters(const RunConfig& cfg) {
  return count_parameters(cfg, cfg.model.parameter_shapes());
}

ParameterCounts count_parameters(const RunConfig& cfg, const nn::ShapeList& shapes) {
  std::vector<std::string> names;
  for (const auto& [name, shape] : shapes) names.push_back(name);
  const std::vector<bool> frozen = frozen_parameters(cfg, names);
  ParameterCounts c;
  for (size_t i = 0; i < shapes.size(); ++i)
    (frozen[i] ? c.frozen : c.trainable) += ag::shape_numel(shapes[i].second);
  return c;
}

}  // namespace train
