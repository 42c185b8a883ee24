#pragma once
// GGUF v3, the container (ggml's docs/gguf.md), apart from what a model means (gguf.h): see
// interop.h for the map. Little-endian: "GGUF", version 3, tensor count, key count, the
// keys (a string, a value type, the value; arrays: element type, count, elements), the tensor
// infos (name, dims, ne[] innermost first, ggml type, offset into the data), padding to the
// alignment (general.alignment, default 32), the data. Only what a model needs is read: arrays
// of arrays are refused by name; tensors are F32, F16, BF16 or one of ggml's quantised block
// formats (autograd/quant/block_formats.h: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K,
// Q8_K), dequantized to floats as they are read.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/quant/block_formats.h"
#include "interop/float_codec.h"
#include "interop/input_bytes.h"

namespace interop::gguf {

enum ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
const char* value_type_name(uint32_t type);  // "UINT32", ...; "unknown" past FLOAT64

// ggml's float tensor types (its block formats: ag::quant::layout_of_ggml_type)
enum TensorType : uint32_t { kF32 = 0, kF16 = 1, kBF16 = 30 };

// The block format of a tensor type; null for F32, F16 and BF16.
const ag::quant::BlockLayout* block_layout(uint32_t tensor_type);
// "F32", "Q4_K", ...; "unknown" for a type neither floats nor a block format.
std::string tensor_type_name(uint32_t tensor_type);

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
inline constexpr uint32_t kVersion = 3;
inline constexpr uint64_t kDefaultAlignment = 32;

// A key's value: a scalar is an array of one (is_array false). Integers and bools are held
// in `ints` (a UINT64 as its bits), floats in `floats`, strings in `strings`.
struct Value {
  uint32_t type = kUint32;  // the element type
  bool is_array = false;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;

  static Value u32(uint32_t v);
  static Value f32(float v);
  static Value boolean(bool v);
  static Value string(std::string v);
  static Value string_array(std::vector<std::string> v);
  static Value i32_array(std::vector<int64_t> v);
  size_t count() const;  // elements
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> ne;  // ggml order: the innermost (contiguous) dimension first
  uint32_t type = kF32;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t elements() const;
  uint64_t bytes() const;  // elements * the type's size, or its blocks * a block's bytes
};

struct File {
  std::vector<std::pair<std::string, Value>> keys;  // in file order
  std::vector<TensorInfo> tensors;                  // in file order
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_start = 0;  // the data section's offset in the file (read files)
  // keys read past (HeaderFilter): how many, and the first kNamedSkips names, for notes
  uint64_t skipped_keys = 0;
  std::vector<std::string> skipped_names;

  const Value* find(const std::string& key) const;
};

// What a model reader keeps of a header: a key's value only when `key` says so, given its
// name, element type, whether it is an array and its count, before any element is read (it
// may throw to refuse a count); the others are read past, nothing of them stored (so they
// are not checked for appearing twice). `tensor` sees each tensor info, with the keys kept,
// before it is stored, and throws to refuse one the model does not have.
enum class KeyUse { keep, skip, ignore };  // skip: counted and named in notes; ignore: not
inline constexpr size_t kNamedSkips = 16;
struct HeaderFilter {
  std::function<KeyUse(const std::string& key, uint32_t type, bool is_array, uint64_t count)> key;
  std::function<void(const File& keys, const TensorInfo& tensor)> tensor;
  // What the kept keys' strings may hold in all, each counted with its std::string: a string
  // past it is refused by its key before it is allocated.
  uint64_t max_kept_string_bytes = UINT64_MAX;
};

// The header and tensor infos of a GGUF file, every count, length and offset bounded by the
// file's size before anything is allocated for it: a wrong magic or version, an unknown value
// or tensor type, a key or tensor name twice, general.alignment not a UINT32 power of two,
// more than 4 dims, tensor data outside the file, unaligned or overlapping: InteropErrors
// naming the file and the key or tensor.
File read_header(const InputBytes& in);
File read_header(const InputBytes& in, const HeaderFilter& filter);

// A tensor's elements as floats (F32, F16, BF16, and blocks dequantized; exact).
std::vector<float> read_tensor(const InputBytes& in, const File& file, const TensorInfo& t);
// count elements from element `first` on, straight into out (a MiB of the file at a time);
// for a block format, first and count whole blocks (whole rows are).
void read_tensor_into(const InputBytes& in, const File& file, const TensorInfo& t, uint64_t first,
                      uint64_t count, float* out);

// count bytes of a tensor's data from its byte `first` on, as the file holds them (a block
// format's blocks, byte for byte), straight into out; within the tensor's bytes (else a
// std::logic_error: the caller bounds them), within the file (read_header checked).
void read_tensor_bytes(const InputBytes& in, const File& file, const TensorInfo& t, uint64_t first,
                       uint64_t count, uint8_t* out);

// The stored type of a float tensor type (F32, F16, BF16).
StoredType stored_type(uint32_t tensor_type);

// Lays out the data section (each tensor's offset, aligned, in order) and writes the header,
// the infos and the padding to out; returns the data section's size. The caller then writes
// each tensor's bytes in order, each followed by write_padding.
uint64_t write_header(File& file, const ByteSink& out);
void write_padding(uint64_t written, uint64_t alignment, const ByteSink& out);

}  // namespace interop::gguf
