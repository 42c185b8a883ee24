#include "train/training_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <tuple>

#include "autograd/autocast.h"
#include "autograd/ops/gemm_tuning.h"
#include "autograd/test_hooks.h"  // set_nan_injection, for --inject-nan
#include "autograd/threading.h"
#include "base/posix_file.h"
#include "base/shell_quote.h"
#include "base/utf8.h"
#include "io/files.h"
#include "io/tokenizer_section.h"
#include "nn/generation.h"
#include "train/console.h"
#include "train/evaluate.h"
#include "train/evaluate_examples.h"
#include "train/freezing.h"
#include "train/gemm_agreement.h"
#include "train/memory_plan.h"
#include "train/model_loading.h"
#include "train/stop_reason.h"
#include "train/stop_signals.h"

namespace train {

namespace {

// Adds the seconds of its scope to a total.
class StepTimer {
 public:
  explicit StepTimer(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~StepTimer() {
    total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_;
};

// More validation windows than this make every evaluation cost more than many steps.
constexpr int64_t kManyEvalWindows = 4096;

ag::Generator::State find_rng(const io::Checkpoint& c, const std::string& name) {
  for (const auto& [n, s] : c.rng)
    if (n == name) return s;
  throw std::runtime_error(
      fmt::format("{}: no /rng/{} state, so the run cannot resume exactly", c.source, name));
}

// A checkpoint to continue is a training checkpoint (not a gradient dump, not weights
// only) whose optimiser took one update per step it records: a step count that disagrees
// would change the update's bias correction from the first step on.
void check_resumable(const io::Checkpoint* resumed) {
  if (!resumed) return;
  refuse_gradient_dump(*resumed);
  if (!resumed->optimizer || resumed->rng.empty())
    throw std::runtime_error(
        fmt::format("{} holds weights only (no optimizer or RNG state): resume needs a training "
                    "checkpoint; start a new run from its weights with 'train --init-from {}'",
                    resumed->source, resumed->source));
  for (const auto& [key, value] : resumed->optimizer->scalars)
    if (key == "step" && value != static_cast<double>(resumed->step))
      throw io::CheckpointError(
          fmt::format("'{}': the optimizer's step count ({}) disagrees with the checkpoint's "
                      "step ({}); a run updates once a step",
                      resumed->source, value, resumed->step));
}

// Refuses, before the text is read, data that alone would not fit in memory.
void check_data_fits(const RunConfig& cfg) {
  const int64_t needed = data_bytes_of(cfg);
  const int64_t available = available_memory();
  if (available > 0 && needed > available)
    throw std::runtime_error(fmt::format(
        "reading '{}' needs about {} (the text and its token ids) but only {} of memory is "
        "available; prepare it once with 'attograd prepare', whose folders train in a few MB",
        base::printable(cfg.data), format_bytes(needed), format_bytes(available)));
}

// A resumed run must continue on the text it trained on, wherever that text is now.
void check_same_data(const io::Checkpoint& resumed, const std::string& identity,
                     const RunConfig& cfg) {
  if (resumed.data_identity.empty() || resumed.data_identity == identity) return;
  throw std::runtime_error(fmt::format(
      "{} is not the text this run trained on ({} has data_identity {}, the text has {}); resume "
      "needs the same data (to train on new text, start from these weights with 'train "
      "--init-from {}')",
      cfg.data.empty() ? "the built-in corpus" : "'" + base::printable(cfg.data) + "'",
      resumed.source, base::printable(resumed.data_identity), identity, resumed.source));
}

// --inject-nan PHASE:MODULE[@STEP], a fault-injection aid for testing anomaly detection:
// the module must exist; it arms at STEP (default 1). Returns {spec without step, step}.
std::pair<std::string, int64_t> parse_nan_injection(const std::string& option,
                                                    const nn::GPT& model) {
  if (option.empty()) return {"", -1};
  std::string spec = option;
  int64_t at = 1;
  if (const auto pos = spec.find('@'); pos != std::string::npos) {
    try {
      at = std::stoll(spec.substr(pos + 1));
    } catch (const std::exception&) {
      throw std::invalid_argument(fmt::format(
          "--inject-nan '{}': the step after '@' is not a number", base::printable(option)));
    }
    spec.resize(pos);
  }
  ag::set_nan_injection(spec);  // validates the phase
  ag::set_nan_injection("");
  const std::string module = spec.substr(spec.find(':') + 1);
  const auto paths = model.module_paths();
  if (std::find(paths.begin(), paths.end(), module) == paths.end())
    throw std::invalid_argument(
        fmt::format("--inject-nan: this model has no module '{}' (modules are named like {}, {})",
                    base::printable(module), "blocks.0.attn.qkv", "blocks.0.mlp.fc2"));
  return {spec, at};
}

// "runs/shakespeare.h5" -> "shakespeare"
std::string default_run_name(const std::string& out) {
  std::string name = base::base_name(out);
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos && dot > 0) name.resize(dot);
  return name.empty() ? out : name;
}

const char* sign_name(double value) {
  return std::isnan(value) ? "NaN" : value > 0 ? "+inf" : "-inf";
}

}  // namespace

// ------------------------------------------------------------------ set-up
TrainingRun::TrainingRun(RunConfig cfg, const io::Checkpoint* resumed, RunObserver observer)
    : cfg_(std::move(cfg)),
      resumed_(resumed),
      data_gen_(cfg_.seed + ag::kDataStream),
      world_(World::current()),
      observer_(std::move(observer)),
      team_(cfg_.threads) {
  ag::set_num_threads(cfg_.threads);
  if (!world_.root()) {  // rank 0 alone prints, writes and measures kernels (gemm_agreement.h)
    ag::detail::set_measuring(false);
    set_quiet(true);
    cfg_.metrics.clear();
    cfg_.report.clear();
    cfg_.sample_tokens = 0;
    observer_ = nullptr;
  }
  check_resumable(resumed_);
  if (!cfg_.template_file.empty())
    cfg_.prompt_template = data::read_prompt_template_file(cfg_.template_file);
  if (!cfg_.init_from.empty()) {
    init_ = io::load_checkpoint(cfg_.init_from);
    refuse_gradient_dump(*init_);
    take_model_of(*init_, cfg_);
    take_task_of(*init_);
  }
  load_data();
  world_.expect_same_on_every_rank(settings_every_rank_shares());
  // before anything large is allocated: the weights must fit, and so must the run
  if (init_) check_init_fits(*init_, cfg_.model);
  if (resumed_) check_weights_fit(*resumed_, cfg_.model);
  check_plan();
  // an init's adapters that are not the run's are folded into its base weights
  if (init_ && !RunConfig::from_json(init_->config).model.same_adapters(cfg_.model))
    init_ = merged_checkpoint(*init_);
  model_ = std::make_unique<nn::GPT>(cfg_.model, cfg_.seed);
  if (init_) load_init_weights(*init_, *model_);
  init_.reset();  // its weights are the model's now: a GPT-2 init no longer holds 500 MB twice
  if (resumed_) io::load_model_weights(*resumed_, *model_);
  model_->train();
  freeze_parameters(cfg_, *model_);  // LoRA's base and --freeze: no gradient, no state
  opt_ = optim::make_optimizer(cfg_.optimizer, trainable_named_parameters(*model_), cfg_.lr);
  step_copies_ = kept_bf16_copies(ag::parse_precision(cfg_.precision, "precision"), *opt_, *model_,
                                  bf16_copies_);
  schedule_ = std::make_unique<optim::WarmupCosineLR>(cfg_.lr, cfg_.effective_min_lr(),
                                                      cfg_.warmup_steps, cfg_.steps);
  if (resumed_) restore(*resumed_);
  if (data_.ideal_loss >= 0) print_baselines();
  if (data_.examples)
    example_sampler_ =
        std::make_unique<data::ExampleSampler>(&data_.examples->train, cfg_.batch_size, data_.pad);
  else
    sampler_ = std::make_unique<data::BatchSampler>(&data_.train, cfg_.batch_size,
                                                    cfg_.model.context_length);
  if (cfg_.grad_accum_steps > 1)
    accumulator_ = std::make_unique<GradAccumulator>(model_->trainable_parameters());
  decide_step_kernels();  // before the reducer: its hooks would send rank 0's gradients
  if (world_.distributed()) {
    reducer_ = std::make_unique<GradReducer>(
        world_, model_->trainable_parameters(), cfg_.grad_accum_steps, cfg_.bucket_mb << 20,
        cfg_.reduce == "allreduce" ? Reduction::mpi_allreduce : Reduction::tree);
    dropout_draws_ = count_dropout_draws();
  }
  ag::set_detect_anomaly(cfg_.detect_anomaly);
  std::tie(inject_spec_, inject_at_) = parse_nan_injection(cfg_.inject_nan, *model_);
  report_ = std::make_unique<Reporter>(cfg_, run_identity(), static_cast<bool>(observer_));
  report_->start(run_record());
  // a resume that writes back to its own file starts with that file saved
  if (resumed_ && io::same_file(resumed_->source, cfg_.out)) last_saved_ = step_;
}

// A fresh run draws its identity; a resume continues its checkpoint's (a checkpoint from
// elsewhere or an older attograd has none: the resumed run draws one), with its history.
RunIdentity TrainingRun::run_identity() const {
  RunIdentity id;
  id.first_step = step_;
  id.resumed = resumed_ != nullptr;
  id.id = resumed_ && !resumed_->run_id.empty() ? resumed_->run_id : new_run_id();
  id.name = !cfg_.name.empty()                        ? cfg_.name
            : resumed_ && !resumed_->run_name.empty() ? resumed_->run_name
                                                      : default_run_name(cfg_.out);
  if (resumed_) id.history = io::parse_history(resumed_->history, resumed_->source);
  return id;
}

void TrainingRun::load_data() {
  check_data_fits(cfg_);
  const io::TokenizerSection* saved_tok = resumed_ ? &resumed_->tokenizer
                                          : init_  ? &init_->tokenizer
                                                   : nullptr;
  data_ = load_run_data(cfg_, saved_tok, [&](const std::string& identity) {
    if (resumed_) check_same_data(*resumed_, identity, cfg_);
  });
  // an instruction model whose tokenizer has no end-of-text token has one more id for it
  const int64_t extra = data::extra_ids_for_tasks(*data_.tokenizer, cfg_.task);
  const int64_t tokenizer_vocab = data_.tokenizer->vocab_size() + extra;
  if (cfg_.model.vocab_size == 0) cfg_.model.vocab_size = tokenizer_vocab;
  cfg_.tokenizer = data_.tokenizer->type();  // a folder's own, recorded as it is
  if (cfg_.model.vocab_size < tokenizer_vocab && extra > 0)
    throw std::invalid_argument(fmt::format(
        "task instruct ends each response with an end-of-text id, which the {} tokenizer "
        "lacks, so the model needs vocab_size {} (one more than the tokenizer's), not {}; "
        "train the base model with --vocab-size {}",
        data_.tokenizer->type(), tokenizer_vocab, cfg_.model.vocab_size, tokenizer_vocab));
  if (cfg_.model.vocab_size < tokenizer_vocab)
    throw std::invalid_argument(fmt::format("vocab_size {} is smaller than the tokenizer's {}",
                                            cfg_.model.vocab_size, tokenizer_vocab));
  if (data_.examples) return take_task_shape();
  cfg_.validate();
  const int64_t T = cfg_.model.context_length;
  if (static_cast<int64_t>(data_.train.size()) < T + 1)
    throw std::invalid_argument(
        fmt::format("the training split has {} tokens, fewer than context_length + 1 = {}",
                    data_.train.size(), T + 1));
}

// Fine-tuning a model already fine-tuned for the same task keeps what its task knows: a
// classifier's labels (new ones are errors), an instruction model's template (unless
// --template names another).
void TrainingRun::take_task_of(const io::Checkpoint& init) {
  const RunConfig was = RunConfig::from_json(init.config);
  if (was.task != cfg_.task) return;
  if (cfg_.task == "classify") cfg_.labels = was.labels;
  if (cfg_.task == "instruct" && cfg_.template_file.empty())
    cfg_.prompt_template = was.prompt_template;
}

// A task's model: a classifier has a class per label of its file (or of the run it
// resumes); there must be examples to train on.
void TrainingRun::take_task_shape() {
  if (cfg_.task == "classify") {
    cfg_.labels = data_.labels;
    cfg_.model.num_classes = static_cast<int64_t>(data_.labels.size());
  }
  cfg_.validate();
  if (data_.examples->train.empty())
    throw std::invalid_argument(
        fmt::format("'{}' leaves no example to train on", base::printable(cfg_.data)));
}

void TrainingRun::print_baselines() {
  // the built-in corpus is small: its ids are copied out for the counts
  const std::vector<int64_t> train = data_.train.to_vector(), val = data_.val.to_vector();
  const double unigram = data::unigram_loss(val, cfg_.model.vocab_size);
  const double bigram = data::bigram_loss(train, val, cfg_.model.vocab_size);
  sayf("baselines on val: unigram {:.4f} | bigram {:.4f} | corpus floor (ideal) {:.4f}\n", unigram,
       bigram, data_.ideal_loss);
  baselines_ = {{"unigram", unigram}, {"bigram", bigram}, {"corpus_floor", data_.ideal_loss}};
}

nlohmann::json TrainingRun::run_record() const {
  char started[32] = "";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  if (gmtime_r(&now, &utc)) std::strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &utc);
  nlohmann::json j = {{"config", cfg_.to_json()},
                      {"parameters", cfg_.model.num_parameters()},
                      {"memory_plan", plan_.to_json()},
                      {"data", data_.source},
                      {"train_tokens", data_.train.size()},
                      {"val_tokens", data_.val.size()},
                      {"task", cfg_.task},
                      {"first_step", step_},
                      {"processes", world_.size()},
                      {"threads", cfg_.threads},
                      {"started_at", started}};
  if (!baselines_.is_null()) j["baselines"] = baselines_;
  if (data_.examples) {
    j["train_examples"] = data_.examples->train.size();
    j["val_examples"] = data_.examples->val.size();
    j["truncated_examples"] = data_.truncated;
  }
  return j;
}

void TrainingRun::notify(bool final) const {
  if (!observer_) return;
  try {
    observer_(*this, final);
  } catch (const std::exception& e) {
    warn(fmt::format("step {}: {}; training goes on", step_, e.what()));
  }
}

void TrainingRun::check_plan() {
  const ParameterCounts counts = count_parameters(cfg_);
  plan_ = plan_memory(cfg_, cfg_.model.num_parameters(), data_.memory_bytes(), world_.size(),
                      counts.trainable, data_.reading_bytes);
  const MemoryPlan& plan = plan_;
  const std::string split = data_.examples ? ""  // the source line counts the examples
                                           : fmt::format(" | {} train / {} val tokens",
                                                         data_.train.size(), data_.val.size());
  sayf("attograd: {} parameters{} | data {}{} | vocab {} | BLAS {} ({}, {} threads){}\n",
       cfg_.model.num_parameters(),
       counts.frozen > 0
           ? fmt::format(" ({} trainable, {} frozen)", counts.trainable, counts.frozen)
           : "",
       data_.source, split, cfg_.model.vocab_size, "OpenBLAS", ag::blas_kernel_name(), cfg_.threads,
       cfg_.precision == "bf16"
           ? fmt::format(" | bf16 matmuls: {}", ag::bf16_matmul_implementation())
           : "");
  const int ranks = world_.size();
  sayf("batch: {} sequences x {} micro-batch{}{} = {} sequences of {} tokens per step\n",
       cfg_.batch_size, cfg_.grad_accum_steps, cfg_.grad_accum_steps == 1 ? "" : "es",
       ranks > 1 ? fmt::format(" x {} processes", ranks) : "", cfg_.effective_batch() * ranks,
       cfg_.model.context_length);
  sayf("{}\n", plan.describe());
  if (!plan.fits())
    throw std::runtime_error(fmt::format(
        "this run needs about {} but only {} of memory is available; lower --batch-size, "
        "--context-length or the model size",
        format_bytes(plan.total()), format_bytes(plan.available)));
  check_address_space(plan.total(), cfg_.threads);
  const int64_t windows = data::EvalWindows(data_.val.size(), cfg_.model.context_length).count();
  if (cfg_.eval_windows == 0 && windows > kManyEvalWindows && !data_.examples)
    sayf(
        "note: each evaluation runs all {} validation windows ({} tokens); --eval-windows N "
        "evaluates the first N\n",
        windows, windows * cfg_.model.context_length);
}

void TrainingRun::restore(const io::Checkpoint& ckpt) {
  try {
    opt_->load_state(*ckpt.optimizer);
  } catch (const std::invalid_argument& e) {  // the file's fault, not the command line's
    throw io::CheckpointError(fmt::format("'{}': {}", ckpt.source, e.what()));
  }
  data_gen_.set_state(find_rng(ckpt, "data"));
  model_->dropout_generator().set_state(find_rng(ckpt, "dropout"));
  step_ = ckpt.step;
  // a file without the count (from elsewhere, or older) took one micro-batch per step
  micro_batches_ = ckpt.micro_batches >= 0 ? ckpt.micro_batches : ckpt.step;
}

// ------------------------------------------------------------------ the loop
int TrainingRun::run() {
  StopSignals stop_signals;  // from here on a signal ends the run after its step, saved
  notify(false);             // a live report exists from the start
  while (wants_another_step()) {
    const StepOutcome s = train_step();
    if (!s.updated) break;
    after_step(s);
    if (stop_at_reached() || max_time_reached()) break;
  }
  return finish();
}

bool TrainingRun::wants_another_step() const {
  const bool stop = world_.distributed() ? agreed_stop_ : StopSignals::requested();
  return step_ < cfg_.steps && !stop && damaged_data_.empty();
}

StepOutcome TrainingRun::train_step() {
  const StepTimer timer(step_seconds_);
  const auto team = team_.step();
  StepOutcome s;
  StepFigures& f = s.figures;
  step_start_ = {data_gen_.state(), model_->dropout_generator().state(), micro_batches_};
  f.step = ++step_;
  f.lr = schedule_->lr_at(step_);
  opt_->set_lr(f.lr);
  opt_->zero_grad();
  if (inject_at_ == step_) ag::set_nan_injection(inject_spec_);
  // A non-finite value stops the run before it touches the weights: the last checkpoint
  // stays the last good state.
  try {
    {  // bf16: the weights' copies as the last update (or the first use) left them
      const ag::AutocastScope autocast = step_precision();
      f.loss = forward_backward();
    }
    if (!std::isfinite(f.loss)) {
      if (!stop_on_damaged_data())
        stop_before_update(fmt::format("the loss is {} at step {}", sign_name(f.loss), step_));
      return s;
    }
    f.grad_norm = optim::grad_norm(model_->trainable_parameters());
  } catch (const ag::AnomalyError& e) {
    // found by one rank only: the others cannot stop with it, so the job ends
    if (world_.distributed()) throw std::runtime_error(e.what());
    stop_before_update(fmt::format("step {}: {}", step_, e.what()));
    return s;
  }
  if (!std::isfinite(f.grad_norm)) {
    stop_before_update(
        fmt::format("the gradient norm is {} at step {}", sign_name(f.grad_norm), step_));
    return s;
  }
  // clipped as clip_grad_norm would, the scaling fused into the update's pass
  opt_->step(optim::clip_factor(f.grad_norm, cfg_.grad_clip > 0 ? cfg_.grad_clip : INFINITY));
  tokens_ += cfg_.effective_batch() * world_.size() * cfg_.model.context_length;
  f.tokens = tokens_;
  s.updated = true;
  return s;
}

// The next micro-batch of the data stream, forward and (when its loss is finite) backward
// with the loss scaled by 1 / (the step's micro-batches). Returns its loss.
double TrainingRun::micro_batch(int64_t micro_batches_in_step) {
  nn::GPT::Output out;
  if (example_sampler_) {
    const data::ExampleBatch b = example_sampler_->next(data_gen_);
    out = model_->forward(b.x, b.y, b.lengths);
  } else {
    std::pair<ag::Tensor, ag::Tensor> batch;
    try {
      batch = sampler_->next(data_gen_);
    } catch (const data::DataError& e) {
      // damaged data: the micro-batch's loss is NaN, which every rank sees in the step's
      // gathered losses, and the step stops without its update (stop_on_damaged_data)
      if (data_failure_.empty()) data_failure_ = e.what();
      return NAN;
    }
    out = model_->forward(batch.first, batch.second);
  }
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
double TrainingRun::forward_backward() {
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
double TrainingRun::forward_backward_distributed() {
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
  micro_batches_ += in_step;
  reducer_->reduce(std::isfinite(loss_sum));
  return loss_sum / static_cast<double>(in_step);
}

// Another rank's micro-batches: their windows and dropout masks are drawn by it; here the
// generators only advance past them.
void TrainingRun::skip_micro_batches(int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    if (example_sampler_)
      example_sampler_->skip(data_gen_);
    else
      sampler_->skip(data_gen_);
    for (int64_t d = 0; d < dropout_draws_; ++d) model_->dropout_generator().next_u64();
  }
}

// Draws one forward takes from the dropout generator (one per dropout site when dropout
// is on), found by running a one-token forward and restoring the generator.
int64_t TrainingRun::count_dropout_draws() {
  ag::Generator& gen = model_->dropout_generator();
  const ag::Generator::State before = gen.state();
  {
    ag::NoGradGuard no_grad;
    model_->forward(ag::zeros({1, 1}, ag::DType::Int64));
  }
  const ag::Generator::State after = gen.state();
  gen.set_state(before);
  ag::Generator probe;
  probe.set_state(before);
  for (int64_t draws = 0; draws < (int64_t{1} << 20); ++draws, probe.next_u64())
    if (probe.state() == after) return draws;
  throw std::logic_error("a forward took more than 2^20 dropout draws");
}

// What shapes the run, which every rank must be given alike (World::agree_setup compares
// them): the effective config as a checkpoint stores it, less what may differ by rank
// (outputs, the data's path: its identity counts instead) or is cleared on ranks but 0,
// the settings a checkpoint does not store but the ranks act on together, and the
// environment that forces kernels (gemm_agreement.h).
std::vector<std::pair<std::string, std::string>> TrainingRun::settings_every_rank_shares() const {
  // the data first: a different text also changes settings derived from it (vocab_size)
  std::vector<std::pair<std::string, std::string>> settings{{"data identity", data_.identity}};
  const nlohmann::json config = cfg_.to_json();
  for (const auto& [key, value] : config.items())
    if (key != "data" && key != "sample_tokens") settings.emplace_back(key, value.dump());
  const std::pair<std::string, std::string> more[] = {
      {"reduce", cfg_.reduce},
      {"bucket_mb", std::to_string(cfg_.bucket_mb)},
      {"stop_at", std::to_string(cfg_.stop_at)},
      {"max_time", fmt::format("{}", cfg_.max_time)},
      {"detect_anomaly", cfg_.detect_anomaly ? "true" : "false"},
      {"inject_nan", cfg_.inject_nan},
      {"resumed from step", resumed_ ? std::to_string(resumed_->step) : "none"}};
  settings.insert(settings.end(), std::begin(more), std::end(more));
  for (auto& setting : kernel_environment()) settings.push_back(std::move(setting));
  return settings;
}

// The weights change only through opt_, which refreshes the copies: they stay valid from
// one step, evaluation or measurement to the next.
ag::AutocastScope TrainingRun::step_precision() {
  return ag::AutocastScope(ag::parse_precision(cfg_.precision, "precision"), step_copies_);
}

// Rank 0 measures the GEMM kernels of a step before the run (gemm_agreement.h): one
// micro-batch, forward and backward, drawn with a copy of the data generator; the dropout
// generator is restored and the gradients dropped, so the run is as it would have been.
void TrainingRun::decide_step_kernels() {
  ag::detail::bf16_fallback_enabled();  // a misspelt ATTOGRAD_BF16_FALLBACK: a set-up error
  if (!world_.root() || ag::detail::tune_mode() == ag::detail::TuneMode::off) return;
  ag::Generator& dropout = model_->dropout_generator();
  const ag::Generator::State dropout_before = dropout.state();
  const ag::Generator data_before = data_gen_;
  {
    const ag::AutocastScope autocast = step_precision();
    micro_batch(1);
  }
  if (!data_failure_.empty()) throw data::DataError(data_failure_);  // a set-up error
  data_gen_ = data_before;
  dropout.set_state(dropout_before);
  opt_->zero_grad();
}

// Asked on every rank when the step's loss is not finite: whether a rank met damaged data
// (the lowest such rank's error, on every rank). Then the step did not happen: the run is
// back at the end of the last completed step, which finish() saves.
bool TrainingRun::stop_on_damaged_data() {
  const World::Failure f = world_.first_failure(data_failure_);
  if (f.code == 0) return false;
  damaged_data_ = f.rank == 0 ? f.message : fmt::format("{} (rank {})", f.message, f.rank);
  --step_;
  data_gen_.set_state(step_start_.data);
  model_->dropout_generator().set_state(step_start_.dropout);
  micro_batches_ = step_start_.micro_batches;
  return true;
}

void TrainingRun::stop_before_update(const std::string& why) {
  // one line: the last good checkpoint, and the command that continues from it
  const std::string last_good =
      last_saved_ >= 0
          ? fmt::format("The last good checkpoint is {} (step {}); continue from it with: {}",
                        cfg_.out, last_saved_, continue_command(cfg_.out))
          : std::string("No checkpoint was written in this run.");
  if (world_.root())
    noticef("{}attograd: {}; stopping before the update. {}\n", report_->fresh_line(), why,
            last_good);
  failed_ = true;
}

void TrainingRun::after_step(const StepOutcome& s) {
  StepFigures f = s.figures;
  const bool last = step_ == cfg_.steps;
  const bool has_val = data_.examples ? !data_.examples->val.empty() : !data_.val.empty();
  const bool eval_now =
      has_val && ((cfg_.eval_interval > 0 && step_ % cfg_.eval_interval == 0) || last);
  if (eval_now) evaluate_now(f);
  if (step_ % cfg_.log_interval == 0 || last || eval_now || step_ == 1)
    report_->line(f);
  else
    report_->progress(f);
  if (eval_now && !last && records_samples()) report_->sample(step_, sample_text());
  if (eval_now && !last) notify(false);  // the last step's report comes with the finish
  // every rank must stop after the same step: a signal reaches the ranks at different times,
  // so the first rank's reason travels with the agreement (rank 0, which names it, may not
  // have had its own signal yet)
  if (world_.distributed()) {
    const World::Failure stop =
        world_.first_failure(StopSignals::requested() ? stop_reason(true) : "");
    agreed_stop_ = stop.code != 0;
    if (agreed_stop_) agreed_stop_reason_ = stop.message;
  }
  const bool stopping = world_.distributed() ? agreed_stop_ : StopSignals::requested();
  if (cfg_.checkpoint_interval > 0 && step_ % cfg_.checkpoint_interval == 0 && !last && !stopping)
    save_periodically();
}

void TrainingRun::evaluate_now(StepFigures& f) {
  const ag::AutocastScope autocast = step_precision();
  if (data_.examples) {
    const ExampleEval r = evaluate_examples(*model_, data_.examples->val, cfg_.batch_size,
                                            data_.pad, StopSignals::requested);
    const bool whole = r.examples == static_cast<int64_t>(data_.examples->val.size());
    f.val_loss = last_val_ = whole ? r.loss : NAN;
    f.val_examples = whole ? r.examples : 0;
    if (whole && cfg_.task == "classify") f.val_accuracy = r.accuracy();
    return;
  }
  EvalResult r;
  try {  // damaged data stops the run on every rank (evaluate.h); this step is complete
    r = evaluate(*model_, data_.val, data_.token_bytes, cfg_.eval_windows, StopSignals::requested);
  } catch (const data::DataError& e) {
    damaged_data_ = e.what();
  }
  f.val_loss = last_val_ = r.tokens ? r.loss : NAN;
  f.val_bits_per_byte = r.tokens ? r.bits_per_byte() : NAN;
  f.val_windows = r.tokens ? r.windows : 0;
}

bool TrainingRun::stop_at_reached() const {
  if (cfg_.stop_at <= 0 || step_ < cfg_.stop_at) return false;
  sayf("{}attograd: stopping after step {} as asked (--stop-at)\n", report_->fresh_line(), step_);
  return true;
}

// --max-time: every rank stops after the same step (the first at which one of them is over).
bool TrainingRun::max_time_reached() {
  if (cfg_.max_time <= 0) return false;
  bool over = report_->elapsed() >= cfg_.max_time;
  if (world_.distributed()) over = world_.any(over);
  if (!over || step_ >= cfg_.steps) return false;
  sayf("{}attograd: stopping after step {}: --max-time {}s reached\n", report_->fresh_line(), step_,
       cfg_.max_time);
  interrupted_ = true;
  return true;
}

std::string TrainingRun::continue_command(const std::string& checkpoint) const {
  std::vector<std::string> words = {cfg_.program, "resume", "--checkpoint", checkpoint};
  if (checkpoint != cfg_.out) words.insert(words.end(), {"--out", cfg_.out});
  if (!cfg_.metrics.empty()) words.insert(words.end(), {"--metrics", cfg_.metrics});
  if (!cfg_.report.empty()) words.insert(words.end(), {"--report", cfg_.report});
  if (!cfg_.report_prompt.empty())
    words.insert(words.end(), {"--report-prompt", cfg_.report_prompt});
  for (std::string& w : words) w = base::shell_quote(w);
  return fmt::format("{}", fmt::join(words, " "));
}

void TrainingRun::print_continue_command(const std::string& checkpoint) const {
  if (world_.root())
    noticef("attograd: continue this run with: {}\n", continue_command(checkpoint));
}

// ------------------------------------------------------------------ saving and the finish
void TrainingRun::save(int64_t at, const std::string& path) {
  if (!world_.root()) return;  // every rank holds the same state; rank 0 writes it
  io::Checkpoint c;
  c.config = cfg_.to_json();
  c.step = at;
  c.model = model_->named_parameters();
  c.optimizer = opt_->state();
  c.tokenizer = io::tokenizer_section(*data_.tokenizer);
  c.data_identity = data_.identity;
  c.micro_batches = micro_batches_;
  c.rng = {{"data", data_gen_.state()}, {"dropout", model_->dropout_generator().state()}};
  c.run_id = report_->identity().id;
  c.run_name = report_->identity().name;
  c.history = io::history_text(report_->history());
  io::save_checkpoint(path, c);
}

// A failed periodic save (full disk, folder gone) loses nothing: the run goes on with its
// state in memory and tries again at the next interval.
void TrainingRun::save_periodically() {
  try {
    save(step_, cfg_.out);
    last_saved_ = step_;
  } catch (const io::CheckpointError& e) {
    warn(fmt::format("step {}: {}; training continues and tries again at step {} ({})", step_,
                     e.what(), step_ + cfg_.checkpoint_interval,
                     last_saved_ >= 0 ? fmt::format("last good checkpoint: step {}", last_saved_)
                                      : std::string("no checkpoint written yet")));
  }
}

void TrainingRun::print_profile() const {
  const int64_t steps = step_ - (resumed_ ? resumed_->step : 0);
  if (!cfg_.profile || steps <= 0) return;
  const double per_step = 1e3 * step_seconds_ / static_cast<double>(steps);
  std::string waiting;
  if (reducer_) {
    const double wait = 1e3 * reducer_->wait_seconds() / static_cast<double>(steps);
    waiting = fmt::format(
        "; waiting on the other processes after backward {:.2f} ms/step ({:.1f}%), {} bucket{} "
        "of up to {} MB",
        wait, 100 * wait / per_step, reducer_->bucket_count(),
        reducer_->bucket_count() == 1 ? "" : "s", cfg_.bucket_mb);
  }
  sayf("profile: {} steps, {:.2f} ms/step (forward, backward, reduction, update){}\n", steps,
       per_step, waiting);
}

int TrainingRun::finish() {
  print_profile();
  if (!damaged_data_.empty()) return finish_on_damaged_data();
  const bool stopped = StopSignals::requested() || agreed_stop_;
  if (stopped && world_.root())
    noticef("{}attograd: {}: stopping after step {}; saving {}\n", report_->fresh_line(),
            agreed_stop_ ? agreed_stop_reason_ : stop_reason(world_.distributed()), step_,
            cfg_.out);
  if (failed_) {
    notify(true);  // the curves up to the stop
    return 1;
  }
  save_final();
  if (step_ < cfg_.steps && (stopped || interrupted_ || cfg_.stop_at > 0))
    print_continue_command(cfg_.out);
  if (!std::isnan(last_val_) && data_.ideal_loss >= 0)
    sayf("val loss {:.4f}, {:.4f} above the corpus floor {:.4f}\n", last_val_,
         last_val_ - data_.ideal_loss, data_.ideal_loss);
  if (cfg_.sample_tokens > 0 && step_ == cfg_.steps && !StopSignals::requested() &&
      cfg_.task != "classify") {
    model_->eval();
    merge_adapters(*model_);  // the decoder runs plain Linears; the final save is written
    if (cfg_.task == "instruct")
      print_instruction_sample();
    else
      print_sample();
  }
  notify(true);
  return 0;
}

void TrainingRun::save_final() {
  if (last_saved_ == step_ && resumed_ && step_ == resumed_->step) {
    sayf("no step was trained (the run is at step {} of {}): {} is unchanged\n", step_, cfg_.steps,
         cfg_.out);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  if (last_saved_ != step_) {
    const SavedTo saved = save_or_rescue();
    if (saved.path != cfg_.out)
      throw std::runtime_error(
          fmt::format("{}; the run's state (step {}) was saved to {} instead; continue this run "
                      "with: {}",
                      saved.out_error, step_, saved.path, continue_command(saved.path)));
  }
  // a long save is worth knowing of: under mpirun a stop gives it odls_base_sigkill_timeout
  // seconds (docs/distributed.md)
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  sayf("saved checkpoint {} (step {}{})\n", cfg_.out, step_,
       seconds >= 1 ? fmt::format("; the save took {:.1f} s", seconds) : "");
}

TrainingRun::SavedTo TrainingRun::save_or_rescue() {
  try {
    save(step_, cfg_.out);
    return {cfg_.out, ""};
  } catch (const io::CheckpointError& e) {
    // the run's state is still in memory: keep it somewhere before giving up
    std::string rescue;
    try {
      rescue = io::make_rescue_path(cfg_.out);
      save(step_, rescue);
    } catch (const std::exception& e2) {
      throw std::runtime_error(
          fmt::format("{}; the rescue copy failed too: {}", e.what(), e2.what()));
    }
    return {rescue, e.what()};
  }
}

// Damaged data met by any rank: the last completed step is saved (to --out, else a rescue
// folder), one line says what was damaged and where the run is, and every rank exits 1.
int TrainingRun::finish_on_damaged_data() {
  std::string saved;
  if (last_saved_ == step_) {
    saved = fmt::format("step {}, the last completed, is saved in {}", step_, cfg_.out);
  } else {
    try {
      const SavedTo to = save_or_rescue();
      saved = to.path == cfg_.out
                  ? fmt::format("saved step {}, the last completed, to {}", step_, to.path)
                  : fmt::format("{}; saved step {}, the last completed, to {} instead",
                                to.out_error, step_, to.path);
    } catch (const std::exception& e) {
      saved = fmt::format("nothing saved: {}", e.what());
    }
  }
  if (world_.root())
    noticef("{}attograd: error: {}; {}\n", report_->fresh_line(), damaged_data_, saved);
  notify(true);  // the curves up to the stop
  return 1;
}

// The first token of the held-out text, continued by the one generation loop (the
// windows `attograd sample` uses), at temperature 0.8.
std::string TrainingRun::sample_text(int64_t tokens) const {
  std::vector<int64_t> out = data_.val.empty() ? data_.train.slice(0, 1) : data_.val.slice(0, 1);
  nn::GenerationOptions o;
  o.max_new_tokens = tokens;
  o.sampling.temperature = 0.8;
  o.seed = cfg_.seed;
  const std::vector<std::vector<int64_t>> fresh = nn::generate_tokens(*model_, out, o);
  out.insert(out.end(), fresh[0].begin(), fresh[0].end());
  return data_.tokenizer->decode(out);
}

void TrainingRun::print_sample() {
  const std::string text = sample_text(cfg_.sample_tokens);
  sayf("sample:\n{}\n", text);
  report_->sample(step_, text);
}

// A sample recorded at each evaluation: only when someone keeps it (--metrics, --report),
// for a language model on text (a task's sample needs its examples) without adapters (the
// decoder runs merged weights), and short, so that evaluations stay cheap.
bool TrainingRun::records_samples() const {
  return report_->recording() && cfg_.sample_tokens > 0 && cfg_.task == "lm" &&
         cfg_.model.lora_rank == 0;
}

std::string TrainingRun::sample_text() {
  model_->eval();
  const std::string text = sample_text(std::min(cfg_.sample_tokens, kEvaluationSampleTokens));
  model_->train();
  return text;
}

// The first held-out instruction (else the first training one), answered greedily up to
// the end-of-text token.
void TrainingRun::print_instruction_sample() {
  const auto& examples = data_.examples->val.empty() ? data_.examples->train : data_.examples->val;
  const data::Example& e = examples.front();
  size_t prompt = 0;  // the prompt: ids up to the first that has a target
  while (prompt < e.targets.size() && e.targets[prompt] == data::kIgnoreTarget) ++prompt;
  std::vector<int64_t> ids(e.ids.begin(), e.ids.begin() + static_cast<int64_t>(prompt) + 1);
  nn::GenerationOptions o;
  o.max_new_tokens = cfg_.sample_tokens;
  o.sampling.temperature = 0;
  o.seed = cfg_.seed;
  std::vector<int64_t> answer = nn::generate_tokens(*model_, ids, o)[0];
  const auto end = std::find(answer.begin(), answer.end(), data::end_of_text_id(*data_.tokenizer));
  answer.erase(end, answer.end());
  const std::string text = data_.tokenizer->decode(answer);
  sayf("sample (greedy) for the instruction of {} line {}:\n{}\n", base::printable(cfg_.data),
       e.line, text);
  report_->sample(step_, text);
}

int run_training(RunConfig cfg, const io::Checkpoint* resumed, RunObserver observer) {
  // a resume asked to stop where the run already is: nothing is read, trained or written
  if (resumed && cfg.stop_at > 0 && cfg.stop_at <= resumed->step) {
    if (World::current().root())
      sayf(
          "attograd: --stop-at {} is at or before the checkpoint's step {}: no step trained, "
          "nothing written ({} is unchanged)\n",
          cfg.stop_at, resumed->step, base::printable(resumed->source));
    return 0;
  }
  const PipeSignalIgnored reader_gone;  // during set-up; the run's StopSignals takes it after
  TrainingRun run(std::move(cfg), resumed, std::move(observer));
  end_setup(World::current());  // a failed rank fails them all; then rank 0's GEMM kernels
  return run.run();
}

}  // namespace train
