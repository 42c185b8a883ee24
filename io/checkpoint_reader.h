#pragma once
// The one place that parses a checkpoint with libhdf5 (internal to io/; checkpoint.h is the
// public map). It runs in a forked child (read_child.h) so that a crash or a hang of the
// library on a hostile file costs the child, not the program; what it finds goes to a
// ReadSink: in the child, one that sends it to the parent over a pipe; in the parent (and
// when the child is skipped), the CheckpointBuilder that assembles it.
//
// Before any data is read, every link of every group is checked to be a hard link and every
// dataset to keep its data in the file (no external storage, no virtual layout, no filter
// but deflate, shuffle and Fletcher32) and to store what it declares, so a file can neither
// point outside itself nor make the reader allocate far more than its size.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace io {
struct TokenizerSection;  // checkpoint.h
}  // namespace io

namespace io::detail {

enum class Section : uint8_t { model = 0, optimizer = 1 };
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
  // Root attribute `row` of kRootAttributes (root_attributes.h), text or integer as its row
  // says, after the reader checked it; a defaulted row the file lacks comes with its default.
  virtual void root_text(size_t row, const std::string& value) = 0;
  virtual void root_integer(size_t row, int64_t value) = 0;
  // A float32 tensor: its dims, then its values in row-major pieces (count floats in this
  // machine's byte order, at any alignment), then its end.
  virtual void begin_tensor(Section section, const std::string& name,
                            const std::vector<uint64_t>& dims) = 0;
  virtual void tensor_data(const void* values, size_t count) = 0;
  virtual void end_tensor() = 0;
  virtual void optimizer(const std::string& type) = 0;
  virtual void optimizer_scalar(const std::string& key, double value) = 0;
  // /tokenizer: its type and what rebuilds it (a char vocabulary; bpe merges and pattern).
  virtual void tokenizer(const TokenizerSection& tokenizer) = 0;
  virtual void rng(const std::string& name, const std::array<uint64_t, 4>& words) = 0;
  // One object's verdict: `path` is its full path, `why` empty for checked.
  virtual void verdict(Verdict verdict, const std::string& path, const std::string& why) = 0;
  // Everything was said.
  virtual void done() = 0;
  // Whether anything more is of use (a load that failed needs no more data).
  virtual bool wants_more() const { return true; }
};

struct ReadRequest {
  bool load = true;       // the sections of a checkpoint
  bool verify = false;    // every dataset of the file, each with its verdict
  bool optimizer = true;  // with load: /optimizer too (sampling needs only the weights)
};

// Reads bytes as the checkpoint `source` (the name its messages use) and tells sink what it
// finds, ending with done(). Problems with the file go to the sink, not out as exceptions.
void read_checkpoint_image(std::string_view bytes, const std::string& source, ReadRequest request,
                           ReadSink& sink);

// Text from a file, safe to put in a message: the bytes of characters that act on a terminal
// (base::acts_on_terminal: controls, whose escape sequences could rewrite it, and
// bidirectional overrides) and bytes that are not UTF-8 (base::utf8_char) become \xNN.
std::string printable(const std::string& text);

}  // namespace io::detail
