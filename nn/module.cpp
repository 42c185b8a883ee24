#include "nn/module.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <stdexcept>

#include "autograd/allocator.h"
#include "autograd/quant/packed_weight.h"
#include "nn/observer.h"

namespace nn {

namespace {
thread_local Observer* watching = nullptr;
}  // namespace

ObserverScope::ObserverScope(Observer& observer) : previous_(watching) {
  watching = &observer;
}
ObserverScope::~ObserverScope() {
  watching = previous_;
}
Observer* ObserverScope::current() {
  return watching;
}

ag::Tensor Module::register_parameter(const std::string& name, ag::Tensor value) {
  return register_parameter(name, value.shape(), [&value] { return value; });
}

ag::Tensor Module::register_parameter(const std::string& name, const ag::Shape& shape,
                                      const std::function<ag::Tensor()>& init, bool redrawn) {
  for (const auto& p : params_)
    if (p.name == name)
      throw std::logic_error(fmt::format("register_parameter: '{}' is registered twice", name));
  ag::Tensor value;
  if (UninitializedScope::active() && !ShapeOnlyScope::active()) {
    value = ag::empty(shape);
    value.requires_grad_();
  } else if (redrawn && RedrawnScope::active() && !ShapeOnlyScope::active()) {
    init();                       // drawn and dropped: the generator as it always is
    ag::release_cached_blocks();  // and its block given back, not kept for the redraw
    // no storage of its own yet (an allocation now would be handed the draw's block, just
    // freed and resident): the redraw gives it one (nn::place_initial_draws)
    value = ag::empty({0});
    value.impl()->shape = shape;
    value.impl()->strides = ag::contiguous_strides(shape);
    value.requires_grad_();
  } else if (!ShapeOnlyScope::active()) {
    value = init();
    value.requires_grad_();
  }
  params_.push_back(Parameter{name, value, shape});
  return value;
}

void Module::replace_module(const std::string& old_name, const std::string& name,
                            std::shared_ptr<Module> module) {
  auto it = std::find_if(children_.begin(), children_.end(),
                         [&](const auto& c) { return c.first == old_name; });
  if (it == children_.end())
    throw std::logic_error(fmt::format("replace_module: no child named '{}'", old_name));
  module->parent_ = this;
  module->name_ = name;
  module->path_.clear();
  *it = {name, std::move(module)};
}

void Module::remove_module(const std::string& name) {
  std::erase_if(children_, [&](const auto& c) { return c.first == name; });
}

void Module::collect(const std::string& prefix, StateDict& out) const {
  for (const auto& p : params_) out.emplace_back(prefix + p.name, p.value);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

void Module::collect_shapes(const std::string& prefix, ShapeList& out) const {
  for (const auto& p : params_) out.emplace_back(prefix + p.name, p.shape);
  for (const auto& [name, child] : children_) child->collect_shapes(prefix + name + ".", out);
}

ShapeList Module::named_parameter_shapes() const {
  ShapeList out;
  collect_shapes("", out);
  return out;
}

void Module::footprint(Footprint& f) const {
  for (const auto& [name, child] : children_) child->footprint(f);
}

StateDict Module::named_parameters() const {
  StateDict out;
  collect("", out);
  return out;
}

std::vector<std::string> Module::module_paths() const {
  std::vector<std::string> out;
  for (const auto& [name, child] : children_) {
    out.push_back(child->path());
    for (auto& below : child->module_paths()) out.push_back(std::move(below));
  }
  return out;
}

void Module::for_each_module(const std::function<void(Module&)>& fn) {
  fn(*this);
  for (auto& [name, child] : children_) child->for_each_module(fn);
}

void Module::visit_modules(const std::function<void(const Module&)>& fn) const {
  fn(*this);
  for (const auto& [name, child] : children_) child->visit_modules(fn);
}

std::vector<ag::Tensor> Module::parameters() const {
  std::vector<ag::Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, shape] : named_parameter_shapes()) n += ag::shape_numel(shape);
  return n;
}

void Module::requires_grad_(bool on) {
  for (auto& p : params_)
    if (p.value.defined()) p.value.requires_grad_(on);
  for (auto& [name, child] : children_) child->requires_grad_(on);
}

