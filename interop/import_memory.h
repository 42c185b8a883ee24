#pragma once
// What an import holds at its peak, planned from the model's config before any tensor is
// read (see interop.h for the map), and checked as `sample` checks its generation: against
// the memory the machine and our cgroup leave and ulimit -v (train::memory_shortfall).
// Every reader keeps only what the checkpoint will hold (the weights as float32, the
// tokenizer), reads a tensor at most a MiB of the file at a time, and converts a layout
// through at most one tensor's copy; the rest is bounded whatever the file holds.
#include <cstdint>
#include <string>

#include "nn/config.h"

namespace interop {

// Beyond the weights: the readers' buffers, one kept JSON value at a time or a GGUF file's
// kept keys (their strings at most 128 MiB in all, a tokenizer's arrays at most 2^20
// entries), the checkpoint save's piece (train::kSaveBytes), the program itself.
inline constexpr int64_t kImportOverheadBytes = int64_t{128} << 20;

// What each parameter tensor holds beside its values while an import runs: its tensor and
// module objects and the checkpoint save's record of its dataset. Measured: a GPT-2 of 16384
// layers of width 4 (196,610 tensors of 16 MB of weights) peaked at 349 MB, 1.7 KB a tensor.
inline constexpr int64_t kImportBytesPerTensor = int64_t{2} << 10;

struct ImportPlan {
  int64_t weights = 0;    // every parameter as float32: what the checkpoint holds
  int64_t tensors = 0;    // kImportBytesPerTensor for each parameter tensor
  int64_t transient = 0;  // the largest projection once more, while its layout is converted
  int64_t tokenizer = 0;  // a tokenizer folder's files, read and rebuilt (tokenizer_files.h)
  int64_t overhead = kImportOverheadBytes;
  int64_t total() const;  // saturates rather than overflows
};

// tokenizer_bytes: what reading the tokenizer's files holds (tokenizer_folder_bytes).
ImportPlan plan_import(const nn::GPTConfig& config, int64_t tokenizer_bytes = 0);

// Throws InteropError "SOURCE: importing it needs about ... (figures): only ... of memory is
// available; import a smaller model" when the plan exceeds the available memory or the
// address-space limit: train::memory_shortfall, the check train and sample make.
void check_import_memory(const ImportPlan& plan, const std::string& source);
void check_import_memory(const nn::GPTConfig& config, const std::string& source,
                         int64_t tokenizer_bytes = 0);

}  // namespace interop
