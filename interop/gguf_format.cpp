#include "interop/gguf_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>

#include "base/utf8.h"
#include "interop/model_files.h"

namespace interop::gguf {

namespace {

constexpr uint64_t kMaxKeyBytes = 65535;  // the GGUF specification's bound
constexpr uint64_t kMaxNameBytes = 1024;  // far above ggml's 63
constexpr uint32_t kMaxDims = 4;          // ggml's GGML_MAX_DIMS
constexpr uint64_t kMaxElementsPerByte = 2;

// Bytes of one element of a scalar type (strings: their smallest, an empty one's length).
uint64_t value_bytes(uint32_t type) {
  switch (type) {
    case kUint8:
    case kInt8:
    case kBool: return 1;
    case kUint16:
    case kInt16: return 2;
    case kUint32:
    case kInt32:
    case kFloat32: return 4;
    default: return 8;  // UINT64, INT64, FLOAT64, and a STRING's length
  }
}

// One element of a scalar type into v; a string of at most string_bytes, which it then
// lessens by what it holds.
void read_element(Cursor& at, uint32_t type, Value& v, const std::string& what,
                  const std::string& source, uint64_t& string_bytes) {
  if (type == kString) {
    string_bytes -= std::min<uint64_t>(string_bytes, sizeof(std::string));
    v.strings.push_back(at.string(what, string_bytes, "the strings of every key kept"));
    string_bytes -= v.strings.back().size();
    return;
  }
  uint64_t bits = 0;
  at.bytes(&bits, value_bytes(type), what);
  switch (type) {
    case kInt8: v.ints.push_back(static_cast<int8_t>(bits)); break;
    case kInt16: v.ints.push_back(static_cast<int16_t>(bits)); break;
    case kInt32: v.ints.push_back(static_cast<int32_t>(bits)); break;
    case kFloat32: {
      float f;
      const auto b32 = static_cast<uint32_t>(bits);
      std::memcpy(&f, &b32, 4);
      v.floats.push_back(f);
      break;
    }
    case kFloat64: {
      double d;
      std::memcpy(&d, &bits, 8);
      v.floats.push_back(d);
      break;
    }
    case kBool:
      if (bits > 1)
        throw InteropError(
            fmt::format("{}: {} is a BOOL of value {}, not 0 or 1", source, what, bits));
      v.ints.push_back(static_cast<int64_t>(bits));
      break;
    default: v.ints.push_back(static_cast<int64_t>(bits));  // unsigned, and INT64
  }
}

uint32_t value_type(Cursor& at, const std::string& what, const std::string& source) {
  const uint32_t type = at.u32(what + " (its value type)");
  if (type > kFloat64)
    throw InteropError(
        fmt::format("{}: {} has value type {}, which GGUF does not define", source, what, type));
  return type;
}

// A value's element type, whether it is an array, and its count, bounded by the file.
Value read_value_shape(Cursor& at, const std::string& what, const std::string& source,
                       uint64_t& count) {
  Value v;
  v.type = value_type(at, what, source);
  count = 1;
  if (v.type == kArray) {
    v.is_array = true;
    v.type = value_type(at, what + " (its element type)", source);
    if (v.type == kArray)
      throw InteropError(
          fmt::format("{}: {} is an array of arrays, which no model key is", source, what));
    count = at.u64(what + " (its length)");
    if (count > at.remaining() / value_bytes(v.type))
      throw InteropError(
          fmt::format("{}: {} claims {} elements of {}, more than the {} bytes left "
                      "in the file hold",
                      source, what, count, value_type_name(v.type), at.remaining()));
  }
  return v;
}

// Past a value's elements, storing nothing.
void skip_elements(Cursor& at, uint32_t type, uint64_t count, const std::string& what) {
  if (type != kString) return at.skip(count * value_bytes(type), what);  // bounded: shape
  for (uint64_t i = 0; i < count; ++i) at.skip_string(what);
}

uint64_t aligned(uint64_t offset, uint64_t alignment) {
  return (offset + alignment - 1) / alignment * alignment;
}

uint64_t read_alignment(const File& f, const std::string& source) {
  const Value* v = f.find("general.alignment");
  if (!v) return kDefaultAlignment;
  if (v->is_array || v->type != kUint32)
    throw InteropError(fmt::format("{}: key general.alignment is {}, not a UINT32", source,
                                   value_type_name(v->is_array ? kArray : v->type)));
  const auto a = static_cast<uint64_t>(v->ints[0]);
  if (a == 0 || (a & (a - 1)) != 0)
    throw InteropError(
        fmt::format("{}: key general.alignment is {}, not a power of two", source, a));
  return a;
}

// A type attograd reads, and rows (ne[0]) a whole number of its blocks.
void check_tensor_type(const TensorInfo& t, const std::string& named, const std::string& source) {
  if (t.type == kF32 || t.type == kF16 || t.type == kBF16) return;
  const ag::quant::BlockLayout* l = block_layout(t.type);
  if (!l) {
    std::vector<std::string> known = {"F32 (0)", "F16 (1)", "BF16 (30)"};
    for (const auto& f : ag::quant::block_formats())
      known.push_back(fmt::format("{} ({})", f.ggml, f.ggml_type));
    throw InteropError(fmt::format("{}: {} has ggml type {}: only {} are read", source, named,
                                   t.type, fmt::join(known, ", ")));
  }
  if (t.ne[0] % static_cast<uint64_t>(l->elements) != 0)
    throw InteropError(
        fmt::format("{}: {} is {} with rows of {} weights, not a whole number of its "
                    "{}-weight blocks",
                    source, named, l->ggml, t.ne[0], l->elements));
}

TensorInfo read_tensor_info(Cursor& at, uint64_t index, const File& f, uint64_t file_size,
                            const std::string& source) {
  TensorInfo t;
  const std::string what = fmt::format("tensor info {}", index);
  t.name = at.string(what + " (its name)");
  if (t.name.size() > kMaxNameBytes)
    throw InteropError(fmt::format("{}: {} has a name of {} bytes (at most {})", source, what,
                                   t.name.size(), kMaxNameBytes));
  const std::string named = fmt::format("tensor {}", excerpt(t.name));
  const uint32_t dims = at.u32(named + " (its dims)");
  if (dims == 0 || dims > kMaxDims)
    throw InteropError(fmt::format("{}: {} has {} dims (1 to {})", source, named, dims, kMaxDims));
  uint64_t elements = 1;
  for (uint32_t d = 0; d < dims; ++d) {
    const uint64_t n = at.u64(fmt::format("{} (ne[{}])", named, d));
    // (no type stores an element in fewer than 18/32 bytes, Q4_0's: at most 2 per byte)
    if (n == 0 || n > kMaxElementsPerByte * file_size / elements)
      throw InteropError(
          fmt::format("{}: {} has ne[{}] = {}: its elements cannot fit in the "
                      "file ({} bytes)",
                      source, named, d, n, file_size));
    elements *= n;
    t.ne.push_back(n);
  }
  t.type = at.u32(named + " (its type)");
  check_tensor_type(t, named, source);
  t.offset = at.u64(named + " (its offset)");
  if (t.offset % f.alignment != 0)
    throw InteropError(fmt::format("{}: {} starts at offset {}, not a multiple of the alignment {}",
                                   source, named, t.offset, f.alignment));
  return t;
}

// Every tensor's data within the data section, none overlapping another.
void check_extents(const File& f, uint64_t file_size, const std::string& source) {
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : f.tensors) {
    const uint64_t room = file_size - f.data_start;
    if (t.offset > room || t.bytes() > room - t.offset)
      throw InteropError(
          fmt::format("{}: tensor {} ({} bytes at data offset {}) lies past the end "
                      "of the file",
                      source, excerpt(t.name), t.bytes(), t.offset));
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->offset + by_offset[i - 1]->bytes() > by_offset[i]->offset)
      throw InteropError(fmt::format("{}: tensors {} and {} overlap", source,
                                     excerpt(by_offset[i - 1]->name), excerpt(by_offset[i]->name)));
}

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

void put_element(std::string& out, const Value& v, size_t i) {
  if (v.type == kString) return put_string(out, v.strings[i]);
  if (v.type == kFloat32) return put(out, static_cast<float>(v.floats[i]));
  if (v.type == kFloat64) return put(out, v.floats[i]);
  const auto bits = static_cast<uint64_t>(v.ints[i]);
  out.append(reinterpret_cast<const char*>(&bits), value_bytes(v.type));
}

}  // namespace

