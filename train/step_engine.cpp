#include "train/step_engine.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "autograd/allocator.h"
#include "autograd/anomaly.h"
#include "autograd/ops/gemm_tuning.h"
#include "autograd/test_hooks.h"  // set_nan_injection, for --inject-nan
#include "data/data_error.h"
#include "train/freezing.h"
#include "train/task.h"

namespace train {

namespace {

ag::Generator::State find_rng(const io::Checkpoint& c, const std::string& name) {
  for (const auto& [n, s] : c.rng)
    if (n == name) return s;
  throw std::runtime_error(
      fmt::format("{}: no /rng/{} state, so the run cannot resume exactly", c.source, name));
}

const char* sign_name(double value) {
  return std::isnan(value) ? "NaN" : value > 0 ? "+inf" : "-inf";
}

}  // namespace

StepEngine::StepEngine(const RunConfig& cfg, nn::GPT& model, World& world, const RunData& data)
    : cfg_(cfg), model_(model), world_(world), data_gen_(cfg.seed + ag::kDataStream) {
  opt_ = optim::make_optimizer(cfg.optimizer, trainable_named_parameters(model), cfg.lr);
  copies_ = kept_bf16_copies(cfg.precision, *opt_, model, bf16_copies_);
  batches_ = cfg.task->batches(cfg, data);
  if (cfg.grad_accum_steps > 1)
    accumulator_ = std::make_unique<GradAccumulator>(model.trainable_parameters());
}

void StepEngine::restore(const io::Checkpoint& ckpt) {
  try {
    opt_->load_state(*ckpt.optimizer);
  } catch (const std::invalid_argument& e) {  // the file's fault, not the command line's
    throw io::CheckpointError(fmt::format("'{}': {}", ckpt.source, e.what()));
  }
  data_gen_.set_state(find_rng(ckpt, "data"));
  model_.dropout_generator().set_state(find_rng(ckpt, "dropout"));
  // a file without the count (from elsewhere, or older) took one micro-batch per step
  micro_batches_ = ckpt.micro_batches >= 0 ? ckpt.micro_batches : ckpt.step;
}

void StepEngine::record(io::Checkpoint& c) const {
  c.optimizer = opt_->state();
  if (in_step_) {
    c.micro_batches = step_start_.micro_batches;
    c.rng = {{"data", step_start_.data}, {"dropout", step_start_.dropout}};
    return;
  }
  c.micro_batches = micro_batches_;
  c.rng = {{"data", data_gen_.state()}, {"dropout", model_.dropout_generator().state()}};
}

// The weights change only through opt_, which refreshes the copies: they stay valid from
// one step, evaluation or measurement to the next.
ag::AutocastScope StepEngine::precision() const {
  return ag::AutocastScope(cfg_.precision, copies_);
}

// Rank 0 runs one micro-batch aside while the kernels' tuner measures them.
void StepEngine::decide_kernels() {
  ag::detail::bf16_fallback_enabled();  // a misspelt ATTOGRAD_BF16_FALLBACK: a set-up error
  if (!world_.root() || ag::detail::tune_mode() == ag::detail::TuneMode::off) return;
  micro_batch_aside();
}

double StepEngine::time_micro_batch() {
  return micro_batch_aside();
}

// A micro-batch outside the run: drawn with copies of the generators, its gradients
// dropped, so that the run is as it would have been. Damaged data is a set-up error.
// Returns its seconds.
double StepEngine::micro_batch_aside() {
  ag::Generator& dropout = model_.dropout_generator();
  const ag::Generator::State dropout_before = dropout.state();
  const ag::Generator data_before = data_gen_;
  const auto start = std::chrono::steady_clock::now();
  {
    const ag::AutocastScope autocast = precision();
    micro_batch(1);
  }
  const auto end = std::chrono::steady_clock::now();
  if (!data_failure_.empty()) throw data::DataError(data_failure_);
  data_gen_ = data_before;
  dropout.set_state(dropout_before);
  opt_->zero_grad();
  return std::chrono::duration<double>(end - start).count();
}

void StepEngine::start_reduction() {
  if (!world_.distributed()) return;
  reducer_ =
      std::make_unique<GradReducer>(world_, model_.trainable_parameters(), cfg_.grad_accum_steps,
                                    cfg_.bucket_mb << 20, cfg_.reduce);
  dropout_draws_ = count_dropout_draws();
}

StepResult StepEngine::step(int64_t step, double lr) {
  ag::release_unused_blocks();  // sizes the previous step did not use (padded batches)
  StepResult r;
  step_start_ = {data_gen_.state(), model_.dropout_generator().state(), micro_batches_};
  step_tokens_ = 0;
  in_step_ = true;
  struct StepEnd {
    bool& in_step;
    ~StepEnd() { in_step = false; }
  } step_end{in_step_};
  opt_->zero_grad();
  if (inject_.second == step) ag::set_nan_injection(inject_.first);
  // A non-finite value stops the run before it touches the weights: the last checkpoint
  // stays the last good state.
  try {
    r.loss = forward_backward_open();
    r.tokens = step_tokens_;
    if (!std::isfinite(r.loss)) {
      if (!restart_on_damaged_data(r))
        r.stopped = fmt::format("the loss is {} at step {}", sign_name(r.loss), step);
      return r;
    }
    r.grad_norm = optim::grad_norm(model_.trainable_parameters());
  } catch (const ag::AnomalyError& e) {
    // found by one rank only: the others cannot stop with it, so the job ends
    if (world_.distributed()) throw std::runtime_error(e.what());
    r.stopped = fmt::format("step {}: {}", step, e.what());
    return r;
  }
  if (!std::isfinite(r.grad_norm)) {
    r.stopped = fmt::format("the gradient norm is {} at step {}", sign_name(r.grad_norm), step);
    return r;
  }
  // clipped as clip_grad_norm would, the scaling fused into the update's pass; the
  // learning rate is set only now, so a state copied before (record()) holds the last one
  opt_->set_lr(lr);
  opt_->step(optim::clip_factor(r.grad_norm, cfg_.grad_clip > 0 ? cfg_.grad_clip : INFINITY));
  r.updated = true;
  return r;
}

// Forward and backward with the gate open: until the update nothing a checkpoint holds
// changes (the generators' and count's step start stands in for them, record()).
double StepEngine::forward_backward_open() {
  const SnapshotGate::Open open(gate_);
  // bf16: the weights' copies as the last update (or the first use) left them
  const ag::AutocastScope autocast = precision();
  return forward_backward();
}

// Asked on every rank when the step's loss is not finite: whether a rank met damaged data
// (the lowest such rank's error, on every rank). Then the step did not happen: the
// generators and the count go back to where it started.
bool StepEngine::restart_on_damaged_data(StepResult& r) {
  const World::Failure f = world_.first_failure(data_failure_);
  if (f.code == 0) return false;
  r.damaged_data = f.rank == 0 ? f.message : fmt::format("{} (rank {})", f.message, f.rank);
  data_gen_.set_state(step_start_.data);
  model_.dropout_generator().set_state(step_start_.dropout);
  micro_batches_ = step_start_.micro_batches;
  return true;
}

std::string StepEngine::reduction_profile(double ms_per_step, int64_t steps) const {
  if (!reducer_) return "";
  const double wait = 1e3 * reducer_->wait_seconds() / static_cast<double>(steps);
  return fmt::format(
      "; waiting on the other processes after backward {:.2f} ms/step ({:.1f}%), {} bucket{} "
      "of up to {} MB",
      wait, 100 * wait / ms_per_step, reducer_->bucket_count(),
      reducer_->bucket_count() == 1 ? "" : "s", cfg_.bucket_mb);
}

// The next micro-batch of the data stream, forward and (when its loss is finite) backward
// with the loss scaled by 1 / (the step's micro-batches). Returns its loss.
double StepEngine::micro_batch(int64_t micro_batches_in_step) {
  Batch b;
  try {
    b = batches_->next(data_gen_);
  } catch (const data::DataError& e) {
    // damaged data: the micro-batch's loss is NaN, which every rank sees in the step's
    // gathered losses, and the step stops without its update (restart_on_damaged_data)
    if (data_failure_.empty()) data_failure_ = e.what();
    return NAN;
  }
  step_tokens_ += b.tokens;
  nn::GPT::Output out = model_.forward(b.x, b.y, b.lengths);
  const double loss = out.loss.item();
  if (!std::isfinite(loss)) return loss;
  if (micro_batches_in_step == 1)
    out.loss.backward();
  else
    out.loss.backward(ag::full(out.loss.shape(), 1.0 / static_cast<double>(micro_batches_in_step)));
  return loss;
}

// The step's micro-batches, each drawn in turn from the data stream: returns the mean of
// their losses (the loss of their union) and leaves in the gradients the gradient of that
// mean, summed in the accumulator's fixed order. Stops at a non-finite loss, returning it.
double StepEngine::forward_backward() {
  if (world_.distributed()) return forward_backward_distributed();
  const int64_t micro = cfg_.grad_accum_steps;
  if (micro > 1) accumulator_->start();
  double loss_sum = 0;
  for (int64_t i = 0; i < micro; ++i) {
    const double loss = micro_batch(micro);
    if (!std::isfinite(loss)) return loss;
    loss_sum += loss;
    if (i + 1 < micro) accumulator_->add();
  }
  if (micro > 1) accumulator_->finish();
  micro_batches_ += micro;
  return loss_sum / static_cast<double>(micro);
}

// The same step spread over the ranks (grad_reduction.h): rank r computes micro-batches
// [r A, r A + A) of the step's W A, with the data and dropout draws of exactly those
// micro-batches (the others' draws are skipped), so every bit matches one process
// accumulating W A micro-batches.
double StepEngine::forward_backward_distributed() {
  const int64_t micro = cfg_.grad_accum_steps, ranks = world_.size();
  const int64_t in_step = micro * ranks;
  skip_micro_batches(world_.rank() * micro);
  std::vector<double> losses;
  const size_t nodes = reducer_->nodes().size();
  for (size_t k = 0; k < nodes; ++k) {
    const int64_t size = reducer_->nodes()[k].size;
    if (accumulator_) accumulator_->start();
    for (int64_t j = 0; j + 1 < size; ++j) {
      losses.push_back(micro_batch(in_step));
      accumulator_->add();
    }
    GradAccumulator* open = size > 1 ? accumulator_.get() : nullptr;
    if (k + 1 < nodes) {
      losses.push_back(micro_batch(in_step));
      if (open) open->finish();
      reducer_->keep_node(k);
      opt_->zero_grad();
      continue;
    }
    {  // the step's last backward here: buckets leave as soon as they are final
      const auto overlap = reducer_->overlap_last_backward(open);
      losses.push_back(micro_batch(in_step));
    }
    reducer_->last_backward_done(open);
  }
  skip_micro_batches((ranks - 1 - world_.rank()) * micro);
  double loss_sum = 0;  // in micro-batch order, as the single process adds them
  for (double loss : world_.all_gather(losses)) loss_sum += loss;
  double tokens = 0;  // exact: counts far below 2^53
  for (double t : world_.all_gather({static_cast<double>(step_tokens_)})) tokens += t;
  step_tokens_ = static_cast<int64_t>(tokens);
  micro_batches_ += in_step;
  reducer_->reduce(std::isfinite(loss_sum));
  return loss_sum / static_cast<double>(in_step);
}

// Another rank's micro-batches: their windows and dropout masks are drawn by it; here the
// generators only advance past them.
void StepEngine::skip_micro_batches(int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    batches_->skip(data_gen_);
    for (int64_t d = 0; d < dropout_draws_; ++d) model_.dropout_generator().next_u64();
  }
}

// Draws one forward takes from the dropout generator (one per dropout site when dropout
// is on), found by running a one-token forward and restoring the generator.
int64_t StepEngine::count_dropout_draws() {
  ag::Generator& gen = model_.dropout_generator();
  const ag::Generator::State before = gen.state();
  {
    ag::NoGradGuard no_grad;
    model_.forward(ag::zeros({1, 1}, ag::DType::Int64));
  }
  const ag::Generator::State after = gen.state();
  gen.set_state(before);
  ag::Generator probe;
  probe.set_state(before);
  for (int64_t draws = 0; draws < (int64_t{1} << 20); ++draws, probe.next_u64())
    if (probe.state() == after) return draws;
  throw std::logic_error("a forward took more than 2^20 dropout draws");
}

}  // namespace train
