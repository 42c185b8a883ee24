#pragma once
// HDF5 checkpoints as ../shared/spec/checkpoint.md defines them: the map of io/.
//
//   io::Checkpoint c;
//   c.config = run_config_json;  c.step = 1000;  c.model = model.named_parameters();
//   io::save_checkpoint("run.h5", c);          // temp file, fsync, rename: atomic
//   io::Checkpoint back = io::load_checkpoint("run.h5");
//   io::load_model_weights(back, model);       // every name and shape checked first
//
// Layout: root attributes `format`, `format_version`, `config` (JSON), `step`; /model
// (float32, one dataset per parameter), /optimizer (sub-groups per buffer, attributes for
// its scalars), /tokenizer (attribute `type`, dataset `vocab`), /rng (uint64[4] per
// generator). Every dataset that can be chunked carries HDF5's Fletcher32 checksum, so a
// flipped bit is found on load; verify_checkpoint reads everything and names each failure.
// Every error names the file and the part of it that is wrong.
#include <nlohmann/json.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "autograd/generator.h"
#include "nn/module.h"

namespace io {

// A problem with a checkpoint file: its message names the file and what is wrong.
struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct OptimizerSection {
  std::string type;                                     // "adamw", "sgd", ...
  std::vector<std::pair<std::string, double>> scalars;  // hyperparameters, lr, step
  nn::StateDict tensors;                                // "m/<param name>", "v/<param name>"
};

struct TokenizerSection {
  std::string type;             // "char", "byte", or "none" (a gradient dump)
  std::vector<uint32_t> vocab;  // char: the code points in id order
};

struct Checkpoint {
  nlohmann::json config = nlohmann::json::object();
  int64_t step = 0;
  nn::StateDict model;
  std::optional<OptimizerSection> optimizer;  // absent in weights-only files
  TokenizerSection tokenizer;
  std::vector<std::pair<std::string, ag::Generator::State>> rng;
  std::string source;  // the file it was read from, for messages
};

constexpr const char* kFormatName = "attograd-checkpoint";
constexpr int64_t kFormatVersion = 1;

// Writes to a temporary file beside `path`, fsyncs it, renames it over `path` and
// fsyncs the folder: `path` is either the old file or the whole new one. On failure
// (unwritable folder, full disk) the temporary file is removed, `path` is untouched and
// a CheckpointError says why.
void save_checkpoint(const std::string& path, const Checkpoint& ckpt);

// Reads and checks a checkpoint: not HDF5, truncated, foreign (no `format`), a wrong
// version, bad JSON, a failed checksum, a non-float weight or a malformed section are
// CheckpointErrors naming the file and the object.
Checkpoint load_checkpoint(const std::string& path);
// The same from bytes in memory (`source` names them in messages).
Checkpoint load_checkpoint_image(const std::string& bytes, const std::string& source);

// Copies the checkpoint's /model into the module: every parameter present with its exact
// shape and nothing else, or a CheckpointError naming the first offending entry (the
// module is left untouched).
void load_model_weights(const Checkpoint& ckpt, nn::Module& model);

struct VerifyReport {
  std::vector<std::string> checked;   // every dataset read, by full path
  std::vector<std::string> failures;  // "<dataset>: <why>"
};
// Reads every dataset of the file; a dataset whose checksum fails (or that cannot be
// read) is a failure listed by name. Throws only when the file cannot be opened at all.
VerifyReport verify_checkpoint(const std::string& path);

}  // namespace io
