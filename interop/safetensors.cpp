#include "interop/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "autograd/bfloat16.h"
#include "base/atomic_file.h"
#include "base/json.h"
#include "base/utf8.h"
#include "interop/model_files.h"

namespace interop {

namespace {

using nlohmann::json;

// Widens an IEEE half exactly (every half is a float32): subnormals, infinities and NaNs
// included.
float f16_to_f32(uint16_t h) {
  const bool negative = (h & 0x8000u) != 0;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float v = std::ldexp(static_cast<float>(mantissa), -24);
    return negative ? -v : v;
  }
  uint32_t bits = (negative ? 0x80000000u : 0u) | (mantissa << 13);
  bits |= exponent == 0x1f ? 0x7f800000u : (exponent + 112) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint64_t read_le64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string quoted(const std::string& name) {
  return "'" + base::printable(name) + "'";
}

// The dtype named by a header entry; safetensors' other types are refused by name.
StDtype parse_dtype(const json& value, const std::string& where) {
  if (!value.is_string())
    throw InteropError(fmt::format("{}: dtype is {}, not a string", where, base::json_kind(value)));
  const std::string& s = value.get_ref<const std::string&>();
  if (s == "F32") return StDtype::f32;
  if (s == "F16") return StDtype::f16;
  if (s == "BF16") return StDtype::bf16;
  static const char* const kKnown[] = {"F64", "I8",  "I16",     "I32",     "I64",     "U8",
                                       "U16", "U32", "U64",     "BOOL",    "F8_E4M3", "F8_E5M2",
                                       "C64", "F4",  "F6_E2M3", "F6_E3M2", "F8_E8M0"};
  for (const char* k : kKnown)
    if (s == k)
      throw InteropError(
          fmt::format("{}: dtype {} is not read here (only F32, F16 and BF16)", where, s));
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

// The bytes the shape needs, or UINT64_MAX when that exceeds `limit` (no overflow).
uint64_t shape_bytes(const ag::Shape& shape, StDtype dtype, uint64_t limit) {
  uint64_t bytes = dtype_size(dtype);
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  for (int64_t d : shape) {
    if (bytes > limit / static_cast<uint64_t>(d)) return UINT64_MAX;
    bytes *= static_cast<uint64_t>(d);
  }
  return bytes;
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
      throw InteropError(fmt::format("{}: unknown field {}", where, quoted(key)));
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!value.contains(key)) throw InteropError(fmt::format("{}: no {}", where, key));
  SafetensorsEntry e;
  e.name = name;
  e.dtype = parse_dtype(value["dtype"], where);
  e.shape = parse_shape(value["shape"], where);
  parse_offsets(value["data_offsets"], where, e, region);
  const uint64_t needed = shape_bytes(e.shape, e.dtype, region);
  if (needed != e.end - e.begin)
    throw InteropError(
        fmt::format("{}: shape {} of {} needs {} bytes, but data_offsets [{}, {}] hold {}", where,
                    ag::shape_str(e.shape), dtype_name(e.dtype),
                    needed == UINT64_MAX ? "more than the file's" : std::to_string(needed), e.begin,
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
                                     source, quoted(e.name), e.begin, e.end, quoted(last->name),
                                     at));
    if (e.begin > at)
      throw InteropError(
          fmt::format("{}: data_offsets leave bytes {} to {} of the data region "
                      "to no tensor (before tensor {})",
                      source, at, e.begin, quoted(e.name)));
    at = e.end;
    if (e.end > e.begin || !last) last = &e;
  }
  if (at != region)
    throw InteropError(
        fmt::format("{}: data_offsets leave bytes {} to {} of the data region to "
                    "no tensor (after the last)",
                    source, at, region));
}

void parse_metadata(const json& value, const std::string& source,
                    std::map<std::string, std::string>& out) {
  if (!value.is_object())
    throw InteropError(
        fmt::format("{}: __metadata__ is {}, not an object", source, base::json_kind(value)));
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string())
      throw InteropError(fmt::format("{}: __metadata__ {} is {}, not a string", source, quoted(key),
                                     base::json_kind(v)));
    out[key] = v.get<std::string>();
  }
}

}  // namespace

const char* dtype_name(StDtype d) {
  switch (d) {
    case StDtype::f32: return "F32";
    case StDtype::f16: return "F16";
    case StDtype::bf16: return "BF16";
  }
  return "?";
}

size_t dtype_size(StDtype d) {
  return d == StDtype::f32 ? 4 : 2;
}

SafetensorsReader::SafetensorsReader(const std::string& path) : source_(path) {
  struct stat st;
  try {
    fd_ = base::open_regular(path, "safetensors file '" + path + "'", &st);
  } catch (const base::FileError& e) {
    throw InteropError(e.what());
  }
  file_size_ = static_cast<uint64_t>(st.st_size);
  char prefix[8];
  if (file_size_ < 8)
    throw InteropError(
        fmt::format("{}: {} bytes, too short for the 8-byte header length", path, file_size_));
  read_bytes(0, prefix, 8, "the header length");
  const uint64_t n = read_le64(prefix);
  if (n > kMaxSafetensorsHeader || n > file_size_ - 8)
    throw InteropError(
        fmt::format("{}: header length {} is {} (file of {} bytes, at most {} of "
                    "header)",
                    path, n, n > file_size_ - 8 ? "past the end of the file" : "too large",
                    file_size_, kMaxSafetensorsHeader));
  std::string header(n, '\0');
  read_bytes(8, header.data(), n, "the header");
  data_start_ = 8 + n;
  parse(header);
}

