#include "autograd/autocast.h"

#include <fmt/format.h>

#include <atomic>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "autograd/profile.h"

namespace ag {

// bfloat16 copies of parameters (or of stacks of them), keyed by the parameters' identity;
// each entry keeps its parameters alive, so a key cannot be reused by another tensor while
// the scope lasts.
struct AutocastScope::WeightCache {
  struct Entry {
    std::vector<Tensor> sources;
    Tensor converted;
  };
  std::map<std::vector<const TensorImpl*>, Entry> entries;
  // where each parameter's bfloat16 values start in the entries' tensors (a parameter
  // stacked with others, or used alone and in a stack, has several)
  std::unordered_map<const TensorImpl*, std::vector<bfloat16*>> images;
  // weights without gradients whose copies are kept too (Bf16WeightCopies::add_frozen),
  // held so that their addresses stay theirs
  std::unordered_map<const TensorImpl*, Tensor> frozen;
};

namespace {

thread_local Precision t_precision = Precision::fp32;
thread_local std::shared_ptr<AutocastScope::WeightCache> t_cache;
std::atomic<int> bf16_choices{0};  // note_bf16_choice: 1 a shape ran in bfloat16, 2 one fell back
std::atomic<bool> use_producer_copies{true};  // off: a test compares with rounding at every GEMM

bool is_parameter(const Tensor& t) {
  return t.requires_grad() && t.is_leaf();
}

// rows [row0, row0 + rows of t) of dst [*, ...] bfloat16 = t rounded
void convert_into(const Tensor& t, const Tensor& dst, int64_t row0) {
  Tensor c = t.detach().contiguous();
  const int64_t width = c.dim() == 0 ? 1 : c.numel() / std::max<int64_t>(c.shape()[0], 1);
  to_bfloat16(c.const_data<float>(), dst.data<bfloat16>() + row0 * width, c.numel());
}

Tensor stacked_bf16(const std::vector<Tensor>& parts) {
  const profile::Timer timer("round to bfloat16");
  if (parts.size() == 1) return detail::bf16_operand(parts[0]);
  Shape shape = parts[0].shape();
  shape[0] = 0;
  for (const auto& p : parts) shape[0] += p.shape()[0];
  Tensor out = empty(shape, DType::BFloat16);
  int64_t row = 0;
  for (const auto& p : parts) convert_into(p, out, row), row += p.shape()[0];
  return out;
}

}  // namespace

AutocastScope::AutocastScope(Precision precision, Bf16WeightCopies* copies)
    : saved_precision_(t_precision), saved_cache_(t_cache) {
  t_precision = precision;
  if (precision == Precision::bf16 && copies) t_cache = copies->cache_;
  if (precision == Precision::bf16 && !t_cache) t_cache = std::make_shared<WeightCache>();
}

Bf16WeightCopies::Bf16WeightCopies() : cache_(std::make_shared<AutocastScope::WeightCache>()) {}

void Bf16WeightCopies::refresh(const Tensor& param, int64_t begin, int64_t end) const {
  const auto it = cache_->images.find(param.impl());
  if (it == cache_->images.end() || param.dtype() != DType::Float32) return;
  const float* src = param.const_data<float>();
  for (bfloat16* dst : it->second) to_bfloat16_streaming(src + begin, dst + begin, end - begin);
}

void Bf16WeightCopies::add_frozen(const std::vector<Tensor>& weights) {
  for (const auto& w : weights) cache_->frozen.emplace(w.impl(), w);
}

void Bf16WeightCopies::clear() {
  cache_->entries.clear();
  cache_->images.clear();
  cache_->frozen.clear();
}

int64_t Bf16WeightCopies::bytes() const {
  int64_t n = 0;
  for (const auto& [key, e] : cache_->entries) n += e.converted.numel() * 2;
  return n;
}

AutocastScope::~AutocastScope() {
  t_precision = saved_precision_;
  t_cache = saved_cache_;
}

Precision autocast_precision() {
  return t_precision;
}

Tensor to_bfloat16(const Tensor& t) {
  const profile::Timer timer("round to bfloat16");
  if (t.dtype() != DType::Float32)
    throw std::invalid_argument(
        fmt::format("to_bfloat16: expected a float32 tensor, got {}", dtype_name(t.dtype())));
  Tensor out = empty(t.shape(), DType::BFloat16);
  if (t.numel() > 0) convert_into(t, out, 0);
  return out;
}

namespace detail {

bool autocast_to_bf16(DType operand) {
  return t_precision == Precision::bf16 && operand == DType::Float32;
}

Tensor bf16_operand(const Tensor& t) {
  const std::shared_ptr<Storage> copy = t.impl()->storage->current_bf16_copy();
  if (!copy || !use_producer_copies || t.dtype() != DType::Float32 || !t.is_contiguous() ||
      static_cast<size_t>(t.offset() + t.numel()) * sizeof(bfloat16) > copy->nbytes)
    return to_bfloat16(t);
  auto view = std::make_shared<TensorImpl>();
  view->storage = copy;
  view->shape = t.shape();
  view->strides = t.strides();
  view->offset = t.offset();
  view->dtype = DType::BFloat16;
  return Tensor(std::move(view));
}

Tensor attach_bf16_copy(const Tensor& out) {
  if (!autocast_to_bf16(out.dtype()) || !use_producer_copies || bf16_choices.load() == 2 ||
      !out.is_contiguous() || out.offset() != 0)
    return Tensor();
  Tensor copy = empty(out.shape(), DType::BFloat16);
  out.impl()->storage->attach_bf16_copy(copy.impl()->storage);
  return copy;
}

void fill_bf16_copy(const Tensor& copy, const float* values, int64_t first, int64_t n) {
  if (copy.defined()) to_bfloat16(values, copy.data<bfloat16>() + first, n);
}

void note_bf16_choice(bool in_bf16) {
  bf16_choices.fetch_or(in_bf16 ? 1 : 2, std::memory_order_relaxed);
}

void forget_bf16_choices_for_tests() {
  bf16_choices = 0;
}

void use_bf16_copies_for_tests(bool on) {
  use_producer_copies = on;
}

Tensor autocast_operand(const Tensor& t) {
  return autocast_stacked({t});
}

Tensor autocast_stacked(const std::vector<Tensor>& parts) {
  bool cacheable = t_cache != nullptr;
  std::vector<const TensorImpl*> key;
  for (const auto& p : parts) {
    cacheable = cacheable && (is_parameter(p) || t_cache->frozen.contains(p.impl()));
    key.push_back(p.impl());
  }
  if (!cacheable) return stacked_bf16(parts);
  auto [it, fresh] = t_cache->entries.try_emplace(key);
  if (!fresh) return it->second.converted;
  it->second = {parts, stacked_bf16(parts)};
  bfloat16* at = it->second.converted.data<bfloat16>();
  for (const auto& p : parts) t_cache->images[p.impl()].push_back(at), at += p.numel();
  return it->second.converted;
}

}  // namespace detail

}  // namespace ag