const char* value_type_name(uint32_t type) {
  static const char* const names[] = {"UINT8",  "INT8",    "UINT16", "INT16",  "UINT32",
                                      "INT32",  "FLOAT32", "BOOL",   "STRING", "ARRAY",
                                      "UINT64", "INT64",   "FLOAT64"};
  return type <= kFloat64 ? names[type] : "unknown";
}

Value Value::u32(uint32_t v) {
  return Value{kUint32, false, {v}, {}, {}};
}
Value Value::f32(float v) {
  return Value{kFloat32, false, {}, {v}, {}};
}
Value Value::boolean(bool v) {
  return Value{kBool, false, {v ? 1 : 0}, {}, {}};
}
Value Value::string(std::string v) {
  return Value{kString, false, {}, {}, {std::move(v)}};
}
Value Value::string_array(std::vector<std::string> v) {
  return Value{kString, true, {}, {}, std::move(v)};
}
Value Value::i32_array(std::vector<int64_t> v) {
  return Value{kInt32, true, std::move(v), {}, {}};
}
size_t Value::count() const {
  return ints.size() + floats.size() + strings.size();
}

uint64_t TensorInfo::elements() const {
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;
  return n;
}

uint64_t TensorInfo::bytes() const {
  if (const ag::quant::BlockLayout* l = block_layout(type))
    return elements() / static_cast<uint64_t>(l->elements) * static_cast<uint64_t>(l->bytes);
  return elements() * stored_bytes(stored_type(type));
}