SafetensorsReader SafetensorsReader::from_bytes(std::string_view bytes, const std::string& source) {
  SafetensorsReader r;
  r.source_ = source;
  r.memory_ = bytes;
  r.file_size_ = bytes.size();
  if (bytes.size() < 8)
    throw InteropError(
        fmt::format("{}: {} bytes, too short for the 8-byte header length", source, bytes.size()));
  const uint64_t n = read_le64(bytes.data());
  if (n > kMaxSafetensorsHeader || n > bytes.size() - 8)
    throw InteropError(fmt::format("{}: header length {} is {} (file of {} bytes)", source, n,
                                   n > bytes.size() - 8 ? "past the end of the file" : "too large",
                                   bytes.size()));
  r.data_start_ = 8 + n;
  r.parse(bytes.substr(8, n));
  return r;
}

void SafetensorsReader::parse(std::string_view header) {
  json top;
  try {
    top = base::parse_json(header);
  } catch (const base::JsonError& e) {
    throw InteropError(fmt::format("{}: header: {}", source_, e.what()));
  }
  if (!top.is_object())
    throw InteropError(
        fmt::format("{}: header is {}, not a JSON object", source_, base::json_kind(top)));
  const uint64_t region = file_size_ - data_start_;
  for (const auto& [name, value] : top.items()) {
    if (name == "__metadata__") {
      parse_metadata(value, source_, metadata_);
      continue;
    }
    entries_.push_back(parse_entry(name, value, source_ + ": tensor " + quoted(name), region));
  }
  check_tiling(entries_, region, source_);
  for (size_t i = 0; i < entries_.size(); ++i) by_name_.emplace(entries_[i].name, i);
}

const SafetensorsEntry* SafetensorsReader::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

void SafetensorsReader::read_bytes(uint64_t offset, char* out, size_t n,
                                   const std::string& what) const {
  if (!fd_.valid()) {
    std::memcpy(out, memory_.data() + offset, n);
    return;
  }
  for (size_t done = 0; done < n;) {
    const ssize_t got = ::pread(fd_.get(), out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      throw InteropError(fmt::format("{}: reading {}: {}", source_, what, std::strerror(errno)));
    if (got == 0)
      throw InteropError(
          fmt::format("{}: the file ends inside {} (it shrank while being read)", source_, what));
    done += static_cast<size_t>(got);
  }
}

void SafetensorsReader::read_into(const SafetensorsEntry& e, float* out) const {
  const std::string named = "tensor " + quoted(e.name);
  const uint64_t at = data_start_ + e.begin;
  if (e.dtype == StDtype::f32) {
    read_bytes(at, reinterpret_cast<char*>(out), e.end - e.begin, named);
  } else {  // widened a piece at a time, so the narrow copy never exceeds 1 MiB
    constexpr size_t kPiece = size_t{1} << 19;
    std::vector<uint16_t> piece(std::min<uint64_t>(kPiece, (e.end - e.begin) / 2));
    for (uint64_t done = 0; done < (e.end - e.begin) / 2;) {
      const size_t n = std::min<uint64_t>(piece.size(), (e.end - e.begin) / 2 - done);
      read_bytes(at + 2 * done, reinterpret_cast<char*>(piece.data()), 2 * n, named);
      for (size_t i = 0; i < n; ++i)
        out[done + i] = e.dtype == StDtype::f16
                            ? f16_to_f32(piece[i])
                            : static_cast<float>(ag::bfloat16::from_bits(piece[i]));
      done += n;
    }
  }
  // the file's pages are not needed again: let the kernel drop them as the file is read
  if (fd_.valid())
    ::posix_fadvise(fd_.get(), static_cast<off_t>(at), static_cast<off_t>(e.end - e.begin),
                    POSIX_FADV_DONTNEED);
}

ag::Tensor SafetensorsReader::read(const SafetensorsEntry& e) const {
  ag::Tensor t = ag::empty(e.shape);
  read_into(e, t.data<float>());
  return t;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       StDtype dtype, const std::map<std::string, std::string>& metadata) {
  if (dtype == StDtype::f16) throw InteropError(path + ": F16 is read here, not written");
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    const uint64_t bytes = static_cast<uint64_t>(ag::shape_numel(t.shape)) * dtype_size(dtype);
    if (header.contains(t.name))
      throw InteropError(fmt::format("{}: tensor {} given twice", path, quoted(t.name)));
    header[t.name] = {{"dtype", dtype_name(dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data region starts 8-byte aligned
  char prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  base::AtomicFileWriter out(path);
  out.write(prefix, 8);
  out.write(text.data(), text.size());
  std::vector<float> values;
  std::vector<uint16_t> narrow;
  for (const auto& t : tensors) {
    values.assign(static_cast<size_t>(ag::shape_numel(t.shape)), 0.0f);
    t.fill(values.data());
    if (dtype == StDtype::f32) {
      out.write(reinterpret_cast<const char*>(values.data()), values.size() * 4);
      continue;
    }
    narrow.resize(values.size());
    for (size_t i = 0; i < values.size(); ++i) narrow[i] = ag::bfloat16(values[i]).bits;
    out.write(reinterpret_cast<const char*>(narrow.data()), narrow.size() * 2);
  }
  out.commit();
}

}  // namespace interop
