#pragma once
// A training run's whole configuration: the model of docs/model.md plus data,
// optimiser, schedule and run settings. It is what the command line and config files
// fill in, and what a checkpoint stores as its `config` JSON (model keys at top level).
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/quant/packed_weight.h"
#include "base/choice.h"
#include "data/chat_format.h"
#include "data/tokenizer.h"
#include "nn/gpt.h"
#include "optim/registry.h"
#include "train/reduction.h"

namespace train {

class Task;  // task.h

// A run's task by its registry row (task.h): copied and compared as a value.
class TaskHandle {
 public:
  TaskHandle();  // lm: next-token prediction on text
  explicit TaskHandle(const Task& task) : task_(&task) {}
  const Task& operator*() const { return *task_; }
  const Task* operator->() const { return task_; }
  const char* name() const;
  bool operator==(const TaskHandle&) const = default;

 private:
  const Task* task_;
};

// Micro-batches per step: far beyond any use (a million), small enough that counts of
// tokens and micro-batches never overflow.
inline constexpr int64_t kMaxGradAccumSteps = int64_t{1} << 20;

// Gradient bucket size in MB for data-parallel runs (see grad_reduction.h): measured with
// `attograd bench --config base` under mpirun -np 2, see docs/distributed.md.
inline constexpr int64_t kDefaultBucketMb = 4;

// The most threads a command may ask for: each thread holds its own scratch (the
// decoder's, the kernels'), so that a count from a typo must be refused, not allocated.
inline constexpr int kMaxThreads = 256;

// The most stop ids a config may hold (Llama 3.1's generation_config.json lists three).
inline constexpr size_t kMaxStopTokenIds = 64;

// Linear warm-up steps unless asked: a run of under 300 steps warms up for a tenth of them.
inline constexpr int64_t kDefaultWarmupSteps = 30;

struct RunConfig {
  nn::GPTConfig model = [] {  // docs/model.md's defaults, with vocab_size 0: "from the tokenizer"
    nn::GPTConfig m;
    m.vocab_size = 0;
    return m;
  }();
  // data
  std::string data;  // a UTF-8 text file or a prepared folder; empty: the built-in corpus
  double val_fraction = 0.1;
  // char | byte | bpe (learns model.vocab_size tokens) | gpt2 (from a checkpoint or a folder)
  data::TokenizerKind tokenizer = data::TokenizerKind::chars;
  uint64_t corpus_seed = 0;  // the built-in corpus's generator seed
  // what the model is trained to do (task.h; docs/finetuning.md): lm, next-token prediction
  // on text, unless a fine-tuning task is named
  TaskHandle task;
  std::vector<std::string> labels;  // classify: the labels, sorted (index = class id)
  std::string prompt_template;      // instruct: the template's text; empty: Alpaca's
  std::string template_file;        // instruct: read into prompt_template (not stored)
  bool no_truncate = false;         // a record longer than the context is an error, not cut
  // How the model's conversations are written (data/chat_format.h): named by --chat-format,
  // or found by `import` in tokenizer_config.json's chat_template; task chat's default is
  // chatml. Kept by a fine-tuning from the checkpoint unless named.
  std::optional<data::ChatFormat> chat_format;
  // Ids that end a reply besides the format's end of turn (an import's generation_config.json
  // eos_token_id list).
  std::vector<int64_t> stop_token_ids;
  // optimisation
  int64_t steps = 2000;  // about a minute for the default model on 2 cores
  // passes over the training examples (a text's windows) instead of `steps`: 0, not given;
  // TrainingRun sets steps from it once the data is known (epoch_steps)
  int64_t epochs = 0;
  int64_t batch_size = 16;       // sequences per micro-batch
  int64_t grad_accum_steps = 1;  // micro-batches per optimiser step (see grad_accumulation.h)
  double lr = 1e-3;
  double min_lr = -1;                // negative means lr / 10
  int64_t warmup_steps = -1;         // negative: kDefaultWarmupSteps, at most a tenth of the steps
  optim::OptimizerConfig optimizer;  // adamw unless named (optim/registry.h)
  double grad_clip = 1.0;
  // run
  uint64_t seed = 1337;
  std::string out = "attograd.h5";
  int64_t eval_interval = 250;      // 0: only at the end
  int64_t checkpoint_interval = 0;  // 0: only at the end (and on SIGINT/SIGTERM)
  int64_t log_interval = 50;
  int64_t eval_windows = 0;  // cap on validation windows per evaluation; 0: all
  // stop when the validation metric has not improved for this many evaluations (0: never)
  int64_t early_stopping = 0;
  bool keep_best = false;     // the best evaluation's checkpoint kept at best_out()
  std::string metrics;        // JSON-lines file; empty: none
  std::string report;         // HTML page refreshed at each evaluation; empty: none
  std::string report_prompt;  // the text of its attention maps; empty: the start of val
  int threads = ag::kDefaultThreads;
  ag::Precision precision = ag::Precision::fp32;  // bf16: autocast (bfloat16 GEMMs, float32 rest)
  // How the frozen base weights are held (nn/frozen_base.h): float32, or packed as
  // bfloat16 or blocks; not fp32 only where something is frozen (LoRA, freeze)
  ag::quant::BasePrecision base_precision = ag::quant::BasePrecision::fp32;
  int64_t bucket_mb = kDefaultBucketMb;  // gradient buckets of a distributed run
  bool profile = false;                  // where a step's time goes, printed at the end
  // each block's activations recomputed in backward (nn::GPT::set_activation_checkpointing):
  // the same bits, less memory, a second forward; a setting of the machine, not stored
  bool checkpoint_activations = false;
  Reduction reduce = Reduction::tree;
  int64_t sample_tokens = 200;  // sample printed at the end
  std::string init_from;        // start from this checkpoint's weights
  // Comma-separated fnmatch patterns over parameter names: those parameters are frozen
  // (train/freezing.h); with model.lora_rank > 0 every base weight is frozen besides.
  std::string freeze;
  // with init_from: the model keys and the tokenizer (keys_an_init_decides) the command line
  // (or a config file) set; the others are the checkpoint's (take_model_of). Not stored in
  // a checkpoint.
  std::vector<std::string> model_keys_given;
  // under base_precision own, the --init-from (or resumed) file's matrices held as blocks
  // (or bfloat16), by name, their format's name (io::Checkpoint::packed), so that the
  // memory plan counts them as held. Not stored in a checkpoint (the one the run writes
  // records its own).
  std::map<std::string, std::string> file_packed;
  bool detect_anomaly = false;  // check every op for NaN/inf (autograd/anomaly.h)
  std::string inject_nan;       // fault injection: PHASE:MODULE[@STEP]
  int64_t stop_at = 0;          // end this invocation after this step (0: at steps);
                                // the schedule still spans `steps`, so resume continues
  // Not stored in the config (the checkpoint keeps the name as its own root attribute):
  std::string name;        // the run's name in reports; empty: a resume's, else from `out`
  bool overwrite = false;  // train: replace another run's --out and --metrics files
  double max_time = 0;     // end this invocation, saved, after this many seconds (0: never)
  std::string program = "attograd";  // how this program was invoked, for the resume command

