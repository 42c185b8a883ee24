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
#include "io/checkpoint.h"
#include "nn/gpt.h"
#include "optim/optim.h"
#include "train/config.h"
#include "train/freezing.h"
#include "train/memory_plan.h"
#include "train/reporter.h"
#include "train/run_data.h"
#include "train/snapshot_gate.h"
#include "train/step_engine.h"
#include "train/validation_watch.h"
#include "train/world.h"

namespace train {

struct StepOutcome {
  StepFigures figures;   // the step's loss, learning rate and gradient norm
  bool updated = false;  // false: a NaN/inf or an anomaly stopped it before the update
};

class TrainingRun;

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

  int64_t step() const { return progress_.step; }
  int64_t last_saved() const { return progress_.last_saved; }
  double last_val_loss() const { return progress_.last_val; }
  // --early-stopping, --keep-best: the best evaluation so far (none before the first).
  std::optional<io::BestValidation> best_validation() const {
    if (!watch_) return std::nullopt;
    return watch_->best();
  }
  // Why --early-stopping ended the run ("" while it goes on).
  const std::string& early_stop() const { return ending_.early_stop; }
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
  // set-up (training_run.cpp)
  void quiet_this_rank();
  std::optional<io::Checkpoint> read_init();
  void load_data(const io::Checkpoint* init);
  void take_vocabulary();
  void check_plan();
  // sequence_tokens: the longest a step runs (a task's longest example, or the context)
  void print_plan(const ParameterCounts& counts, int64_t sequence_tokens) const;
  void build_model(std::optional<io::Checkpoint> init);
  void start_engine();
  void print_baselines();
  // the schedule (run_schedule.cpp)
  bool has_validation() const;
  void plan_schedule();
  std::string schedule_text() const;
  void print_eta();
  void watch_validation(const StepFigures& f);
  void save_best();
  RunIdentity run_identity() const;
  std::vector<std::pair<std::string, std::string>> settings_every_rank_shares() const;
  // the loop
  void notify(bool final) const;
  void evaluate_now(StepFigures& f);
  void stop_before_update(const std::string& why);
  bool stopping() const;
  // saving and the finish (run_finish.cpp)
  void save(int64_t at, const std::string& path);
  void save_periodically();
  void save_final();
  struct SavedTo {
    std::string path, out_error;  // --out, or a rescue copy's path and why --out failed
  };
  // Saves step `at` to --out, or when that fails to a fresh rescue folder; throws when both
  // fail.
  SavedTo save_or_rescue(int64_t at);
  std::string saved_line(int64_t at, double seconds) const;  // "saved checkpoint ..."
  // an MPI launcher's stop (launcher_stop.cpp)
  void save_before_the_kill();
  int save_as_saver(int64_t at);
  void leave();
  int finish_on_damaged_data();
  void print_closing_sample();
  void print_continue_command(const std::string& checkpoint) const;
  void print_profile() const;

  RunConfig cfg_;
  const io::Checkpoint* resumed_;
  World& world_;
  RunData data_;
  std::unique_ptr<nn::GPT> model_;
  std::unique_ptr<StepEngine> engine_;  // the step: optimiser, batches, reduction
  std::unique_ptr<optim::WarmupCosineLR> schedule_;
  std::unique_ptr<Reporter> report_;
  std::optional<ValidationWatch> watch_;  // with --early-stopping or --keep-best
  RunObserver observer_;
  struct Setup {
    MemoryPlan plan;
    nlohmann::json baselines;  // {unigram, bigram, corpus_floor} on the built-in corpus
  } setup_;
  struct Progress {
    int64_t step = 0, last_saved = -1, tokens = 0;
    double last_val = NAN;
    double step_seconds = 0;  // in train_step, for --profile
    bool new_best = false;    // the last evaluation's metric is the best so far
  } progress_;
  struct Ending {                    // why the loop stops, and how the run ends
    bool failed = false;             // a NaN/inf or an anomaly stopped a step
    bool interrupted = false;        // --max-time ended it
    bool agreed_stop = false;        // every rank saw a stop signal's request
    std::string agreed_stop_reason;  // the first such rank's stop_reason
    // Damaged data (an id outside the vocabulary, a token file cut short, a read error)
    // that the ranks agreed stops the run.
    std::string damaged_data;
    std::string early_stop;  // why --early-stopping ended the run
  } ending_;
  ag::AdaptiveThreads team_;  // fewer threads for the steps while another program holds a core
  // Open while the run only computes: then the launcher's stop may copy its state (rank 0
  // under an MPI launcher, launcher_stop.h).
  SnapshotGate gate_;
};

// Trains from scratch (resumed null) or continues a loaded checkpoint. Returns the exit
// code. SIGINT, SIGTERM, SIGHUP and SIGPIPE end the run after its step, saved. A resume
// whose cfg.stop_at is at or before the checkpoint's step trains nothing, writes nothing
// (no checkpoint, metrics or report), says so and returns 0.
int run_training(RunConfig cfg, const io::Checkpoint* resumed = nullptr, RunObserver observer = {});

}  // namespace train
