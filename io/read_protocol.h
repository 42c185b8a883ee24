#pragma once
// What the checkpoint's writer, its sandboxed reader, the reader's stream and the builder
// agree on (internal to io/), in plain declarations that include nothing of io/: each
// section of a file described once, as rows of items (an attribute or a dataset, with its
// name, type, shape and bounds), and the events a reader tells a ReadSink, which name an
// item by its section and row. See docs/checkpoint.md#how-the-code-is-laid-out.
//
// A reader says a section as: its attributes and datasets, each by (section, row, name),
// a dataset as its dims, then its values in pieces, then its end; then end_section. The
// name is the row's own, or for a row of any name (a parameter, a buffer, a generator)
// the one the file gives.
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace io {
struct TokenizerSection;  // checkpoint.h
}  // namespace io

namespace io::detail {

// The sections of a checkpoint, in the order the writer writes them and the reader reads
// them. model and optimizer keep the numbers they had on the reader's pipe.
enum class Section : uint8_t {
  model = 0,
  optimizer = 1,
  root = 2,
  tokenizer = 3,
  rng = 4,
  best_validation = 5
};
inline constexpr size_t kSectionCount = 6;

// What reading a dataset (or meeting an object) showed: checked = a Fletcher32 checksum on
// every chunk and all of them good; unchecked = read whole, but nothing to check it against;
// failed = could not be read (a bad checksum, damage); refused = never read (links, data kept
// outside the file, ...).
enum class Verdict : uint8_t { checked = 0, unchecked = 1, failed = 2, refused = 3 };

// The declared data of a file (every dataset's elements, at least 4 bytes each) may be at
// most kMaxExpansion times its size plus kExpansionSlack: h5py's deflate of real weights
// shrinks them by a few percent to 2x, never 16x, while a file of zeros squeezed 1000:1
// would otherwise make a 1 MB file cost 1 GB.
constexpr uint64_t kMaxExpansion = 16;
constexpr uint64_t kExpansionSlack = 16 << 20;
constexpr uint64_t data_budget(uint64_t file_bytes) {
  return kMaxExpansion * file_bytes + kExpansionSlack;
}
// The config attribute (a JSON object) may hold at most this many bytes; other strings 64 KiB.
constexpr size_t kMaxConfigBytes = 16 << 20;
// Text a row does not bound otherwise.
constexpr size_t kMaxTextBytes = 64 << 10;
// HDF5's own limit on a dataset's rank.
constexpr size_t kMaxRank = 32;

// A stream no correct reader sends (values without their dataset, more of them than its
// shape holds, a second config, more data than the file could hold, ...): whoever sent it
// is not to be trusted further.
struct StreamError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ------------------------------------------------------------------ a section's items
enum class ItemKind : uint8_t { text, integer, real, dataset };
// A dataset's values as the reader sends them (whatever integer type the file stores).
// packed: a frozen weight's blocks (autograd/quant/packed_weight.h) as bytes, its dims the
// weight's [rows, width], its bytes the rows' blocks (the format, an attribute sent before
// it, says how many).
enum class DType : uint8_t { float32, uint32, uint64, packed };
constexpr size_t dtype_bytes(DType t) {
  return t == DType::packed ? 1 : t == DType::uint64 ? 8 : 4;
}
constexpr const char* dtype_name(DType t) {
  return t == DType::float32  ? "float32"
         : t == DType::uint32 ? "uint32"
         : t == DType::uint64 ? "uint64"
                              : "packed";
}

struct Item {
  const char* name;  // nullptr: any name (one item per parameter, buffer or generator)
  ItemKind kind;
  DType dtype = DType::float32;
  // Datasets: the rank (0: any up to kMaxRank) and, for each of the first two dims, its
  // only size (0: any).
  size_t rank = 0;
  uint64_t dims[2] = {0, 0};
  // Text: at most this many bytes. Datasets: at most this many rows (the first dim).
  uint64_t max_length = kMaxTextBytes;
  // Integer datasets: no value above this.
  uint64_t max_value = UINT64_MAX;
  // The values of the section's `type` attribute whose files hold it, separated by spaces
  // (nullptr: every file holding the section).
  const char* for_types = nullptr;
  // Of those, the types whose files may lack it (written when there is something to hold:
  // byte's and bpe's reserved <|endoftext|>, which files written before it lack).
  const char* optional_for = nullptr;
  // Written for a person and never read back (the rng's algorithm); its fixed text.
  const char* note = nullptr;
};

// A section's group in the file ("" for the root), whether every checkpoint holds it, and its
// items in the order written.
struct SectionLayout {
  Section section;
  const char* group;
  bool required;
  std::span<const Item> items;
};
const SectionLayout& layout(Section section);
const Item& item(Section section, size_t row);
// The row named `name` in the section (std::invalid_argument when there is none).
size_t row_of(Section section, const char* name);
// The row of any name in the section of that kind (model and optimizer tensors, generators).
size_t any_name_row(Section section, ItemKind kind);
// /model's rows of a frozen weight held as blocks: its format (text, named by the
// parameter), sent just before the dataset of its blocks.
inline constexpr size_t kPackedFormatRow = 1;
inline constexpr size_t kPackedRow = 2;
// Whether the row has a name of its own, and it is `name`.
inline bool named(const Item& it, const std::string& name) {
  return it.name && name == it.name;
}
// Whether a file whose section has type `type` holds the item.
bool held_for(const Item& item, const std::string& type);
// Whether such a file may lack it (held_for, and named in optional_for).
bool optional_for(const Item& item, const std::string& type);

// Why an event naming (section, row, name) with this shape is not one a correct reader
// sends, or "": both ends of the stream ask, the builder again before it allocates.
std::string dataset_problem(Section section, size_t row, const std::string& name,
                            const std::vector<uint64_t>& dims);
std::string attribute_problem(Section section, size_t row, const std::string& name,
                              size_t text_bytes);

// ------------------------------------------------------------------ the events
using Scalar = std::variant<std::string, int64_t, double>;

class ReadSink {
 public:
  virtual ~ReadSink() = default;
  // Work done (bytes read or decoded): a sign of life, nothing else.
  virtual void progress(uint64_t work) = 0;
  // The file cannot be read at all (not HDF5, damaged beyond opening): nothing else follows.
  virtual void fatal(const std::string& message) = 0;
  // The file is not a loadable checkpoint; what it says names the file and the object. When
  // verifying, verdicts still follow.
  virtual void load_error(const std::string& message) = 0;
  // An attribute, after the reader checked it by its row; text, integer or real as the
  // row's kind says (a defaulted root attribute the file lacks comes with its default).
  virtual void attribute(Section section, size_t row, const std::string& name,
                         const Scalar& value) = 0;
  // A dataset: its dims, then its values in pieces (`bytes` of the row's dtype, this
  // machine's byte order, any alignment), then its end.
  virtual void begin_dataset(Section section, size_t row, const std::string& name,
                             const std::vector<uint64_t>& dims) = 0;
  virtual void dataset_data(const void* values, size_t bytes) = 0;
  virtual void end_dataset() = 0;
  // Everything of the section was said (the builder checks it whole: a tokenizer is built).
  virtual void end_section(Section section) = 0;
  // One object's verdict: `path` is its full path, `why` empty for checked.
  virtual void verdict(Verdict verdict, const std::string& path, const std::string& why) = 0;
  // Everything was said.
  virtual void done() = 0;
  // Whether anything more is of use (a load that failed needs no more data).
  virtual bool wants_more() const { return true; }

  // The same events said of the sections by what they hold.
  void root_text(size_t row, const std::string& value);
  void root_integer(size_t row, int64_t value);
  // A float32 tensor of /model or /optimizer: count floats at a time.
  void begin_tensor(Section section, const std::string& name, const std::vector<uint64_t>& dims);
  void tensor_data(const void* values, size_t count) { dataset_data(values, 4 * count); }
  void end_tensor() { end_dataset(); }
  // /tokenizer whole: each item its type holds, then its end.
  void tokenizer(const TokenizerSection& tokenizer);
  // A dataset of integers sent whole.
  void integers(Section section, size_t row, const std::string& name,
                const std::vector<uint64_t>& dims, const std::vector<uint64_t>& values);
};

struct ReadRequest {
  bool load = true;       // the sections of a checkpoint
  bool verify = false;    // every dataset of the file, each with its verdict
  bool optimizer = true;  // with load: /optimizer too (sampling needs only the weights)
};

}  // namespace io::detail
