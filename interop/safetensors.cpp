#include "interop/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "base/atomic_file.h"
#include "base/json.h"
#include "base/utf8.h"
#include "interop/json_stream.h"
#include "interop/model_files.h"

namespace interop {

namespace {

using nlohmann::json;

std::string quoted_name(const std::string& name) {
  return "'" + excerpt(name) + "'";
}

// The dtype named by a header entry: any of the format's; a name it does not define is
// refused.
const SafetensorsDtype* parse_dtype(const json& value, const std::string& where) {
  if (!value.is_string())
    throw InteropError(fmt::format("{}: dtype is {}, not a string", where, base::json_kind(value)));
  const std::string& s = value.get_ref<const std::string&>();
  for (const SafetensorsDtype& d : safetensors_dtypes())
    if (s == d.name) return &d;
  throw InteropError(fmt::format("{}: unknown dtype {}", where, base::json_quote(value)));
}

ag::Shape parse_shape(const json& value, const std::string& where) {
  if (!value.is_array())
    throw InteropError(fmt::format("{}: shape is {}, not an array", where, base::json_kind(value)));
  if (value.size() > kMaxSafetensorsRank)
    throw InteropError(fmt::format("{}: shape has {} dimensions, more than {}", where, value.size(),
                                   kMaxSafetensorsRank));
  ag::Shape shape;
  for (const json& d : value) {
    // any dimension above 2^62 cannot match the bytes of a file; bounded so that int64 holds it
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 62))
      throw InteropError(fmt::format("{}: shape {} holds {}, not a size", where,
                                     base::json_quote(value), base::json_quote(d)));
    shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }
  return shape;
}

// The bits the shape needs, or UINT64_MAX when that exceeds `limit` bytes (no overflow).
uint64_t shape_bits(const ag::Shape& shape, uint32_t element_bits, uint64_t limit) {
  const uint64_t limit_bits = limit > UINT64_MAX / 8 ? UINT64_MAX - 1 : limit * 8;
  uint64_t bits = element_bits;
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  for (int64_t d : shape) {
    if (bits > limit_bits / static_cast<uint64_t>(d)) return UINT64_MAX;
    bits *= static_cast<uint64_t>(d);
  }
  return bits;
}

void parse_offsets(const json& value, const std::string& where, SafetensorsEntry& e,
                   uint64_t region) {
  if (!value.is_array() || value.size() != 2 || !value[0].is_number_unsigned() ||
      !value[1].is_number_unsigned())
    throw InteropError(fmt::format("{}: data_offsets {} is not a pair of byte offsets", where,
                                   base::json_quote(value)));
  e.begin = value[0].get<uint64_t>();
  e.end = value[1].get<uint64_t>();
  if (e.begin > e.end || e.end > region)
    throw InteropError(
        fmt::format("{}: data_offsets [{}, {}] lie outside the data region of {} "
                    "bytes",
                    where, e.begin, e.end, region));
}

SafetensorsEntry parse_entry(const std::string& name, const json& value, const std::string& where,
                             uint64_t region) {
  if (!value.is_object())
    throw InteropError(fmt::format("{}: is {}, not an object", where, base::json_kind(value)));
  for (const auto& [key, v] : value.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      throw InteropError(fmt::format("{}: unknown field {}", where, quoted_name(key)));
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!value.contains(key)) throw InteropError(fmt::format("{}: no {}", where, key));
  SafetensorsEntry e;
  e.name = name;
  e.dtype = parse_dtype(value["dtype"], where);
  e.shape = parse_shape(value["shape"], where);
  parse_offsets(value["data_offsets"], where, e, region);
  const uint64_t bits = shape_bits(e.shape, e.dtype->bits, region);
  if (bits != UINT64_MAX && bits % 8 != 0)
    throw InteropError(fmt::format("{}: shape {} of {} is {} bits, not a whole number of bytes",
                                   where, ag::shape_str(e.shape), e.dtype->name, bits));
  if (bits == UINT64_MAX || bits / 8 != e.end - e.begin)
    throw InteropError(
        fmt::format("{}: shape {} of {} needs {} bytes, but data_offsets [{}, {}] hold {}", where,
                    ag::shape_str(e.shape), e.dtype->name,
                    bits == UINT64_MAX ? "more than the file's" : std::to_string(bits / 8), e.begin,
                    e.end, e.end - e.begin));
  return e;
}

