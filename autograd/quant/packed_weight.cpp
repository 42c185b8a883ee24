#include "autograd/quant/packed_weight.h"

#include <fmt/format.h>

#include <atomic>
#include <cstring>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <vector>

#include "autograd/parallel.h"
#include "autograd/quant/block_formats.h"
#include "autograd/quant/unpack_kernels.h"

namespace ag::quant {

namespace {

template <BlockFormat F>
void pack_blocks(const float* x, int64_t n, uint8_t* out) {
  quantize_row(layout(F), x, n, out);
}
void pack_bf16(const float* x, int64_t n, uint8_t* out) {
  to_bfloat16(x, reinterpret_cast<bfloat16*>(out), n);
}
void unpack_bf16(const uint8_t* in, int64_t n, float* out) {
  from_bfloat16(reinterpret_cast<const bfloat16*>(in), out, n);
}
void copy_bf16(const uint8_t* in, int64_t n, bfloat16* out) {
  std::memcpy(out, in, static_cast<size_t>(n) * sizeof(bfloat16));
}
// the blocks unpacked by unpack_kernels.h's fastest kernel for the CPU
template <typename T>
void unpack_q8_0(const uint8_t* in, int64_t n, T* out) {
  quant::unpack_q8_0(in, n, out);
}
template <typename T>
void unpack_q4_k(const uint8_t* in, int64_t n, T* out) {
  quant::unpack_q4_k(in, n, out);
}

// the other formats through the table's reference row (ggml's scalar arithmetic): no
// kernel of their own yet, correctness first
template <BlockFormat F>
void unpack_table(const uint8_t* in, int64_t n, float* out) {
  dequantize_row(layout(F), in, n, out);
}
template <BlockFormat F>
void unpack_table_bf16(const uint8_t* in, int64_t n, bfloat16* out) {
  const BlockLayout& l = layout(F);
  float block[256];  // the largest block's weights (the K formats')
  static_assert(sizeof(block) / sizeof(float) >= 256);
  for (int64_t i = 0; i < n; i += l.elements, in += l.bytes) {
    l.dequantize(in, block);
    to_bfloat16(block, out + i, l.elements);
  }
}
// a row of a format that has only the table's arithmetic
template <BlockFormat F>
constexpr PackedFormat table_row(const char* name, int64_t elements, int64_t bytes) {
  return {name, elements, bytes, pack_blocks<F>, unpack_table<F>, unpack_table_bf16<F>};
}

// BasePrecision's values index it (fp32 packs nothing: no row; nor does own). Each block
// row's name, weights and bytes are block_formats()'s (test_frozen_base checks).
constexpr PackedFormat kPacked[] = {
    {"bf16", 1, 2, pack_bf16, unpack_bf16, copy_bf16},
    {"q8_0", 32, 34, pack_blocks<BlockFormat::q8_0>, unpack_q8_0<float>, unpack_q8_0<bfloat16>},
    {"q4_k", 256, 144, pack_blocks<BlockFormat::q4_k>, unpack_q4_k<float>, unpack_q4_k<bfloat16>},
    table_row<BlockFormat::q4_0>("q4_0", 32, 18),
    table_row<BlockFormat::q4_1>("q4_1", 32, 20),
    table_row<BlockFormat::q5_0>("q5_0", 32, 22),
    table_row<BlockFormat::q5_1>("q5_1", 32, 24),
    table_row<BlockFormat::q5_k>("q5_k", 256, 176),
    table_row<BlockFormat::q6_k>("q6_k", 256, 210),
};
static_assert(std::size(kPacked) == static_cast<size_t>(BasePrecision::own) - 1);

void check_packable(const Tensor& t, const PackedFormat& f) {
  if (t.dim() != 2 || t.dtype() != DType::Float32 || t.requires_grad() || t.packing() ||
      !t.is_leaf())
    throw std::invalid_argument(fmt::format(
        "pack_in_place: a frozen float32 matrix is packed, got {} {}{}", dtype_name(t.dtype()),
        shape_str(t.shape()), t.requires_grad() ? " that requires grad" : ""));
  if (!fits(f, t.shape()[1]))
    throw std::invalid_argument(
        fmt::format("pack_in_place: rows of {} weights are not a whole "
                    "number of {}'s blocks of {}",
                    t.shape()[1], f.name, f.elements));
}

// Puts `storage` under t's impl as a contiguous [rows, width] float32 tensor.
void adopt_storage(Tensor& t, std::shared_ptr<Storage> storage) {
  TensorImpl& impl = *t.impl();
  const Shape shape = impl.shape;
  impl.storage = std::move(storage);
  impl.strides = {shape[1], 1};
  impl.offset = 0;
}

std::atomic<int64_t> tile_weights{kUnpackTileWeights};

}  // namespace

int64_t unpack_tile_weights() {
  return tile_weights.load(std::memory_order_relaxed);
}

void set_unpack_tile_weights(int64_t weights) {
  tile_weights.store(weights > 0 ? weights : kUnpackTileWeights, std::memory_order_relaxed);
}

std::span<const PackedFormat> packed_formats() {
  return kPacked;
}

const PackedFormat* packed_format(BasePrecision precision) {
  if (precision == BasePrecision::fp32 || precision == BasePrecision::own) return nullptr;
  return &kPacked[static_cast<int>(precision) - 1];
}

const PackedFormat* packed_format_named(const std::string& name) {
  for (const auto& f : kPacked)
    if (name == f.name) return &f;
  return nullptr;
}

void pack_in_place(Tensor& t, const PackedFormat& format) {
  pack_into(t, t, format);
}

void pack_into(Tensor& t, const Tensor& values, const PackedFormat& format) {
  check_packable(t, format);
  if (values.shape() != t.shape() || values.dtype() != DType::Float32)
    throw std::invalid_argument("pack_into: values of another shape or type");
  const int64_t rows = t.shape()[0], width = t.shape()[1];
  const int64_t row_bytes = packed_row_bytes(format, width);
  auto storage = std::make_shared<Storage>(static_cast<size_t>(rows * row_bytes));
  const Tensor src = values.contiguous();
  const float* x = src.const_data<float>();
  auto* out = static_cast<uint8_t*>(storage->data);
  detail::parallel_for_items(rows, 1, static_cast<double>(width) * 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) format.pack(x + r * width, width, out + r * row_bytes);
  });
  storage->packed = &format;
  adopt_storage(t, std::move(storage));
}

