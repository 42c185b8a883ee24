#pragma once
// HDF5 checkpoints as docs/checkpoint.md defines them: the map of io/, the
// library of what attograd reads and writes. Beside the checkpoints: files.h (the outputs of a
// run, written safely over base/posix_file.h and base/atomic_file.h; one writer per output,
// under a lock file only this run creates and writes), output_rule.h (the one rule every
// command that writes follows: no input replaced, nothing replaced without --overwrite,
// locked, nothing partial left) and history.h (the run's metrics table a checkpoint keeps). The
// report's pages and pictures are in report/.
//
//   io::Checkpoint c;
//   c.config = run_config_json;  c.step = 1000;  c.model = model.named_parameters();
//   io::save_checkpoint("run.h5", c);          // temp file, fsync, rename: atomic; streamed
//   io::Checkpoint back = io::load_checkpoint("run.h5");
//   io::load_model_weights(back, model);       // every name and shape checked first
//
// Layout: root attributes `format`, `format_version`, `config` (JSON), `step`,
// `data_identity`, `micro_batches`, `run_id`, `run_name`, `history` (the metrics table,
// history.h) (one table, root_attributes.h, with their bounds); /model (float32, one
// dataset per parameter), /optimizer (sub-groups per buffer, attributes for its scalars),
// /tokenizer (attribute `type`; char: dataset `vocab`; bpe: dataset `merges`
// [M, 2] uint32 and attribute `split_pattern`; byte and bpe: `special_tokens`
// ["<|endoftext|>"] when reserved (absent in files written before); gpt2: those, dataset
// `byte_order` [256] and attribute `special_tokens`, a JSON array of strings; hf: `merges`,
// `split_pattern`, datasets `token_bytes` and `token_ends`, attribute `hf_settings`), /rng
// (uint64[4] per generator), /best_validation (attributes `metric`, `value`, `step`,
// `evaluations_since`). Every dataset that can be chunked carries HDF5's Fletcher32 checksum, so a
// flipped bit is found on load; verify_checkpoint reads everything and names each failure. Every
// error names the file and the part of it that is wrong.
//
// Each section (the root attributes, /model, /optimizer, /tokenizer, /rng) is described once,
// as rows of items with their bounds: read_protocol.h declares the layout and the reader's
// events, sections.cpp holds the rows (the root's are root_attributes.h's table). The writer
// (checkpoint.cpp) writes a section's rows in order, the reader (checkpoint_reader.cpp, in
// the forked child) reads and bounds them by their rows and tells a ReadSink each item by
// (section, row, name), the stream (read_frames.cpp) carries and checks them by row, and the
// builder (checkpoint_builder.cpp) checks them again and fills the Checkpoint; a section of
// items alone (/rng) is walked by all of them through its row in item_sections.h. Headers
// include read_protocol.h, never each other in a circle. Adding a section:
// docs/checkpoint.md#adding-a-section.
//
// A checkpoint is data from elsewhere, read as if hostile:
// - It is parsed once, by libhdf5 in a forked child that streams what it reads to this
//   process over a pipe; this process never runs libhdf5 on the file's bytes and checks
//   every frame it receives. A crash of the library there is reported as a damaged file,
//   and so is a child that makes no progress (no bytes read or decoded) for 3 s of its own
//   CPU time, or for 60 s of wall time: a large file on a slow or throttled machine keeps
//   making progress and is never called damaged. ATTOGRAD_NO_PROBE_READ=1 parses in this
//   process instead (under a debugger).
// - Data only: a soft, external or user-defined link anywhere in the file, a dataset with
//   external storage or a virtual layout, or a filter other than deflate, shuffle and
//   Fletcher32, is refused by name before anything is read through it.
// - Bounded: every dataset must store what it declares (no 40 GB of fill values from a
//   4 KB file), and all datasets together may declare at most 16 times the file's size plus
//   16 MiB; the config attribute is at most 16 MiB of JSON nested at most 8 deep
//   (base/json.h), no key twice.
// - NaN or infinite values in /model or /optimizer are refused by name (LoadOptions lets
//   `inspect` show them with a warning instead), and so is optimiser state no optimiser
//   could take (optim::check_state_values: a negative second moment, a step count that is
//   not a whole number >= 0).
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "autograd/generator.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace io {

