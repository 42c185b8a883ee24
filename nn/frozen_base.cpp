#include "nn/frozen_base.h"

#include <algorithm>

#include "autograd/allocator.h"

namespace nn {

bool FrozenBase::frozen_matrix(const std::string& name, const ag::Shape& shape) const {
  return shape.size() == 2 && frozen.contains(name) &&
         (name.ends_with(".weight") || name == "weight");
}

bool FrozenBase::packs(const std::string& name, const ag::Shape& shape) const {
  return format && frozen_matrix(name, shape);
}

const ag::quant::PackedFormat& FrozenBase::format_for(int64_t width) const {
  if (ag::quant::fits(*format, width)) return *format;
  return *ag::quant::packed_format(ag::quant::BasePrecision::bf16);
}

namespace {

// p set to a whole draw: copied into its storage, or, drawn under a RedrawnScope (no
// storage yet), given the draw's
void take_values(ag::Tensor& p, const ag::Tensor& values) {
  ag::NoGradGuard no_grad;
  if (p.impl()->storage->nbytes > 0) {
    ag::copy_(p, values);
    return;
  }
  const ag::Tensor v = values.contiguous();
  p.impl()->storage = v.impl()->storage;
  p.impl()->offset = v.offset();
}

}  // namespace

void place_initial_draws(const FrozenBase* base, const std::string& name, ag::Tensor& p,
                         const RowDraw& draw, int64_t chunk_bytes) {
  const bool packs = base && base->packs(name, p.shape());
  const bool from_file = base && base->from_file.contains(name);
  if (!packs && !from_file) {
    take_values(p, draw(p.shape()[0]));
    return;
  }
  const int64_t rows = p.shape()[0], width = p.shape()[1];
  const int64_t chunk = std::max<int64_t>(1, chunk_bytes / (4 * std::max<int64_t>(1, width)));
  ag::NoGradGuard no_grad;
  ag::Tensor packed =
      packs ? ag::quant::packed_empty(p.shape(), base->format_for(width)) : ag::Tensor();
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const ag::Tensor values = draw(std::min(chunk, rows - r0));
    if (packs) ag::quant::pack_rows(packed, r0, values);
  }
  if (packs) ag::quant::adopt_packed(p, packed);  // else the file's blocks are adopted next
}

int pack_frozen_base(Module& model, const FrozenBase& base) {
  int packed = 0;
  for (auto& [name, p] : model.named_parameters()) {
    const ag::quant::PackedFormat* want = nullptr;
    if (base.packs(name, p.shape()))
      want = &base.format_for(p.shape()[1]);
    else if (base.own && base.frozen_matrix(name, p.shape()))
      want = p.packing();  // as the file holds it
    if (p.packing() == want) continue;
    ag::Tensor t = p;
    ag::quant::unpack_in_place(t);
    if (!want) continue;
    t.requires_grad_(false);
    ag::quant::pack_in_place(t, *want);
    ++packed;
  }
  // (under own nothing is packed here, but an --init-from's blocks were adopted in place of
  // the float32 storage the model was built with: that too leaves the resident memory)
  if (packed > 0 || base.own) ag::release_cached_blocks();
  return packed;
}

void unpack_frozen_base(Module& model) {
  for (auto& [name, p] : model.named_parameters()) {
    ag::Tensor t = p;
    ag::quant::unpack_in_place(t);
  }
}

int64_t held_parameter_bytes(const Module& model) {
  int64_t bytes = 0;
  for (const auto& [name, p] : model.named_parameters())
    bytes += p.packing() ? static_cast<int64_t>(ag::quant::packed_bytes(p).size())
                         : p.numel() * static_cast<int64_t>(ag::dtype_size(p.dtype()));
  return bytes;
}

}  // namespace nn
