#pragma once
// One optimiser step of a run, apart from the story around it (training_run.h):
//
//   StepEngine engine(cfg, model, world, data);   // optimiser, bf16 copies, batches
//   engine.restore(checkpoint);                    // a resume: optimiser state, generators
//   engine.decide_kernels();                       // rank 0 times a step's GEMMs
//   engine.start_reduction();                      // under mpirun: buckets, dropout draws
//   StepResult r = engine.step(step, lr);          // micro-batches, reduction, clip, update
//
// A step draws its micro-batches from the task's batch source with the data generator,
// runs forward and backward in the run's precision (bf16: the weights' kept bfloat16
// copies), sums the micro-batches' gradients in a fixed tree (grad_accumulation.h) that
// continues across processes under mpirun (grad_reduction.h), and updates the weights with
// the clipping's scale fused into the optimiser's pass. A NaN or infinite loss or gradient
// norm, an anomaly (--detect-anomaly) or damaged data stops it before the update: the
// weights stay those of the last completed step.
#include <memory>
#include <string>
#include <utility>

#include "autograd/autocast.h"
#include "io/checkpoint.h"
#include "nn/gpt.h"
#include "optim/optim.h"
#include "train/batch_source.h"
#include "train/config.h"
#include "train/grad_accumulation.h"
#include "train/grad_reduction.h"
#include "train/snapshot_gate.h"
#include "train/world.h"

namespace train {

struct RunData;

struct StepResult {
  double loss = NAN, grad_norm = NAN;
  bool updated = false;
  int64_t tokens = 0;  // the step's real tokens, every rank's (the batch sources' count)
  // Why the step stopped before its update (a non-finite loss or gradient norm, an
  // anomaly); empty when it updated or met damaged data.
  std::string stopped;
  // Damaged data met by a rank (the lowest such rank's error, on every rank): the step did
  // not happen, and the generators are back where it started.
  std::string damaged_data;
};

class StepEngine {
 public:
  // Over the model's trainable parameters (freeze them first).
  StepEngine(const RunConfig& cfg, nn::GPT& model, World& world, const RunData& data);
  StepEngine(const StepEngine&) = delete;
  StepEngine& operator=(const StepEngine&) = delete;

  // A resumed run's optimiser state, generators and micro-batch count.
  void restore(const io::Checkpoint& ckpt);
  // What a checkpoint of the run holds of the engine: optimiser state, generators, count,
  // as the last completed step left them (during a step's forward and backward too: the
  // generators and count it started from; the update has not begun).
  void record(io::Checkpoint& c) const;
  // Whether a step has begun and not ended: the last completed step is the one before.
  bool in_step() const { return in_step_; }
  // Opened around each step's forward and backward (snapshot_gate.h), when not null.
  void set_gate(SnapshotGate* gate) { gate_ = gate; }
  // Rank 0 measures the GEMM kernels of one micro-batch (gemm_agreement.h), leaving the
  // run as it would have been.
  void decide_kernels();
  // Seconds of one micro-batch's forward and backward, measured as decide_kernels measures
  // (and leaving the run as it would have been): for the ETA before the first step.
  double time_micro_batch();
  // Under mpirun: the gradient reducer (after the kernels: its hooks would send rank 0's
  // measuring gradients) and the dropout draws of one forward, which ranks skip.
  void start_reduction();
  // --inject-nan PHASE:MODULE[@STEP]: armed at its step.
  void inject_nan_at(std::string spec, int64_t step) { inject_ = {std::move(spec), step}; }

  StepResult step(int64_t step, double lr);
  // The run's precision for a forward and backward (evaluations too), with the kept copies.
  ag::AutocastScope precision() const;

  optim::Optimizer& optimizer() { return *opt_; }
  int64_t micro_batches() const { return micro_batches_; }
  // "; waiting on the other processes ..." for --profile, or "" in one process.
  std::string reduction_profile(double ms_per_step, int64_t steps) const;

 private:
  double forward_backward_open();
  double forward_backward();
  double forward_backward_distributed();
  double micro_batch(int64_t micro_batches_in_step);
  void skip_micro_batches(int64_t count);
  int64_t count_dropout_draws();
  bool restart_on_damaged_data(StepResult& r);
  double micro_batch_aside();

  const RunConfig& cfg_;
  nn::GPT& model_;
  World& world_;
  // bf16: the weights' bfloat16 copies, refreshed by the optimiser (before opt_: it points
  // here); copies_ points at them when the optimiser keeps them, else null
  ag::Bf16WeightCopies bf16_copies_;
  ag::Bf16WeightCopies* copies_ = nullptr;
  std::unique_ptr<optim::Optimizer> opt_;
  std::unique_ptr<BatchSource> batches_;
  std::unique_ptr<GradAccumulator> accumulator_;  // with grad_accum_steps > 1
  std::unique_ptr<GradReducer> reducer_;          // in a distributed world
  ag::Generator data_gen_;
  int64_t dropout_draws_ = 0;  // per micro-batch's forward
  int64_t micro_batches_ = 0;  // consumed since the run began (a checkpoint's micro_batches)
  int64_t step_tokens_ = 0;    // the real tokens of this rank's micro-batches in the step
  // The first damaged data this rank met reading a batch.
  std::string data_failure_;
  struct StepStart {  // what a step that did not happen must give back
    ag::Generator::State data, dropout;
    int64_t micro_batches = 0;
  } step_start_;
  bool in_step_ = false;
  SnapshotGate* gate_ = nullptr;
  std::pair<std::string, int64_t> inject_{"", -1};
};

}  // namespace train
