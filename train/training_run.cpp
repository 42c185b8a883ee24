#include "train/training_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <string_view>

#include "autograd/allocator.h"
#include "autograd/anomaly.h"
#include "autograd/ops/gemm_tuning.h"
#include "autograd/threading.h"
#include "base/utf8.h"
#include "io/files.h"
#include "train/console.h"
#include "train/freezing.h"
#include "train/gemm_agreement.h"
#include "train/model_loading.h"
#include "train/run_checks.h"
#include "train/stop_reason.h"
#include "train/stop_signals.h"
#include "train/task.h"

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

}  // namespace

// ------------------------------------------------------------------ set-up
TrainingRun::TrainingRun(RunConfig cfg, const io::Checkpoint* resumed, RunObserver observer)
    : cfg_(std::move(cfg)),
      resumed_(resumed),
      world_(World::current()),
      observer_(std::move(observer)),
      team_(cfg_.threads) {
  ag::set_num_threads(cfg_.threads);
  if (!world_.root()) quiet_this_rank();
  check_resumable(resumed_);
  if (!cfg_.template_file.empty())
    cfg_.prompt_template = data::read_prompt_template_file(cfg_.template_file);
  std::optional<io::Checkpoint> init = read_init();
  load_data(init ? &*init : nullptr);
  world_.expect_same_on_every_rank(settings_every_rank_shares());
  // before anything large is allocated: the weights must fit, and so must the run
  if (init) check_init_fits(*init, cfg_.model);
  if (resumed_) check_weights_fit(*resumed_, cfg_.model);
  // an own base is held as the file the weights come from holds it: the plan counts that
  if (const io::Checkpoint* weights = resumed_ ? resumed_
                                      : init   ? &*init
                                               : nullptr;
      weights && cfg_.base_precision == ag::quant::BasePrecision::own)
    cfg_.file_packed = weights->packed;
  check_plan();
  build_model(std::move(init));
  start_engine();
  report_ = std::make_unique<Reporter>(cfg_, run_identity(), static_cast<bool>(observer_));
  report_->start(run_record());
  // a resume that writes back to its own file starts with that file saved
  if (resumed_ && io::same_file(resumed_->source, cfg_.out)) progress_.last_saved = progress_.step;
}

// Rank 0 alone prints, writes and measures kernels (gemm_agreement.h).
void TrainingRun::quiet_this_rank() {
  ag::detail::set_measuring(false);
  set_quiet(true);
  cfg_.metrics.clear();
  cfg_.report.clear();
  cfg_.sample_tokens = 0;
  observer_ = nullptr;
}

// --init-from: the checkpoint whose weights the run starts from, with its model's shape
// and, for the same task, what the task knew.
std::optional<io::Checkpoint> TrainingRun::read_init() {
  if (cfg_.init_from.empty()) return std::nullopt;
  // the weights only: a training checkpoint's optimiser state (twice the weights) is not
  // the new run's to read or hold
  std::optional<io::Checkpoint> init = io::load_checkpoint(
      cfg_.init_from, io::LoadOptions{.weights_only = true, .keep_packed = true});
  refuse_gradient_dump(*init);
  take_model_of(*init, cfg_);
  cfg_.model.validate();  // the adapters' targets against the architecture now known
  const RunConfig was = RunConfig::from_json(init->config);
  if (was.task == cfg_.task) cfg_.task->keep_from(was, cfg_);
  // how the model's conversations are written, whatever task it had (an import's)
  if (!cfg_.chat_format) cfg_.chat_format = was.chat_format;
  if (cfg_.stop_token_ids.empty()) cfg_.stop_token_ids = was.stop_token_ids;
  return init;
}