std::vector<ag::Tensor> Module::trainable_parameters() const {
  std::vector<ag::Tensor> out;
  for (auto& [name, t] : named_parameters())
    if (t.requires_grad()) out.push_back(t);
  return out;
}

void Module::zero_grad() {
  for (const auto& t : parameters()) t.zero_grad();
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

namespace {

// For each of `mine`, its entry in `state`, after checking that every parameter is given
// once, with its shape, as a float tensor, and nothing else.
std::vector<const ag::Tensor*> matched_entries(const StateDict& mine, const StateDict& state) {
  std::set<std::string> given;
  for (const auto& [name, t] : state) {
    if (!given.insert(name).second)
      throw std::invalid_argument(fmt::format("load_state_dict: '{}' is given twice", name));
  }
  auto entry_named = [&](const std::string& key) {
    return std::find_if(state.begin(), state.end(), [&](auto& e) { return e.first == key; });
  };
  std::vector<const ag::Tensor*> entries;
  for (const auto& [name, param] : mine) {
    auto it = entry_named(name);
    if (it == state.end())
      throw std::invalid_argument(fmt::format("load_state_dict: missing parameter '{}' {}", name,
                                              ag::shape_str(param.shape())));
    if (it->second.shape() != param.shape())
      throw std::invalid_argument(
          fmt::format("load_state_dict: '{}' has shape {} in the state but {} in the model", name,
                      ag::shape_str(it->second.shape()), ag::shape_str(param.shape())));
    if (!ag::is_floating(it->second.dtype()))
      throw std::invalid_argument(fmt::format("load_state_dict: '{}' is {}, not a float tensor",
                                              name, ag::dtype_name(it->second.dtype())));
    entries.push_back(&it->second);
  }
  for (const auto& [name, t] : state) {
    const std::string& key = name;
    if (std::none_of(mine.begin(), mine.end(), [&](auto& e) { return e.first == key; }))
      throw std::invalid_argument(fmt::format("load_state_dict: unexpected parameter '{}' {}", name,
                                              ag::shape_str(t.shape())));
  }
  return entries;
}

}  // namespace

void Module::load_state_dict(const StateDict& state) {
  StateDict mine = named_parameters();
  // check everything before copying anything, so a bad state leaves the module intact
  const std::vector<const ag::Tensor*> entries = matched_entries(mine, state);
  ag::NoGradGuard no_grad;
  for (size_t i = 0; i < mine.size(); ++i)
    entries[i]->packing() ? ag::quant::adopt_packed(mine[i].second, *entries[i])
                          : ag::copy_(mine[i].second, *entries[i]);
}

void Module::adopt_state_dict(const StateDict& state) {
  StateDict mine = named_parameters();
  const std::vector<const ag::Tensor*> entries = matched_entries(mine, state);
  ag::NoGradGuard no_grad;
  for (size_t i = 0; i < mine.size(); ++i) {
    ag::Tensor& param = mine[i].second;
    const ag::Tensor& given = *entries[i];
    if (given.packing()) {
      ag::quant::adopt_packed(param, given);
      continue;
    }
    if (given.dtype() != param.dtype() || !given.is_contiguous()) {
      ag::copy_(param, given);
      continue;
    }
    // rebound in place, as Module::to does: every handle on the parameter (a tied head's
    // too) sees the given storage
    const bool trainable = param.requires_grad();
    *param.impl() = *given.detach().impl();
    param.impl()->requires_grad = trainable;
  }
}

const std::string& Module::path() const {
  if (path_.empty() && parent_) {
    const std::string& up = parent_->path();
    path_ = up.empty() ? name_ : up + "." + name_;
  }
  return path_;
}

void Module::to(ag::DType dtype) {
  for (auto& [name, t, shape] : params_) {
    // a packed weight is unpacked as each use's type (autograd/quant/packed_weight.h)
    if (!t.defined() || t.dtype() == dtype || t.packing()) continue;
    const bool frozen = !t.requires_grad();
    ag::Tensor converted = t.detach().to(dtype);
    // rebind storage in place so every handle on this parameter sees the new dtype
    *t.impl() = *converted.impl();
    t.impl()->requires_grad = !frozen;
  }
  for (auto& [name, child] : children_) child->to(dtype);
}

}  // namespace nn
