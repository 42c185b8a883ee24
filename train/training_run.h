#pragma once
// A training run as a story of short steps, each callable alone (tests drive them):
//
//   TrainingRun run(cfg, resumed);    // set-up: data, memory plan, model, optimiser, RNG
//   while (run.wants_another_step()) {
//     StepOutcome s = run.train_step();   // one optimiser step, or a stop before the update
//     if (!s.updated) break;
//     run.after_step(s);                   // evaluation, report line, periodic checkpoint
//   }
//   return run.finish();                   // final save (or rescue copy), sample
//
// Damaged data met mid-run (data::DataError reading a batch or the validation windows)
// stops it like a NaN loss, on every rank together; finish() then saves the last completed
// step (or its rescue copy), says where in one line, and returns 1.
//
// run() is that loop with the stop signals installed; run_training(cfg) is run() on a new
// TrainingRun.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "autograd/adaptive_threads.h"
#include "data/data.h"
#include "io/checkpoint.h"
#include "nn/gpt.h"
#include "optim/optim.h"
#include "train/config.h"
#include "train/grad_accumulation.h"
#include "train/grad_reduction.h"
#include "train/memory_plan.h"
#include "train/reporter.h"
#include "train/run_data.h"
#include "train/world.h"

namespace train {

struct StepOutcome {
  StepFigures figures;   // the step's loss, learning rate and gradient norm
  bool updated = false;  // false: a NaN/inf or an anomaly stopped it before the update
};

class TrainingRun;

// The sample recorded at each evaluation is at most this long (the end's is sample_tokens).
inline constexpr int64_t kEvaluationSampleTokens = 64;

// Called on rank 0 after each evaluation (final false) and once when the run ends (final
// true, also after a stop on a NaN): `train --report` writes its page from it. An exception
// it throws is printed as a warning and the run goes on.
using RunObserver = std::function<void(const TrainingRun& run, bool final)>;

class TrainingRun {
 public:
  // Trains from scratch (resumed null) or continues a loaded checkpoint. Checks the data,
  // the weights and the memory plan before anything large is allocated; prints the header.
  explicit TrainingRun(RunConfig cfg, const io::Checkpoint* resumed = nullptr,
                       RunObserver observer = {});
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  int run();  // the whole loop; returns the exit code
  bool wants_another_step() const;
  StepOutcome train_step();
  void after_step(const StepOutcome& s);
  bool stop_at_reached() const;  // --stop-at: says so
  bool max_time_reached();       // --max-time: says so (every rank agrees)
  // The shell command (quoted) that continues this run from `checkpoint` with its outputs.
  std::string continue_command(const std::string& checkpoint) const;
  int finish();  // returns the exit code

  int64_t step() const { return step_; }
  int64_t last_saved() const { return last_saved_; }
  double last_val_loss() const { return last_val_; }
  nn::GPT& model() { return *model_; }
  const nn::GPT& model() const { return *model_; }
  const RunConfig& config() const { return cfg_; }
  const RunData& data() const { return data_; }
  // This session's --metrics lines, kept in memory when there is an observer.
  const Reporter& reporter() const { return *report_; }
  // What --metrics records before the first step: the resolved config, the parameter
  // count, the memory plan, the data, the corpus baselines (built-in corpus), the time.
  nlohmann::json run_record() const;

 private:
  void load_data();
  void check_plan();
  void print_baselines();
  void notify(bool final) const;
  void restore(const io::Checkpoint& ckpt);
  void save(int64_t at, const std::string& path);
  void save_periodically();
  void save_final();
  void print_sample();
  std::string sample_text(int64_t tokens) const;
  std::string sample_text();  // at an evaluation: kEvaluationSampleTokens at most
  bool records_samples() const;
  void print_continue_command(const std::string& checkpoint) const;
  RunIdentity run_identity() const;
  void print_instruction_sample();
  void take_task_shape();
  void take_task_of(const io::Checkpoint& init);
  void evaluate_now(StepFigures& f);
  void stop_before_update(const std::string& why);
  bool stop_on_damaged_data();
  int finish_on_damaged_data();
  struct SavedTo {
    std::string path, out_error;  // --out, or a rescue copy's path and why --out failed
  };
  // Saves step_ to --out, or when that fails to a fresh rescue folder; throws when both fail.
  SavedTo save_or_rescue();
  void print_profile() const;
  double forward_backward();
  double forward_backward_distributed();
  double micro_batch(int64_t micro_batches_in_step);
  void skip_micro_batches(int64_t count);
  int64_t count_dropout_draws();
  void decide_step_kernels();
  // The run's precision for a forward and backward, with the kept weight copies
  ag::AutocastScope step_precision();
  std::vector<std::pair<std::string, std::string>> settings_every_rank_shares() const;

  RunConfig cfg_;
  const io::Checkpoint* resumed_;
  std::optional<io::Checkpoint> init_;  // --init-from, until its weights are loaded
  RunData data_;
  std::unique_ptr<nn::GPT> model_;
  // bf16: the weights' bfloat16 copies, refreshed by the optimiser (before opt_: it points
  // here); step_copies_ points at them when the optimiser keeps them, else null
  ag::Bf16WeightCopies bf16_copies_;
  ag::Bf16WeightCopies* step_copies_ = nullptr;
  std::unique_ptr<optim::Optimizer> opt_;  // the one cfg_.optimizer names
  std::unique_ptr<optim::WarmupCosineLR> schedule_;
  std::unique_ptr<data::BatchSampler> sampler_;            // task lm: windows of the text
  std::unique_ptr<data::ExampleSampler> example_sampler_;  // other tasks: examples
  std::unique_ptr<GradAccumulator> accumulator_;           // with grad_accum_steps > 1
  ag::Generator data_gen_;
  World& world_;
  std::unique_ptr<GradReducer> reducer_;  // in a distributed world
  int64_t dropout_draws_ = 0;             // per micro-batch's forward
  bool agreed_stop_ = false;              // every rank saw a stop signal's request
  std::string agreed_stop_reason_;        // the first such rank's stop_reason
  std::unique_ptr<Reporter> report_;
  RunObserver observer_;
  MemoryPlan plan_;
  nlohmann::json baselines_;  // {unigram, bigram, corpus_floor} on the built-in corpus
  std::string inject_spec_;
  int64_t inject_at_ = -1;
  int64_t step_ = 0, last_saved_ = -1, tokens_ = 0;
  double step_seconds_ = 0;    // in train_step, for --profile
  int64_t micro_batches_ = 0;  // consumed since the run began (a checkpoint's micro_batches)
  double last_val_ = NAN;
  bool failed_ = false;
  // Damaged data (an id outside the vocabulary, a token file cut short, a read error): the
  // first this rank met reading a batch, and the one the ranks agreed stops the run.
  std::string data_failure_, damaged_data_;
  struct StepStart {  // what a step that did not happen must give back
    ag::Generator::State data, dropout;
    int64_t micro_batches = 0;
  } step_start_;
  bool interrupted_ = false;  // --max-time ended it
  ag::AdaptiveThreads team_;  // fewer threads for the steps while another program holds a core
};

// Trains from scratch (resumed null) or continues a loaded checkpoint. Returns the exit
// code. SIGINT, SIGTERM, SIGHUP and SIGPIPE end the run after its step, saved. A resume
// whose cfg.stop_at is at or before the checkpoint's step trains nothing, writes nothing
// (no checkpoint, metrics or report), says so and returns 0.
int run_training(RunConfig cfg, const io::Checkpoint* resumed = nullptr, RunObserver observer = {});

}  // namespace train