void TrainingRun::load_data(const io::Checkpoint* init) {
  check_data_fits(cfg_);
  const io::TokenizerSection* saved_tok = resumed_ ? &resumed_->tokenizer
                                          : init   ? &init->tokenizer
                                                   : nullptr;
  data_ = load_run_data(cfg_, saved_tok, [&](const std::string& identity) {
    if (resumed_) check_same_data(*resumed_, identity, cfg_);
  });
  take_vocabulary();
  cfg_.task->shape_model(cfg_, data_);
  cfg_.validate();
  cfg_.task->check_training_data(cfg_, data_);
  plan_schedule();
}

// The model's vocabulary from the tokenizer's, with the ids the task adds (an end-of-text
// id, a chat format's special tokens the tokenizer lacks).
void TrainingRun::take_vocabulary() {
  const int64_t extra = cfg_.task->extra_ids(cfg_, *data_.tokenizer);
  const int64_t tokenizer_vocab = data_.tokenizer->vocab_size() + extra;
  if (cfg_.model.vocab_size == 0) cfg_.model.vocab_size = tokenizer_vocab;
  cfg_.tokenizer = data_.tokenizer->kind();  // a folder's own, recorded as it is
  // a fine-tuning from a base without those ids grows its embedding and head
  // (load_init_weights: the new rows are the mean of the old)
  if (cfg_.model.vocab_size < tokenizer_vocab && extra > 0 && !cfg_.init_from.empty() &&
      !resumed_) {
    sayf("vocab: {} -> {}: task {} adds {}, new embedding and head rows the mean of the old\n",
         cfg_.model.vocab_size, tokenizer_vocab, cfg_.task, cfg_.task->extra_ids_help());
    cfg_.model.vocab_size = tokenizer_vocab;
  }
  if (cfg_.model.vocab_size < tokenizer_vocab && extra > 0)
    throw std::invalid_argument(fmt::format(
        "task {} needs {} the {} tokenizer lacks ({}), so the model needs vocab_size {} "
        "({} more than the tokenizer's), not {}; train the base model with --vocab-size {}",
        cfg_.task, extra == 1 ? "an id" : fmt::format("{} ids", extra), data_.tokenizer->type(),
        cfg_.task->extra_ids_help(), tokenizer_vocab, extra, cfg_.model.vocab_size,
        tokenizer_vocab));
  if (cfg_.model.vocab_size < tokenizer_vocab)
    throw std::invalid_argument(fmt::format("vocab_size {} is smaller than the tokenizer's {}",
                                            cfg_.model.vocab_size, tokenizer_vocab));
}

namespace {

// The longest sequence a step runs: a task's batches are padded to their longest example
// (data::make_batch), not to the context, so its plan is for sequences that long.
int64_t longest_sequence(const RunData& data, int64_t context_length) {
  if (!data.examples) return context_length;
  size_t longest = 1;
  for (const auto* part : {&data.examples->train, &data.examples->val})
    for (const data::Example& e : *part) longest = std::max(longest, e.ids.size());
  return std::min<int64_t>(context_length, static_cast<int64_t>(longest));
}

}  // namespace

void TrainingRun::check_plan() {
  const ParameterCounts counts = count_parameters(cfg_);
  RunConfig planned = cfg_;
  planned.model.context_length = longest_sequence(data_, cfg_.model.context_length);
  setup_.plan = plan_memory(planned, cfg_.model.num_parameters(), data_.memory_bytes(),
                            world_.size(), counts.trainable, data_.reading_bytes);
  print_plan(counts, planned.model.context_length);
  ag::set_cache_budget(static_cast<size_t>(setup_.plan.tensor_bytes()));
  const std::string short_of = memory_shortfall(
      setup_.plan.total(), cfg_.threads, "lower --batch-size, --context-length or the model size");
  if (!short_of.empty())
    throw std::runtime_error(
        fmt::format("this run needs about {}: {}", format_bytes(setup_.plan.total()), short_of));
  const int64_t windows = data::EvalWindows(data_.val.size(), cfg_.model.context_length).count();
  if (cfg_.eval_windows == 0 && windows > kManyEvalWindows && !data_.examples)
    sayf(
        "note: each evaluation runs all {} validation windows ({} tokens); --eval-windows N "
        "evaluates the first N\n",
        windows, windows * cfg_.model.context_length);
}