void pack_rows(Tensor& packed, int64_t r0, const Tensor& values) {
  const PackedFormat* format = packed.packing();
  const int64_t width = packed.dim() == 2 ? packed.shape()[1] : -1;
  if (!format || values.dim() != 2 || values.shape()[1] != width ||
      values.dtype() != DType::Float32 || r0 < 0 || r0 + values.shape()[0] > packed.shape()[0])
    throw std::invalid_argument(fmt::format("pack_rows: {} values at row {} of a packed {}",
                                            shape_str(values.shape()), r0,
                                            shape_str(packed.shape())));
  const int64_t row_bytes = packed_row_bytes(*format, width);
  const Tensor src = values.contiguous();
  const float* x = src.const_data<float>();
  uint8_t* out = packed_data(packed).data() + r0 * row_bytes;
  detail::parallel_for_items(values.shape()[0], 1, static_cast<double>(width) * 8,
                             [&](int64_t a, int64_t b) {
                               for (int64_t r = a; r < b; ++r)
                                 format->pack(x + r * width, width, out + r * row_bytes);
                             });
}

Tensor packed_empty(const Shape& shape, const PackedFormat& format) {
  if (shape.size() != 2 || shape[0] < 0 || !fits(format, shape[1]))
    throw std::invalid_argument(
        fmt::format("a weight of shape {} in {} blocks of {}: its rows "
                    "must be a whole number of blocks",
                    shape_str(shape), format.name, format.elements));
  Tensor t = empty({0, 0});
  t.impl()->shape = shape;
  auto storage =
      std::make_shared<Storage>(static_cast<size_t>(shape[0] * packed_row_bytes(format, shape[1])));
  storage->packed = &format;
  adopt_storage(t, std::move(storage));
  return t;
}