// Every byte of the data region belongs to exactly one tensor: sorted by offset, each range
// starts where the one before ended, the first at 0 and the last ends at the region's end.
void check_tiling(std::vector<SafetensorsEntry>& entries, uint64_t region,
                  const std::string& source) {
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  uint64_t at = 0;
  const SafetensorsEntry* last = nullptr;
  for (const auto& e : entries) {
    if (e.begin < at)
      throw InteropError(fmt::format("{}: tensor {} (bytes {} to {}) overlaps tensor {} (to {})",
                                     source, quoted_name(e.name), e.begin, e.end,
                                     quoted_name(last->name), at));
    if (e.begin > at)
      throw InteropError(
          fmt::format("{}: data_offsets leave bytes {} to {} of the data region "
                      "to no tensor (before tensor {})",
                      source, at, e.begin, quoted_name(e.name)));
    at = e.end;
    if (e.end > e.begin || !last) last = &e;
  }
  if (at != region)
    throw InteropError(
        fmt::format("{}: data_offsets leave bytes {} to {} of the data region to "
                    "no tensor (after the last)",
                    source, at, region));
}

// The header's top object, read as it streams past (json_stream.h): each tensor's entry, a
// tree of at most kEntryValues values, is checked and kept as a SafetensorsEntry (or
// refused by the caller's filter before it is stored); __metadata__'s strings are kept only
// when asked for. Nothing else of the text is held.
class HeaderReader final : public JsonReader {
 public:
  HeaderReader(const std::string& source, uint64_t region, const SafetensorsReader::Filter& filter,
               bool keep_metadata, std::vector<SafetensorsEntry>& entries,
               std::map<std::string, std::string>& metadata)
      : source_(source),
        region_(region),
        filter_(filter),
        keep_metadata_(keep_metadata),
        entries_(entries),
        metadata_(metadata) {}

  void open(bool object) override {
    if (!object)
      throw InteropError(fmt::format("{}: header is {}, not a JSON object", source_,
                                     object ? "an object" : "an array"));
  }
  Use use(const std::string& key, size_t) override {
    if (!names_.insert(key).second)
      throw InteropError(fmt::format("{}: tensor {} appears twice", source_, quoted_name(key)));
    if (key == "__metadata__") return stream();
    if (filter_) filter_(key);  // refused here: nothing of it is stored
    return keep(kEntryValues);
  }
  void value(const std::string& key, size_t, json v) override {
    if (key == "__metadata__")
      throw InteropError(
          fmt::format("{}: __metadata__ is {}, not an object", source_, base::json_kind(v)));
    entries_.push_back(parse_entry(key, v, source_ + ": tensor " + quoted_name(key), region_));
  }
  JsonReader& nested(const std::string&, size_t) override { return metadata_reader_; }

 private:
  // shape (8 dimensions, a ninth to be named), data_offsets, dtype and their containers
  static constexpr size_t kEntryValues = 24;

  // __metadata__: strings, each kept only when asked for
  struct MetadataReader final : JsonReader {
    HeaderReader& h;
    explicit MetadataReader(HeaderReader& header) : h(header) {}
    void open(bool object) override {
      if (!object)
        throw InteropError(fmt::format("{}: __metadata__ is an array, not an object", h.source_));
    }
    Use use(const std::string&, size_t) override { return keep(1); }
    void value(const std::string& key, size_t, json v) override {
      if (!v.is_string())
        throw InteropError(fmt::format("{}: __metadata__ {} is {}, not a string", h.source_,
                                       quoted_name(key), base::json_kind(v)));
      if (h.keep_metadata_ && !h.metadata_.emplace(key, v.get<std::string>()).second)
        throw InteropError(
            fmt::format("{}: __metadata__ {} appears twice", h.source_, quoted_name(key)));
    }
  };