void TrainingRun::print_plan(const ParameterCounts& counts, int64_t sequence_tokens) const {
  const std::string split = data_.examples ? ""  // the source line counts the examples
                                           : fmt::format(" | {} train / {} val tokens",
                                                         data_.train.size(), data_.val.size());
  sayf("attograd: {} parameters{} | data {}{} | vocab {} | BLAS {} ({}, {} threads){}\n",
       cfg_.model.num_parameters(),
       counts.frozen > 0
           ? fmt::format(" ({} trainable, {} frozen)", counts.trainable, counts.frozen)
           : "",
       data_.source, split, cfg_.model.vocab_size, "OpenBLAS", ag::blas_kernel_name(), cfg_.threads,
       cfg_.precision == ag::Precision::bf16
           ? fmt::format(" | bf16 matmuls: {}", ag::bf16_matmul_implementation())
           : "");
  if (!data_.layout.empty()) sayf("{}\n", data_.layout);
  const int ranks = world_.size();
  sayf("batch: {} sequences x {} micro-batch{}{} = {} sequences of {}{} tokens per step\n",
       cfg_.batch_size, cfg_.grad_accum_steps, cfg_.grad_accum_steps == 1 ? "" : "es",
       ranks > 1 ? fmt::format(" x {} processes", ranks) : "", cfg_.effective_batch() * ranks,
       data_.examples ? "up to " : "", sequence_tokens);
  sayf("{}\n", schedule_text());
  sayf("{}\n", setup_.plan.describe());
}

namespace {

// The frozen base a model is built with: base for a fresh one (its matrices drawn into their
// blocks); for one --init-from a file of blocks held as they are (own), the matrices the
// file holds so, of the run's shapes, built with no storage (their blocks are adopted);
// else none (float32, the file's values read into it).
nn::FrozenBase built_base(const nn::FrozenBase& base, const io::Checkpoint* init,
                          const nn::GPTConfig& model, bool resumed) {
  if (!init && !resumed) return base;
  nn::FrozenBase built;
  if (!init || !base.own) return built;
  std::map<std::string, ag::Shape> shapes;
  for (const auto& [name, shape] : model.parameter_shapes()) shapes.emplace(name, shape);
  for (const auto& [name, t] : init->model)
    if (t.packing() && base.frozen_matrix(name, t.shape()) && shapes.contains(name) &&
        shapes.at(name) == t.shape())
      built.from_file.insert(name);
  return built;
}

}  // namespace

void TrainingRun::build_model(std::optional<io::Checkpoint> init) {
  // an init's adapters that are not the run's are folded into its base weights
  const bool merged = init && init_holds_other_adapters(*init, cfg_.model);
  if (merged) init = merged_checkpoint(*init);
  // a frozen base held packed: drawn into its blocks, or packed once its floats are read
  const nn::FrozenBase base = frozen_base(cfg_);
  const nn::FrozenBase built =
      built_base(base, init && !merged ? &*init : nullptr, cfg_.model, resumed_ != nullptr);
  // else its weights are let go and read again into the model's parameters: held once
  if (init && !merged) init->model.clear();
  const bool drawn_packed = built.format || !built.from_file.empty();
  model_ = std::make_unique<nn::GPT>(cfg_.model, cfg_.seed, drawn_packed ? &built : nullptr);
  if (init && !merged) init = reread_init_into(*init, *model_);
  if (init) load_init_weights(*init, *model_);
  init.reset();
  if (resumed_) io::load_model_weights(*resumed_, *model_);  // blocks taken as they are
  model_->train();
  model_->set_activation_checkpointing(cfg_.checkpoint_activations);
  // each parameter held as the run's base says: a checkpoint's blocks in the run's format
  // kept as they are (an exact resume), others dequantized or packed
  nn::pack_frozen_base(*model_, base);
  freeze_parameters(cfg_, *model_);  // LoRA's base and --freeze: no gradient, no state
}

