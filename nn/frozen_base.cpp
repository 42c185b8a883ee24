#include "nn/frozen_base.h"

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

void place_initial_values(const FrozenBase* base, const std::string& name, ag::Tensor& p,
                          const ag::Tensor& values) {
  ag::NoGradGuard no_grad;
  if (base && base->from_file.contains(name)) return;  // the file's blocks are adopted next
  if (!base || !base->packs(name, p.shape())) {
    if (p.impl()->storage->nbytes > 0) {
      ag::copy_(p, values);
      return;
    }
    // a matrix drawn under a RedrawnScope has no storage yet: it takes the draw's
    const ag::Tensor v = values.contiguous();
    p.impl()->storage = v.impl()->storage;
    p.impl()->offset = v.offset();
    return;
  }
  p.requires_grad_(false);
  ag::quant::pack_into(p, values, base->format_for(p.shape()[1]));
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