  const std::string& source_;
  uint64_t region_;
  const SafetensorsReader::Filter& filter_;
  bool keep_metadata_;
  std::vector<SafetensorsEntry>& entries_;
  std::map<std::string, std::string>& metadata_;
  std::set<std::string> names_;  // the entries' names: as many as the filter lets through
  MetadataReader metadata_reader_{*this};
};

// An OCP 8-bit float as float32 (exact): F8_E4M3 (PyTorch's float8_e4m3fn: exponent bias 7,
// no infinities, S.1111.111 NaN) or F8_E5M2 (float16's top byte: read as float16).
float f8_value(uint8_t b, bool e4m3) {
  if (!e4m3) {
    const uint16_t half = static_cast<uint16_t>(b << 8);
    float v = 0;
    read_floats(reinterpret_cast<const char*>(&half), 1, StoredType::f16, &v);
    return v;
  }
  const int exponent = (b >> 3) & 0xF, mantissa = b & 7;
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<float>::quiet_NaN();
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);
  return sign * std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
}

// n little-endian elements at src as float32, one function per dtype that holds weights
void widen_f32(const char* src, uint64_t n, float* dst) {
  std::memcpy(dst, src, 4 * n);
}
void widen_f16(const char* src, uint64_t n, float* dst) {
  read_floats(src, static_cast<int64_t>(n), StoredType::f16, dst);
}
void widen_bf16(const char* src, uint64_t n, float* dst) {
  read_floats(src, static_cast<int64_t>(n), StoredType::bf16, dst);
}
void widen_f64(const char* src, uint64_t n, float* dst) {
  for (uint64_t i = 0; i < n; ++i) {
    double v = 0;
    std::memcpy(&v, src + 8 * i, 8);
    // rounded to nearest; beyond float32's range, infinite (the importers refuse it by name)
    const bool in_range = std::isnan(v) || std::fabs(v) <= std::numeric_limits<float>::max();
    dst[i] = in_range ? static_cast<float>(v) : (v < 0 ? -INFINITY : INFINITY);
  }
}
void widen_f8_e4m3(const char* src, uint64_t n, float* dst) {
  for (uint64_t i = 0; i < n; ++i) dst[i] = f8_value(static_cast<uint8_t>(src[i]), true);
}
void widen_f8_e5m2(const char* src, uint64_t n, float* dst) {
  for (uint64_t i = 0; i < n; ++i) dst[i] = f8_value(static_cast<uint8_t>(src[i]), false);
}

}  // namespace

const char* dtype_name(StoredType d) {
  switch (d) {
    case StoredType::f32: return "F32";
    case StoredType::f16: return "F16";
    case StoredType::bf16: return "BF16";
  }
  return "?";
}

const std::vector<SafetensorsDtype>& safetensors_dtypes() {
  static const std::vector<SafetensorsDtype> table = {
      {"F32", 32, widen_f32},
      {"F16", 16, widen_f16},
      {"BF16", 16, widen_bf16},
      {"F64", 64, widen_f64},
      {"F8_E4M3", 8, widen_f8_e4m3},
      {"F8_E5M2", 8, widen_f8_e5m2},
      {"BOOL", 8, nullptr},
      {"U8", 8, nullptr},
      {"I8", 8, nullptr},
      {"U16", 16, nullptr},
      {"I16", 16, nullptr},
      {"U32", 32, nullptr},
      {"I32", 32, nullptr},
      {"U64", 64, nullptr},
      {"I64", 64, nullptr},
      {"C64", 64, nullptr},
      {"F8_E8M0", 8, nullptr},
      {"F6_E2M3", 6, nullptr},
      {"F6_E3M2", 6, nullptr},
      {"F4", 4, nullptr},
  };
  return table;
}

SafetensorsReader::SafetensorsReader(const std::string& path, const Filter& filter,
                                     bool keep_metadata)
    : SafetensorsReader(InputBytes::open(path), filter, keep_metadata) {}