// A problem with a checkpoint file: its message names the file and what is wrong.
struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A checkpoint that could not be written (a full disk, the rename): the machine's failure,
// not the file's (the command line's exit 1, not 2: docs/exit-codes.md).
struct CheckpointWriteError : CheckpointError {
  using CheckpointError::CheckpointError;
};

struct TokenizerSection {
  std::string type;             // "char", "byte", "bpe", "gpt2", "hf", or "none" (a gradient dump)
  std::vector<uint32_t> vocab;  // char: the code points in id order
  // bpe: merge i makes token 256 + i from the pair (left, right) of earlier tokens, within
  // the pieces the split pattern (PCRE2) cuts the text into
  // (gpt2 too, in its own ids: merge i makes token 256 + i)
  std::vector<std::pair<uint32_t, uint32_t>> merges;
  std::string split_pattern;
  // gpt2 (data::Gpt2Tokenizer): the byte each of ids 0-255 stands for, and the special
  // tokens' texts (ids 256 + M onwards); byte and bpe: ["<|endoftext|>"] when reserved
  std::vector<uint32_t> byte_order;
  std::vector<std::string> special_tokens;
  // hf (data::HfBpeTokenizer, a tokenizer.json's): every id's bytes, one after another, and
  // where each ends; the rest of its spec as data::hf_settings_json. Its merges are pairs of
  // its ids, each making the token of their joined bytes.
  std::string token_bytes;
  std::vector<uint32_t> token_ends;
  std::string hf_settings;
};

// The best validation figure of a run so far, for --early-stopping and --keep-best: the
// metric's name as --metrics writes it, its value, the evaluation's step and how many
// evaluations since then did not improve on it.
struct BestValidation {
  std::string metric;
  double value = NAN;
  int64_t step = 0;
  int64_t evaluations_since = 0;
  bool operator==(const BestValidation&) const = default;
};

struct Checkpoint {
  nlohmann::json config = nlohmann::json::object();
  int64_t step = 0;
  nn::StateDict model;
  std::optional<optim::OptimizerState> optimizer;  // absent in weights-only files
  TokenizerSection tokenizer;
  std::vector<std::pair<std::string, ag::Generator::State>> rng;
  std::string data_identity;  // root attribute: what the run trained on ("" when unknown)
  // root attribute: micro-batches consumed over all processes (-1: not recorded, as in a
  // file from elsewhere); at least `step` when recorded
  int64_t micro_batches = -1;
  // root attributes of a training run (absent in files from elsewhere): the run's identity
  // (drawn when it started, kept by resume), its name (train --name) and its metrics table
  // (io/history.h: validated on load; read it with io::parse_history)
  std::string run_id, run_name, history;
  // /best_validation: absent unless the run stops early or keeps its best checkpoint
  std::optional<BestValidation> best_validation;
  // /model's datasets the file holds as blocks (docs/checkpoint.md, "A frozen base held as
  // blocks"): parameter name -> format ("q4_k"); in `model` as packed tensors with
  // LoadOptions::keep_packed, else as their dequantized float32 values
  std::map<std::string, std::string> packed;
  std::string source;                 // the file it was read from, for messages
  std::vector<std::string> warnings;  // what LoadOptions let through, one message each
};

// A gradient dump (`eval --dump-grads`, train/evaluate.cpp) has a checkpoint's layout but
// its /model holds d loss / d parameter, not weights: its config's "contents" says so (and
// its tokenizer is "none"). Commands that need a model refuse one by name.
constexpr const char* kGradientDumpContents = "gradients of the evaluation loss";
bool is_gradient_dump(const Checkpoint& ckpt);

