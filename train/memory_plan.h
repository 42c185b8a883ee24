#pragma once
// What a training run will hold in memory, estimated before step 1 so that a run that
// cannot fit is refused up front instead of being killed half-way.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "nn/footprint.h"
#include "train/config.h"

namespace train {

// What a checkpoint save holds beyond the state it writes, whatever the model's size: the
// chunk being written (at most 1 MiB), its checksummed copy, and libhdf5's caches.
inline constexpr int64_t kSaveBytes = int64_t{8} << 20;

// What the process holds besides the plan's terms, whatever the run: the program and its
// libraries, the BLAS libraries' buffers (which grow with the GEMMs' sizes) and the heap's
// slack. Measured on Zen 4 (2 vCPUs), under load: 20 MiB for a run of 60k parameters, 40-61
// MiB for runs of 25M parameters (every task, LoRA or not), hardly changed by the thread
// count.
inline constexpr int64_t kRuntimeBytes = int64_t{48} << 20;

struct MemoryPlan {
  int64_t parameters = 0, gradients = 0, optimizer = 0, activations = 0;
  int64_t weight_copies = 0;  // --precision bf16: the weights' bfloat16 copies (kept)
  // --base-precision: the frozen base's matrices held packed (in `parameters` at their
  // bytes a weight), and the scratch one of them is unpacked into for its GEMMs
  int64_t base_scratch = 0;
  std::string base_title;     // "q8_0 base 1.3 GB": what `parameters` holds packed
  int64_t data = 0;           // the larger of the two below
  int64_t data_held = 0;      // the token ids held for the run
  int64_t reading = 0;        // the text and its ids while it was read and tokenized
  int64_t gradient_sets = 1;  // the gradients and the partial sums of accumulation
  int64_t checkpoint = 0;     // a save: streamed to its file, a chunk at a time (kSaveBytes)
  int64_t runtime = 0;        // kRuntimeBytes
  int64_t available = 0;      // what the machine and our cgroup leave us, 0 when unknown
  std::string optimizer_title = "AdamW";  // whose state `optimizer` is
  // activations by term, as the model's layers declare them (nn::Footprint), for a batch
  std::vector<std::pair<std::string, int64_t>> activation_terms;
  int64_t total() const;  // saturates rather than overflows
  // what of it is tensor storage (autograd/allocator.h's cache budget): the weights, their
  // copies, gradients, optimiser state, a packed base's unpacking scratch and activations
  int64_t tensor_bytes() const;
  bool fits() const { return available == 0 || total() < available; }
  std::string describe() const;
  // The same figures in bytes, for the run record of --metrics (and the report's page).
  nlohmann::json to_json() const;
};

// Bytes, float32. Activations: what the model's layers declare that their forward keeps
// for backward, per token (model_footprint: each term named by the layer, e.g.
// "blocks.*.attn: q, k, v and output by head, log-sum-exp"), plus the largest a layer's
// backward allocates while it runs; a micro-batch's (one is in memory at a time).
// Gradients are held once
// plus floor(log2 grad_accum_steps) partial sums (grad_accumulation.h).
// data_bytes: what the caller holds for the data (see data_bytes_for_text).
// ranks > 1 (a distributed run): three more gradient-sized sets, the exchange's buffers
// (this rank's subtree sums, every rank's shards of them, the gathered sum).
// trainable: the parameters that take gradients and optimiser state (freezing.h); -1:
// all of them.
// reading_bytes: the peak of reading the data (RunData::reading_bytes), before the model
// existed; the plan's data term is the larger of it and data_bytes.
MemoryPlan plan_memory(const RunConfig& cfg, int64_t num_parameters, int64_t data_bytes = 0,
                       int ranks = 1, int64_t trainable = -1, int64_t reading_bytes = 0);

// Reading and tokenizing a text in memory, at its peak: the text and its ids. Char and
// byte ids go straight into vectors of their exact size, 2 or 4 bytes an id
// (data/prepared.cpp); BPE and GPT-2 ids grow a vector of 4-byte ids that is then split,
// which holds up to three times their bytes at once (kBpeIdBufferBytes an id).
inline constexpr int64_t kBpeIdBufferBytes = 12;
// Measured after reading: the text's bytes, its `tokens` ids of `id_bytes` each, and what
// the tokenizer type's encoding held beside them.
int64_t text_reading_bytes(int64_t text_bytes, int64_t tokens, int64_t id_bytes,
                           data::TokenizerKind tokenizer);
// Before reading (nothing known of the ids): at most one id a byte, so the text and 4 bytes
// a byte for char and byte, or kBpeIdBufferBytes a byte for bpe and gpt2.
int64_t data_bytes_for_text(int64_t text_bytes, data::TokenizerKind tokenizer);

// The footprint of a training forward of `model` (vocab_size 0: counted as 1), read off a
// shape-only description of it: nothing is allocated. bf16: as --precision bf16 runs it
// (the weights' bfloat16 copies, the GEMM inputs' rounded copies).
// batch: the sequences a step (the chunked loss's rows, nn::Footprint::batch).
nn::Footprint model_footprint(const nn::GPTConfig& model, bool bf16 = false, int64_t batch = 1,
                              bool recompute_blocks = false);

// MemAvailable from /proc/meminfo, lowered to what the process's memory cgroup (v2's
// memory.max, or v1's memory.limit_in_bytes, in the cgroup and each of its parents)
// still allows; 0 when nothing is known.
int64_t available_memory();

// The cgroup part alone, from the text of /proc/self/cgroup and a cgroup file-system
// root (normally /sys/fs/cgroup): the smallest limit minus what is in use (page cache
// that can be dropped not counted), or -1 when no limit is set. Apart for testing.
int64_t cgroup_memory_available(const std::string& proc_self_cgroup, const std::string& root);

// Address space (ulimit -v, RLIMIT_AS) is not memory, but OpenBLAS retries forever when
// its buffers cannot be mapped: a run must be refused before that. Measured here, a
// training process maps about this much per thread beyond its plan (OpenBLAS buffers,
// allocator arenas, stacks).
inline constexpr int64_t kAddressSpacePerThread = int64_t{320} << 20;

// The one memory check of every command that plans before it allocates (train's plan,
// sample's generation, attention's maps, import's plan): why `bytes` cannot be had here,
// or "" when they can. They cannot when they exceed what the machine and our cgroup leave
// (available_memory), or when ulimit -v leaves less than them plus kAddressSpacePerThread
// for each of `threads` beyond what the process maps now. The reason begins in lower case
// ("only 2.10 GB of memory is available; ...") and ends with `remedy`, what the user can
// lower; the caller says what needs the bytes and throws the error its command gives.
std::string memory_shortfall(int64_t bytes, int threads, const std::string& remedy);

std::string format_bytes(int64_t bytes);

// This process's resident memory from /proc/self/status, in MB (2^20 bytes): "VmRSS" now,
// "VmHWM" at its peak; std::runtime_error naming the line when it is missing.
double process_memory_mb(const std::string& key);

}  // namespace train