void TrainingRun::start_engine() {
  engine_ = std::make_unique<StepEngine>(cfg_, *model_, world_, data_);
  engine_->set_gate(&gate_);
  schedule_ = std::make_unique<optim::WarmupCosineLR>(cfg_.lr, cfg_.effective_min_lr(),
                                                      cfg_.effective_warmup(), cfg_.steps);
  if (cfg_.early_stopping > 0 || cfg_.keep_best)
    watch_.emplace(cfg_.task->validation_metric(), cfg_.early_stopping);
  if (resumed_) {
    engine_->restore(*resumed_);
    if (watch_) watch_->restore(*resumed_);
    progress_.step = resumed_->step;
  }
  if (data_.ideal_loss >= 0) print_baselines();
  engine_->decide_kernels();
  print_eta();
  engine_->start_reduction();
  ag::set_detect_anomaly(cfg_.detect_anomaly);
  auto [spec, at] = parse_nan_injection(cfg_.inject_nan, *model_);
  engine_->inject_nan_at(std::move(spec), at);
}

// A fresh run draws its identity; a resume continues its checkpoint's (a checkpoint from
// elsewhere or an older attograd has none: the resumed run draws one), with its history.
RunIdentity TrainingRun::run_identity() const {
  RunIdentity id;
  id.first_step = progress_.step;
  id.resumed = resumed_ != nullptr;
  id.id = resumed_ && !resumed_->run_id.empty() ? resumed_->run_id : new_run_id();
  id.name = !cfg_.name.empty()                        ? cfg_.name
            : resumed_ && !resumed_->run_name.empty() ? resumed_->run_name
                                                      : default_run_name(cfg_.out);
  if (resumed_) id.history = io::parse_history(resumed_->history, resumed_->source);
  return id;
}

void TrainingRun::print_baselines() {
  // the built-in corpus is small: its ids are copied out for the counts
  const std::vector<int64_t> train = data_.train.to_vector(), val = data_.val.to_vector();
  const double unigram = data::unigram_loss(val, cfg_.model.vocab_size);
  const double bigram = data::bigram_loss(train, val, cfg_.model.vocab_size);
  sayf("baselines on val: unigram {:.4f} | bigram {:.4f} | corpus floor (ideal) {:.4f}\n", unigram,
       bigram, data_.ideal_loss);
  setup_.baselines = {{"unigram", unigram}, {"bigram", bigram}, {"corpus_floor", data_.ideal_loss}};
}

nlohmann::json TrainingRun::run_record() const {
  char started[32] = "";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  if (gmtime_r(&now, &utc)) std::strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &utc);
  nlohmann::json j = {{"config", cfg_.to_json()},
                      {"parameters", cfg_.model.num_parameters()},
                      {"memory_plan", setup_.plan.to_json()},
                      {"data", data_.source},
                      {"train_tokens", data_.train.size()},
                      {"val_tokens", data_.val.size()},
                      {"task", cfg_.task.name()},
                      {"first_step", progress_.step},
                      {"processes", world_.size()},
                      {"threads", cfg_.threads},
                      {"started_at", started}};
  if (!setup_.baselines.is_null()) j["baselines"] = setup_.baselines;
  if (data_.examples) {
    j["train_examples"] = data_.examples->train.size();
    j["val_examples"] = data_.examples->val.size();
    j["truncated_examples"] = data_.truncated;
  }
  return j;
}

namespace {

// A config key as the option that gives it, so that a refusal names what the user typed:
// d_model is --d-model (on the command line and in a --config file alike).
std::string as_option(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return "--" + key;
}

}  // namespace