const ag::quant::BlockLayout* block_layout(uint32_t tensor_type) {
  return ag::quant::layout_of_ggml_type(tensor_type);
}

std::string tensor_type_name(uint32_t tensor_type) {
  if (const ag::quant::BlockLayout* l = block_layout(tensor_type)) return l->ggml;
  return tensor_type == kF32    ? "F32"
         : tensor_type == kF16  ? "F16"
         : tensor_type == kBF16 ? "BF16"
                                : "unknown";
}

const Value* File::find(const std::string& key) const {
  for (const auto& [k, v] : keys)
    if (k == key) return &v;
  return nullptr;
}

StoredType stored_type(uint32_t tensor_type) {
  return tensor_type == kF32   ? StoredType::f32
         : tensor_type == kF16 ? StoredType::f16
                               : StoredType::bf16;
}

namespace {

// The keys: each value kept or read past as the filter says.
void read_keys(Cursor& at, uint64_t key_count, const HeaderFilter& filter, File& f,
               const std::string& source) {
  std::set<std::string> seen;                            // the kept keys' names
  uint64_t string_bytes = filter.max_kept_string_bytes;  // what kept strings may still hold
  for (uint64_t i = 0; i < key_count; ++i) {
    std::string key = at.string(fmt::format("key {} (its name)", i));
    if (key.size() > kMaxKeyBytes)
      throw InteropError(fmt::format("{}: key {} has a name of {} bytes (at most {})", source, i,
                                     key.size(), kMaxKeyBytes));
    const std::string named = "key " + excerpt(key);
    uint64_t count = 0;
    Value v = read_value_shape(at, named, source, count);
    const KeyUse use = filter.key(key, v.type, v.is_array, count);
    if (use != KeyUse::keep) {
      skip_elements(at, v.type, count, named);
      if (use == KeyUse::ignore) continue;
      if (f.skipped_names.size() < kNamedSkips) f.skipped_names.push_back(excerpt(key));
      ++f.skipped_keys;
      continue;
    }
    if (!seen.insert(key).second)
      throw InteropError(fmt::format("{}: {} appears twice", source, named));
    for (uint64_t e = 0; e < count; ++e) read_element(at, v.type, v, named, source, string_bytes);
    f.keys.emplace_back(std::move(key), std::move(v));
  }
}

}  // namespace

File read_header(const InputBytes& in) {
  HeaderFilter all;
  all.key = [](const std::string&, uint32_t, bool, uint64_t) { return KeyUse::keep; };
  all.tensor = [](const File&, const TensorInfo&) {};
  return read_header(in, all);
}

File read_header(const InputBytes& in, const HeaderFilter& filter) {
  const std::string& source = in.source();
  Cursor at(in, 0);
  const uint32_t magic = at.u32("the magic");
  if (magic != kMagic)
    throw InteropError(
        fmt::format("{}: not a GGUF file: it starts with 0x{:08x}, not \"GGUF\"", source, magic));
  const uint32_t version = at.u32("the version");
  if (version != kVersion)
    throw InteropError(
        fmt::format("{}: GGUF version {}: only version {} is read", source, version, kVersion));
  const uint64_t tensor_count = at.u64("the tensor count");
  const uint64_t key_count = at.u64("the key count");
  // a key takes at least 13 bytes (length, type, one byte), a tensor info at least 32
  if (key_count > at.remaining() / 13)
    throw InteropError(fmt::format("{}: the key count {} cannot fit in the file ({} bytes)", source,
                                   key_count, in.size()));
  if (tensor_count > at.remaining() / 32)
    throw InteropError(fmt::format("{}: the tensor count {} cannot fit in the file ({} bytes)",
                                   source, tensor_count, in.size()));
  File f;
  read_keys(at, key_count, filter, f, source);
  f.alignment = read_alignment(f, source);
  std::set<std::string> seen;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    TensorInfo t = read_tensor_info(at, i, f, in.size(), source);
    filter.tensor(f, t);
    if (!seen.insert(t.name).second)
      throw InteropError(fmt::format("{}: tensor {} appears twice", source, excerpt(t.name)));
    f.tensors.push_back(std::move(t));
  }
  f.data_start = aligned(at.offset(), f.alignment);
  if (f.data_start > in.size())
    throw InteropError(
        fmt::format("{}: the data section (offset {}) starts past the end of the "
                    "file ({} bytes)",
                    source, f.data_start, in.size()));
  check_extents(f, in.size(), source);
  return f;
}