struct LoadOptions {
  // NaN or infinite values in /model or /optimizer: refused (a CheckpointError naming the
  // dataset, the counts and the first position), or, when true, loaded with that message in
  // Checkpoint::warnings (for `inspect`, to show such a file).
  bool allow_non_finite = false;
  // Only what a model needs (the root, /model, /tokenizer, /rng): /optimizer, twice the
  // weights in a training checkpoint, is neither read nor held (sample, eval).
  bool weights_only = false;
  // Tensors of the caller's (a model's parameters) that /model's datasets of the same name,
  // shape and dtype are read straight into, instead of into tensors of their own: a run
  // starting from a checkpoint's weights (--init-from) holds them once, not twice. The
  // Checkpoint's /model entries are then those very tensors. A load that fails part-way
  // leaves them partly written.
  const nn::StateDict* into = nullptr;
  // /model's datasets of blocks (a frozen base held packed) kept as packed tensors
  // (autograd/quant/packed_weight.h: the blocks as they are, for a run that holds them so),
  // instead of dequantized to float32 (what every reader of weights takes; then `into`
  // takes them as it takes floats).
  bool keep_packed = false;
};

constexpr const char* kFormatName = "attograd-checkpoint";
constexpr int64_t kFormatVersion = 1;

// Writes to a temporary file beside `path` (streamed from the tensors a chunk at a time:
// nothing of the state is copied), fsyncs it, renames it over `path` and fsyncs the folder:
// `path` is either the old file or the whole new one. On failure
// (unwritable folder, full disk) the temporary file is removed, `path` is untouched and
// a CheckpointError says why.
void save_checkpoint(const std::string& path, const Checkpoint& ckpt);
// The bytes save_checkpoint writes, built in memory instead (tests compare the two).
std::string checkpoint_image(const Checkpoint& ckpt);

// Reads and checks a checkpoint: not HDF5, truncated, foreign (no `format`), a wrong
// version, bad JSON, a failed checksum, a non-float weight, a malformed section, anything
// that points outside the file or declares more than it stores, NaN or infinite weights
// (unless options allow them): CheckpointErrors naming the file and the object. Anything
// that is not a regular file (a FIFO, a device) is refused without being read.
Checkpoint load_checkpoint(const std::string& path, const LoadOptions& options = {});
// The same from bytes in memory (`source` names them in messages).
Checkpoint load_checkpoint_image(const std::string& bytes, const std::string& source,
                                 const LoadOptions& options = {});
// The same parse run in this process, with no child: a crash of libhdf5 on a hostile file
// crashes the caller. For the fuzzer (so that it sees our reading code) and for debugging.
Checkpoint parse_checkpoint_in_process(const std::string& bytes, const std::string& source,
                                       const LoadOptions& options = {});

// Copies the checkpoint's /model into the module: every parameter present with its exact
// shape and nothing else, or a CheckpointError naming the first offending entry (the
// module is left untouched).
void load_model_weights(const Checkpoint& ckpt, nn::Module& model);

// What reading every dataset of a file showed. Paths are full ("/model/ln_f.bias"); the
// entries of the last three lists are "<path>: <why>".
struct VerifyReport {
  std::vector<std::string> checked;    // a Fletcher32 checksum on every chunk, all good
  std::vector<std::string> failures;   // could not be read: a failed checksum, damage
  std::vector<std::string> unchecked;  // read whole, but with nothing to check it against: no
                                       // checksum (h5py's contiguous datasets), a scalar, empty
  std::vector<std::string> refused;    // never read: links, external or virtual storage, an
                                       // unknown filter, data the file does not store
  size_t datasets() const { return checked.size() + failures.size() + unchecked.size(); }
  // Only then may anyone say "all checksums good".
  bool all_checked() const { return failures.empty() && unchecked.empty() && refused.empty(); }
};
// Reads every dataset of the file (in the child, in pieces) and gives each its verdict.
// Throws only when the file cannot be read at all (missing, not HDF5, crashes the library).
VerifyReport verify_checkpoint(const std::string& path);

// `inspect --verify` in one pass: the verdicts, and the checkpoint (as load_checkpoint with
// options would return it) or why it does not load.
struct Inspection {
  VerifyReport report;
  std::optional<Checkpoint> checkpoint;  // absent when it does not load
  std::string load_error;                // then: the message load_checkpoint would throw
};
Inspection inspect_checkpoint(const std::string& path, const LoadOptions& options = {});

}  // namespace io