// What shapes the run, which every rank must be given alike (World::agree_setup compares
// them), each named by its option: the effective config as a checkpoint stores it, less what
// may differ by rank (outputs, the data's path: its identity counts instead) or is cleared on
// ranks but 0, the settings a checkpoint does not store but the ranks act on together, and
// the environment that forces kernels (gemm_agreement.h).
std::vector<std::pair<std::string, std::string>> TrainingRun::settings_every_rank_shares() const {
  // the data first: a different text also changes settings derived from it (vocab_size)
  std::vector<std::pair<std::string, std::string>> settings{{"data identity", data_.identity}};
  // settings filled in from others (d_ff from d_model, vocab_size from the data) come after
  // them, so that a difference is named by the setting the user gave
  constexpr std::string_view kDerived[] = {"d_ff", "vocab_size"};
  const nlohmann::json config = cfg_.to_json();
  for (const bool derived : {false, true})
    for (const auto& [key, value] : config.items())
      if (key != "data" && key != "sample_tokens" &&
          derived ==
              (std::find(std::begin(kDerived), std::end(kDerived), key) != std::end(kDerived)))
        settings.emplace_back(as_option(key), value.dump());
  const std::pair<std::string, std::string> more[] = {
      {"--reduce", base::choice_name(cfg_.reduce)},
      {"--bucket-mb", std::to_string(cfg_.bucket_mb)},
      {"--stop-at", std::to_string(cfg_.stop_at)},
      {"--max-time", fmt::format("{}", cfg_.max_time)},
      {"--detect-anomaly", cfg_.detect_anomaly ? "true" : "false"},
      {"--inject-nan", cfg_.inject_nan},
      {"resumed from step", resumed_ ? std::to_string(resumed_->step) : "none"}};
  settings.insert(settings.end(), std::begin(more), std::end(more));
  for (auto& setting : kernel_environment()) settings.push_back(std::move(setting));
  return settings;
}

// ------------------------------------------------------------------ the loop
int TrainingRun::run() {
  StopSignals stop_signals;  // from here on a signal ends the run after its step, saved
  // ... but the launcher's kill follows its signal within a second: rank 0 saves at once
  if (world_.launched())
    stop_signals.on_launcher_stop([this] { world_.root() ? save_before_the_kill() : leave(); });
  struct EndGate {  // however the loop ends: a launcher's stop from then on finds it ended
    SnapshotGate& gate;
    ~EndGate() { gate.end(); }
  };
  {
    const EndGate end_gate{gate_};
    notify(false);  // a live report exists from the start
    while (wants_another_step()) {
      const StepOutcome s = train_step();
      if (!s.updated) break;
      after_step(s);
      if (stop_at_reached() || max_time_reached()) break;
    }
  }
  return finish();
}

// A signal's request: under mpirun, the one every rank agreed on after the last step.
bool TrainingRun::stopping() const {
  return world_.distributed() ? ending_.agreed_stop : StopSignals::requested();
}

bool TrainingRun::wants_another_step() const {
  return progress_.step < cfg_.steps && !stopping() && ending_.damaged_data.empty() &&
         ending_.early_stop.empty();
}

StepOutcome TrainingRun::train_step() {
  const StepTimer timer(progress_.step_seconds);
  const auto team = team_.step();
  StepOutcome s;
  StepFigures& f = s.figures;
  f.step = ++progress_.step;
  f.lr = schedule_->lr_at(progress_.step);
  const StepResult r = engine_->step(progress_.step, f.lr);
  f.loss = r.loss;
  f.grad_norm = r.grad_norm;
  if (!r.damaged_data.empty()) {  // the step did not happen: the run is at the one before
    --progress_.step;
    ending_.damaged_data = r.damaged_data;
    return s;
  }
  if (!r.stopped.empty()) {
    stop_before_update(r.stopped);
    return s;
  }
  progress_.tokens += r.tokens;  // the batch sources' real tokens: padding is not trained on
  f.tokens = progress_.tokens;
  s.updated = true;
  return s;
}