void adopt_packed(Tensor& t, const Tensor& packed) {
  if (!packed.packing() || t.shape() != packed.shape() || t.dtype() != DType::Float32)
    throw std::invalid_argument(
        fmt::format("adopt_packed: a float32 {} takes packed blocks of its shape, got {}",
                    shape_str(t.shape()), shape_str(packed.shape())));
  TensorImpl& impl = *t.impl();
  impl.requires_grad = false;
  adopt_storage(t, packed.impl()->storage);
}

Tensor packed_tensor(const Shape& shape, const PackedFormat& format,
                     std::span<const uint8_t> bytes) {
  if (shape.size() != 2 || shape[0] < 0 || !fits(format, shape[1]) ||
      static_cast<int64_t>(bytes.size()) != shape[0] * packed_row_bytes(format, shape[1]))
    throw std::invalid_argument(
        fmt::format("{} bytes of {} blocks for a weight of shape {} (it takes {})", bytes.size(),
                    format.name, shape_str(shape),
                    shape.size() == 2 && fits(format, shape[1])
                        ? fmt::format("{}", shape[0] * packed_row_bytes(format, shape[1]))
                        : std::string("rows a whole number of blocks")));
  Tensor t = empty({0, 0});
  t.impl()->shape = shape;
  auto storage = std::make_shared<Storage>(bytes.size());
  if (!bytes.empty()) std::memcpy(storage->data, bytes.data(), bytes.size());
  storage->packed = &format;
  adopt_storage(t, std::move(storage));
  return t;
}

void unpack_in_place(Tensor& t) {
  if (!t.packing()) return;
  Tensor floats = unpacked(t, DType::Float32);
  adopt_storage(t, floats.impl()->storage);
}

void unpack_rows(const Tensor& t, int64_t r0, int64_t r1, DType dtype, void* out) {
  const PackedFormat& f = *t.packing();
  const int64_t width = t.shape()[1], row_bytes = packed_row_bytes(f, width);
  const uint8_t* in = packed_bytes(t).data();
  detail::parallel_for_items(r1 - r0, 1, static_cast<double>(width) * 4, [&](int64_t a, int64_t b) {
    std::vector<float> row(dtype == DType::Float64 ? width : 0);
    for (int64_t i = a; i < b; ++i) {
      const uint8_t* src = in + (r0 + i) * row_bytes;
      if (dtype == DType::Float32) {
        f.unpack(src, width, static_cast<float*>(out) + i * width);
      } else if (dtype == DType::BFloat16) {
        f.unpack_bf16(src, width, static_cast<bfloat16*>(out) + i * width);
      } else {
        f.unpack(src, width, row.data());
        for (int64_t c = 0; c < width; ++c) static_cast<double*>(out)[i * width + c] = row[c];
      }
    }
  });
}

Tensor unpacked(const Tensor& t, DType dtype) {
  Tensor out = empty(t.shape(), dtype);
  unpack_rows(t, 0, t.shape()[0], dtype, out.raw_data());
  return out;
}

std::span<uint8_t> packed_data(Tensor& t) {
  const std::span<const uint8_t> bytes = packed_bytes(t);
  return {const_cast<uint8_t*>(bytes.data()), bytes.size()};
}

std::span<const uint8_t> packed_bytes(const Tensor& t) {
  const Storage& s = *t.impl()->storage;
  if (!s.packed) throw std::logic_error("packed_bytes: the tensor is not packed");
  return {static_cast<const uint8_t*>(s.data), s.nbytes};
}

}  // namespace ag::quant