  int64_t effective_batch() const { return batch_size * grad_accum_steps; }
  double effective_min_lr() const { return min_lr >= 0 ? min_lr : lr / 10; }
  // The warm-up asked for, or the default capped at a tenth of the run.
  int64_t effective_warmup() const {
    return warmup_steps >= 0 ? warmup_steps : std::min(kDefaultWarmupSteps, steps / 10);
  }
  // --keep-best's checkpoint: out's name with ".best" before its extension ("ft.best.h5").
  std::string best_out() const;
  // Throws std::invalid_argument naming the first out-of-range value.
  void validate() const;
  nlohmann::json to_json() const;
  // Keys it does not know are ignored (a checkpoint exported elsewhere may carry more).
  static RunConfig from_json(const nlohmann::json& j);
};

}  // namespace train

template <>
struct base::ChoiceNames<ag::Precision> {
  static constexpr const char* key = "precision";
  static constexpr std::array<std::pair<ag::Precision, const char*>, 2> rows = {
      {{ag::Precision::fp32, "fp32"}, {ag::Precision::bf16, "bf16"}}};
};

template <>
struct base::ChoiceNames<ag::quant::BasePrecision> {
  static constexpr const char* key = "base_precision";
  static constexpr std::array<std::pair<ag::quant::BasePrecision, const char*>, 11> rows = {
      {{ag::quant::BasePrecision::fp32, "fp32"},
       {ag::quant::BasePrecision::bf16, "bf16"},
       {ag::quant::BasePrecision::q8_0, "q8_0"},
       {ag::quant::BasePrecision::q4_k, "q4_k"},
       {ag::quant::BasePrecision::q4_0, "q4_0"},
       {ag::quant::BasePrecision::q4_1, "q4_1"},
       {ag::quant::BasePrecision::q5_0, "q5_0"},
       {ag::quant::BasePrecision::q5_1, "q5_1"},
       {ag::quant::BasePrecision::q5_k, "q5_k"},
       {ag::quant::BasePrecision::q6_k, "q6_k"},
       {ag::quant::BasePrecision::own, "own"}}};
};

// A task formats as its name.
template <>
struct fmt::formatter<train::TaskHandle> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const train::TaskHandle& task, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(task.name(), ctx);
  }
};
