#pragma once
// safetensors, the format of Hugging Face's model.safetensors: 8 bytes (little-endian
// uint64 N), N bytes of JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]},
// "__metadata__": {string: string}}, then the data region the offsets point into.
//
//   interop::SafetensorsReader in("model.safetensors");   // header streamed and checked
//   for (const auto& e : in.entries()) { ag::Tensor t = in.read(e); ... }   // float32
//
//   std::vector<interop::SafetensorsTensor> out = {{"wte.weight", {V, d}, fill_wte}};
//   interop::write_safetensors("model.safetensors", out, interop::StoredType::bf16);
//
// The file is hostile until checked: before anything is allocated from it, its header length
// is bounded (kMaxSafetensorsHeader, and within the file), and every entry is held to the
// rules: a dtype of the format's (kSafetensorsDtypes), a shape whose element count times
// the dtype's size is exactly its byte range, ranges inside the data region that neither
// overlap nor leave a gap (every byte belongs to exactly one tensor), no name twice,
// __metadata__ strings only. Errors are InteropErrors naming the file and the tensor or field.
// Tensors are read with pread straight into their float32 tensor (F16, BF16, F8 widened
// exactly, F64 rounded to nearest), so reading a file costs its float32 tensors and no second
// copy of it. A header may name any of the format's dtypes (a GPT-2 file converted from an
// old checkpoint carries its causal-mask buffers as BOOL or U8): only reading a tensor of a
// dtype that holds no weights (integers, booleans, complex, F4/F6/E8M0) is refused, naming
// the tensor and its dtype, so an importer that drops such a tensor never meets it.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/tensor.h"
#include "interop/float_codec.h"
#include "interop/input_bytes.h"

namespace interop {

inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;  // bytes of JSON
inline constexpr size_t kMaxSafetensorsRank = 8;
// No tensor name or metadata value comes near it; a longer string is refused while it is
// read, so the header's text is never in memory whole, even as one string.
inline constexpr size_t kMaxSafetensorsString = size_t{1} << 20;

// safetensors' name of an element type: "F32", "F16", "BF16"
const char* dtype_name(StoredType d);

// One element type the format names (safetensors' Dtype): its name, its size in bits, and
// how n elements of it become float32 weights (nullptr: a tensor of it holds none).
struct SafetensorsDtype {
  const char* name;
  uint32_t bits;
  void (*widen)(const char* src, uint64_t n, float* dst);
};
// Every dtype safetensors defines (as of its 0.6 release), in one table.
const std::vector<SafetensorsDtype>& safetensors_dtypes();

struct SafetensorsEntry {
  std::string name;
  const SafetensorsDtype* dtype = nullptr;  // a row of safetensors_dtypes()
  ag::Shape shape;
  uint64_t begin = 0, end = 0;  // byte range within the data region
};

class SafetensorsReader {
 public:
  // Called with each tensor's name as the header is read, before its entry is stored: it
  // throws to refuse a tensor its caller has no use for, so a header of a million entries
  // costs nothing but its first unwanted one.
  using Filter = std::function<void(const std::string& name)>;

  // Opens a regular file (a FIFO or a device is refused before it is opened) and checks its
  // header, streamed a MiB at a time (json_stream.h), never held whole; source is how
  // messages name it. __metadata__ is checked (strings) and kept only when keep_metadata.
  explicit SafetensorsReader(const std::string& path, const Filter& filter = {},
                             bool keep_metadata = true);
  // The same over bytes in memory (tests, the fuzz target).
  static SafetensorsReader from_bytes(std::string bytes, const std::string& source);

  const std::string& source() const { return in_.source(); }
  // In the order of their bytes in the file.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const SafetensorsEntry* find(const std::string& name) const;  // nullptr when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  uint64_t file_size() const { return in_.size(); }

  // The tensor's values as float32 into out (numel floats); a dtype that holds no weights
  // (BOOL, I64, ...), a read error or a file that shrank since it was opened is an
  // InteropError naming the tensor.
  void read_into(const SafetensorsEntry& e, float* out) const;
  ag::Tensor read(const SafetensorsEntry& e) const;

 private:
  SafetensorsReader(InputBytes in, const Filter& filter, bool keep_metadata);

  InputBytes in_;
  uint64_t data_start_ = 0;  // 8 + header length
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> by_name_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: its name, shape and a function that fills numel float32 values in
// row-major order (called once, when its bytes are written), or the values themselves
// (`values`, numel floats that outlive the write: written from where they are, no copy).
struct SafetensorsTensor {
  std::string name;
  ag::Shape shape;
  std::function<void(float*)> fill;
  const float* values = nullptr;
};

// Writes the tensors in the order given (the header's keys sorted, as JSON objects are
// here), as F32, F16 or BF16 (round to nearest even), the header padded with spaces to a multiple
// of 8 bytes as the format allows, streamed tensor by tensor into a temporary file put in
// place at the end (base::write_file_atomically): memory is the largest tensor, never the file.
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       StoredType dtype, const std::map<std::string, std::string>& metadata = {});

}  // namespace interop