std::vector<float> read_tensor(const InputBytes& in, const File& file, const TensorInfo& t) {
  std::vector<float> values(t.elements());
  read_tensor_into(in, file, t, 0, values.size(), values.data());
  return values;
}

namespace {

// read_tensor_into for a tensor of blocks: whole blocks, a MiB of them at a time.
void read_blocks_into(const InputBytes& in, const File& file, const TensorInfo& t,
                      const ag::quant::BlockLayout& l, uint64_t first, uint64_t count, float* out) {
  const auto per_block = static_cast<uint64_t>(l.elements),
             block_bytes = static_cast<uint64_t>(l.bytes);
  if (first % per_block != 0 || count % per_block != 0)
    throw std::logic_error("read_tensor_into: not whole blocks");
  const uint64_t piece_blocks = (uint64_t{1} << 20) / block_bytes;  // a MiB of the file
  std::vector<uint8_t> piece(std::min(piece_blocks, count / per_block) * block_bytes);
  const std::string what = "tensor " + excerpt(t.name);
  for (uint64_t done = 0; done < count;) {
    const uint64_t blocks = std::min(piece_blocks, (count - done) / per_block);
    in.read(file.data_start + t.offset + (first + done) / per_block * block_bytes,
            reinterpret_cast<char*>(piece.data()), blocks * block_bytes, what);
    ag::quant::dequantize_row(l, piece.data(), static_cast<int64_t>(blocks * per_block),
                              out + done);
    done += blocks * per_block;
  }
}

}  // namespace

void read_tensor_into(const InputBytes& in, const File& file, const TensorInfo& t, uint64_t first,
                      uint64_t count, float* out) {
  if (first > t.elements() || count > t.elements() - first)
    throw std::logic_error("read_tensor_into: elements past the tensor's");
  if (const ag::quant::BlockLayout* l = block_layout(t.type))
    return read_blocks_into(in, file, t, *l, first, count, out);
  const StoredType type = stored_type(t.type);
  const uint64_t size = stored_bytes(type);
  constexpr uint64_t kPiece = uint64_t{1} << 20;  // bytes of the file at once
  std::vector<char> piece(std::min(kPiece, count * size));
  const std::string what = "tensor " + excerpt(t.name);
  for (uint64_t done = 0; done < count;) {
    const uint64_t n = std::min(kPiece / size, count - done);
    in.read(file.data_start + t.offset + (first + done) * size, piece.data(), n * size, what);
    read_floats(piece.data(), static_cast<int64_t>(n), type, out + done);
    done += n;
  }
}

void read_tensor_bytes(const InputBytes& in, const File& file, const TensorInfo& t, uint64_t first,
                       uint64_t count, uint8_t* out) {
  if (first > t.bytes() || count > t.bytes() - first)
    throw std::logic_error("read_tensor_bytes: bytes past the tensor's");
  in.read(file.data_start + t.offset + first, out, count, "tensor " + excerpt(t.name));
}

uint64_t write_header(File& file, const ByteSink& out) {
  std::string h;
  put(h, kMagic);
  put(h, kVersion);
  put<uint64_t>(h, file.tensors.size());
  put<uint64_t>(h, file.keys.size());
  for (const auto& [key, v] : file.keys) {
    put_string(h, key);
    put<uint32_t>(h, v.is_array ? kArray : v.type);
    if (v.is_array) {
      put<uint32_t>(h, v.type);
      put<uint64_t>(h, v.count());
    }
    for (size_t i = 0; i < v.count(); ++i) put_element(h, v, i);
  }
  uint64_t data_size = 0;
  for (auto& t : file.tensors) {
    t.offset = aligned(data_size, file.alignment);
    data_size = t.offset + t.bytes();
    put_string(h, t.name);
    put<uint32_t>(h, static_cast<uint32_t>(t.ne.size()));
    for (uint64_t n : t.ne) put(h, n);
    put(h, t.type);
    put(h, t.offset);
  }
  h.resize(aligned(h.size(), file.alignment), '\0');
  file.data_start = h.size();
  out(h.data(), h.size());
  return data_size;
}

void write_padding(uint64_t written, uint64_t alignment, const ByteSink& out) {
  const std::string zeros(aligned(written, alignment) - written, '\0');
  if (!zeros.empty()) out(zeros.data(), zeros.size());
}

}  // namespace interop::gguf