void TrainingRun::stop_before_update(const std::string& why) {
  // one line: the last good checkpoint, and the command that continues from it
  const int64_t saved = progress_.last_saved;
  const std::string last_good =
      saved >= 0
          ? fmt::format("The last good checkpoint is {} (step {}); continue from it with: {}",
                        cfg_.out, saved, continue_command(cfg_.out))
          : std::string("No checkpoint was written in this run.");
  if (world_.root())
    noticef("{}attograd: {}; stopping before the update. {}\n", report_->fresh_line(), why,
            last_good);
  ending_.failed = true;
}

void TrainingRun::after_step(const StepOutcome& s) {
  StepFigures f = s.figures;
  const int64_t step = progress_.step;
  const bool last = step == cfg_.steps;
  const bool eval_now =
      has_validation() && ((cfg_.eval_interval > 0 && step % cfg_.eval_interval == 0) || last);
  if (eval_now) {
    evaluate_now(f);
    watch_validation(f);
  }
  if (step % cfg_.log_interval == 0 || last || eval_now || step == 1)
    report_->line(f);
  else
    report_->progress(f);
  if (eval_now && progress_.new_best && cfg_.keep_best) save_best();  // with this step's row
  // a sample at each evaluation when someone keeps it (--metrics, --report)
  if (eval_now && !last && report_->recording() && cfg_.sample_tokens > 0)
    if (const auto sample = cfg_.task->evaluation_sample(*model_, cfg_, data_))
      report_->sample(step, sample->text);
  if (eval_now && !last) notify(false);  // the last step's report comes with the finish
  // every rank must stop after the same step: a signal reaches the ranks at different times,
  // so the first rank's reason travels with the agreement (rank 0, which names it, may not
  // have had its own signal yet)
  if (world_.distributed()) {
    const std::string mine = StopSignals::requested() ? stop_reason(true) : "";
    World::Failure stop;
    {  // waiting on the other ranks changes nothing a checkpoint holds
      const SnapshotGate::Open open(&gate_);
      stop = world_.first_failure(mine);
    }
    ending_.agreed_stop = stop.code != 0;
    if (ending_.agreed_stop) ending_.agreed_stop_reason = stop.message;
  }
  if (cfg_.checkpoint_interval > 0 && step % cfg_.checkpoint_interval == 0 && !last &&
      !stopping() && ending_.early_stop.empty())
    save_periodically();
}

// Damaged data stops the run on every rank (evaluate.h); this step is complete.
void TrainingRun::evaluate_now(StepFigures& f) {
  const SnapshotGate::Open open(&gate_);  // an evaluation changes nothing a checkpoint holds
  const ag::AutocastScope autocast = engine_->precision();
  // the step's idle blocks go back first: an evaluation's batches are of other sizes, and
  // holding both is more than the plan's activations (a LoRA run: +110 MB at 25M weights)
  ag::release_cached_blocks();
  try {
    cfg_.task->evaluate(*model_, cfg_, data_, f);
  } catch (const data::DataError& e) {
    ending_.damaged_data = e.what();
  }
  progress_.last_val = f.val_loss;
}

void TrainingRun::notify(bool final) const {
  if (!observer_) return;
  try {
    observer_(*this, final);
  } catch (const std::exception& e) {
    warn(fmt::format("step {}: {}; training goes on", progress_.step, e.what()));
  }
}

bool TrainingRun::stop_at_reached() const {
  if (cfg_.stop_at <= 0 || progress_.step < cfg_.stop_at) return false;
  sayf("{}attograd: stopping after step {} as asked (--stop-at)\n", report_->fresh_line(),
       progress_.step);
  return true;
}

// --max-time: every rank stops after the same step (the first at which one of them is over).
bool TrainingRun::max_time_reached() {
  if (cfg_.max_time <= 0) return false;
  bool over = report_->elapsed() >= cfg_.max_time;
  if (world_.distributed()) over = world_.any(over);
  if (!over || progress_.step >= cfg_.steps) return false;
  sayf("{}attograd: stopping after step {}: --max-time {}s reached\n", report_->fresh_line(),
       progress_.step, cfg_.max_time);
  ending_.interrupted = true;
  return true;
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