SafetensorsReader SafetensorsReader::from_bytes(std::string bytes, const std::string& source) {
  return SafetensorsReader(InputBytes::of(std::move(bytes), source), {}, true);
}

// The header length is bounded before the header is read.
SafetensorsReader::SafetensorsReader(InputBytes in, const Filter& filter, bool keep_metadata)
    : in_(std::move(in)) {
  const uint64_t size = in_.size();
  if (size < 8)
    throw InteropError(
        fmt::format("{}: {} bytes, too short for the 8-byte header length", source(), size));
  uint64_t n = 0;
  in_.read(0, &n, 8, "the header length");  // little-endian, as the CPU (input_bytes.cpp)
  if (n > size - 8 || n > kMaxSafetensorsHeader)
    throw InteropError(
        fmt::format("{}: header length {} is {} (file of {} bytes, at most {} of "
                    "header)",
                    source(), n, n > size - 8 ? "past the end of the file" : "too large", size,
                    kMaxSafetensorsHeader));
  data_start_ = 8 + n;
  const uint64_t region = in_.size() - data_start_;
  HeaderReader header(source(), region, filter, keep_metadata, entries_, metadata_);
  try {
    read_json(in_, 8, n, header, kMaxSafetensorsString);
  } catch (const JsonStreamError& e) {
    throw InteropError(fmt::format("{}: header: {}", source(), e.what()));
  }
  check_tiling(entries_, region, source());
  for (size_t i = 0; i < entries_.size(); ++i) by_name_.emplace(entries_[i].name, i);
}

const SafetensorsEntry* SafetensorsReader::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

void SafetensorsReader::read_into(const SafetensorsEntry& e, float* out) const {
  const std::string named = "tensor " + quoted_name(e.name);
  if (!e.dtype->widen)
    throw InteropError(
        fmt::format("{}: {} is {}, which holds no weights (they are read from "
                    "F32, F16, BF16, F64, F8_E4M3 or F8_E5M2)",
                    source(), named, e.dtype->name));
  const uint64_t at = data_start_ + e.begin;
  if (e.dtype->widen == widen_f32) {  // straight into place
    in_.read(at, out, e.end - e.begin, named);
    return;
  }
  // widened a piece at a time, so the narrow copy never exceeds 1 MiB
  const uint64_t size = e.dtype->bits / 8, piece_elements = (uint64_t{1} << 20) / size;
  const uint64_t count = (e.end - e.begin) / size;
  std::vector<char> piece(size * std::min(piece_elements, count));
  for (uint64_t done = 0; done < count;) {
    const uint64_t n = std::min(piece_elements, count - done);
    in_.read(at + size * done, piece.data(), size * n, named);
    e.dtype->widen(piece.data(), n, out + done);
    done += n;
  }
}

ag::Tensor SafetensorsReader::read(const SafetensorsEntry& e) const {
  ag::Tensor t = ag::empty(e.shape);
  read_into(e, t.data<float>());
  return t;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       StoredType dtype, const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    const uint64_t bytes = static_cast<uint64_t>(ag::shape_numel(t.shape)) * stored_bytes(dtype);
    if (header.contains(t.name))
      throw InteropError(fmt::format("{}: tensor {} given twice", path, quoted_name(t.name)));
    header[t.name] = {{"dtype", dtype_name(dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data region starts 8-byte aligned
  const uint64_t length = text.size();          // little-endian, as the CPU
  base::write_file_atomically(path, [&](int fd) {
    base::BufferedWriter out(fd, path);
    out.write(reinterpret_cast<const char*>(&length), 8);
    out.write(text.data(), text.size());
    std::vector<float> values;
    for (const auto& t : tensors) {
      const int64_t n = ag::shape_numel(t.shape);
      if (!t.values) {
        values.assign(static_cast<size_t>(n), 0.0f);
        t.fill(values.data());
      }
      write_floats(t.values ? t.values : values.data(), n, dtype,
                   [&](const char* data, size_t bytes) { out.write(data, bytes); });
    }
    out.flush();
  });
}

}  // namespace interop
