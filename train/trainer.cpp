#include "train/trainer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "autograd/test_hooks.h"  // set_nan_injection, for --inject-nan
#include "autograd/threading.h"
#include "io/files.h"
#include "optim/optim.h"
#include "train/console.h"
#include "train/memory_plan.h"
#include "train/stop_signals.h"

namespace train {

namespace {

std::string format_duration(double seconds) {
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60)
                   : fmt::format("{}:{:02d}", s / 60, s % 60);
}

}  // namespace

// ------------------------------------------------------------------ data
std::unique_ptr<data::Tokenizer> make_tokenizer(const io::TokenizerSection& section) {
  if (section.type == "char") return std::make_unique<data::CharTokenizer>(section.vocab);
  if (section.type == "byte") return std::make_unique<data::ByteTokenizer>();
  throw std::runtime_error(fmt::format("unsupported tokenizer type '{}'", section.type));
}

io::TokenizerSection tokenizer_section(const data::Tokenizer& tok) {
  io::TokenizerSection s;
  s.type = tok.type();
  if (auto* ct = dynamic_cast<const data::CharTokenizer*>(&tok)) s.vocab = ct->code_points();
  return s;
}

int64_t text_bytes_of(const RunConfig& cfg) {
  if (cfg.data.empty())
    return static_cast<int64_t>(data::builtin_corpus(cfg.corpus_seed).text.size());
  return io::regular_file_size(cfg.data, "data file");
}

RunData load_run_data(const RunConfig& cfg, const io::TokenizerSection* saved,
                      const std::function<void(const std::string&)>& check_identity) {
  RunData d;
  std::string text;
  if (cfg.data.empty()) {
    data::Corpus corpus = data::builtin_corpus(cfg.corpus_seed);
    text = std::move(corpus.text);
    d.ideal_loss = corpus.ideal_loss;
    d.source = fmt::format("built-in corpus (seed {}, {} chars)", cfg.corpus_seed, text.size());
  } else {
    text = io::read_input_file(cfg.data, "data file", std::numeric_limits<int64_t>::max());
    d.source = fmt::format("{} ({} bytes)", cfg.data, text.size());
  }
  d.identity = data::text_identity(text);
  if (check_identity) check_identity(d.identity);  // before the text meets the tokenizer
  d.text_bytes = static_cast<int64_t>(text.size());
  std::vector<int64_t> ids;
  try {  // text problems (bad UTF-8, unknown characters) name the file
    if (saved)
      d.tokenizer = make_tokenizer(*saved);
    else if (cfg.tokenizer == "byte")
      d.tokenizer = std::make_unique<data::ByteTokenizer>();
    else
      d.tokenizer = std::make_unique<data::CharTokenizer>(data::CharTokenizer::from_text(text));
    ids = d.tokenizer->encode(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(
        fmt::format("{}: {}", cfg.data.empty() ? "corpus" : cfg.data, e.what()));
  }
  std::string().swap(text);  // the ids replace the text
  data::Split split = data::split_tokens(std::move(ids), cfg.val_fraction);
  d.train = std::move(split.train);
  d.val = std::move(split.val);
  return d;
}

// ------------------------------------------------------------------ evaluation
EvalResult evaluate_with_grads(nn::GPT& model, std::span<const int64_t> ids, int64_t T,
                               const std::string* grads_path,
                               const std::function<bool()>& cancelled) {
  constexpr int64_t kBatch = 16;
  if (T == 0) T = model.config().context_length;
  const auto windows = data::eval_windows(ids.size(), T);
  EvalResult r;
  r.windows = static_cast<int64_t>(windows.size());
  r.tokens = r.windows * T;
  if (r.tokens == 0) return r;
  const bool was_training = model.is_training();
  model.eval();
  model.zero_grad();
  std::optional<ag::NoGradGuard> no_grad;
  if (!grads_path) no_grad.emplace();
  double total = 0;
  for (size_t w = 0; w < windows.size(); w += kBatch) {
    if (cancelled && cancelled()) {
      model.zero_grad();
      model.train(was_training);
      return EvalResult{};
    }
    const int64_t n = std::min<int64_t>(kBatch, windows.size() - w);
    std::vector<int64_t> x, y;
    for (int64_t b = 0; b < n; ++b) {
      const int64_t s = windows[w + b].first;
      x.insert(x.end(), ids.begin() + s, ids.begin() + s + T);
      y.insert(y.end(), ids.begin() + s + 1, ids.begin() + s + T + 1);
    }
    auto out = model.forward(ag::from_vector(x, {n, T}), ag::from_vector(y, {n, T}));
    total += out.loss.item() * n * T;
    // the batch's share of the mean over every target, so the gradients add up to it
    if (grads_path) (out.loss * (static_cast<double>(n * T) / r.tokens)).backward();
  }
  r.loss = total / r.tokens;
  if (grads_path) {
    io::Checkpoint g;
    RunConfig rc;
    rc.model = model.config();
    g.config = rc.to_json();
    g.config["contents"] = "gradients of the evaluation loss";
    g.config["loss"] = r.loss;
    g.config["tokens"] = r.tokens;
    for (const auto& [name, p] : model.named_parameters())
      g.model.emplace_back(name, p.grad().defined() ? p.grad() : ag::zeros_like(p));
    g.tokenizer.type = "none";
    io::save_checkpoint(*grads_path, g);
    model.zero_grad();
  }
  model.train(was_training);
  return r;
}

std::pair<double, int64_t> evaluate(nn::GPT& model, std::span<const int64_t> ids,
                                    int64_t max_windows, const std::function<bool()>& cancelled) {
  const int64_t T = model.config().context_length;
  if (max_windows > 0 && static_cast<int64_t>(ids.size()) > max_windows * T + 1)
    ids = ids.first(max_windows * T + 1);  // the first max_windows windows
  EvalResult r = evaluate_with_grads(model, ids, T, nullptr, cancelled);
  return {r.tokens ? r.loss : NAN, r.tokens};
}

void check_weights_fit(const io::Checkpoint& ckpt, const nn::GPTConfig& model_cfg,
                       const std::string& mismatch) {
  auto fail = [&](const std::string& what) {
    throw io::CheckpointError(fmt::format("'{}' {}: {}", ckpt.source, mismatch, what));
  };
  std::unordered_map<std::string, const ag::Tensor*> in_file;
  for (const auto& [name, t] : ckpt.model) in_file.emplace(name, &t);
  for (const auto& [name, shape] : model_cfg.parameter_shapes()) {
    const auto it = in_file.find(name);
    if (it == in_file.end()) fail(fmt::format("'{}' is missing from the file", name));
    if (it->second->shape() != shape)
      fail(fmt::format("'{}' has shape {} in the file but {} in the model", name,
                       ag::shape_str(it->second->shape()), ag::shape_str(shape)));
    in_file.erase(it);
  }
  for (const auto& [name, t] : ckpt.model)
    if (in_file.count(name))
      fail(fmt::format("the file has '{}', which the model does not", data::printable(name)));
}

std::unique_ptr<nn::GPT> model_from_checkpoint(const io::Checkpoint& ckpt) {
  RunConfig cfg;
  try {
    cfg = RunConfig::from_json(ckpt.config);
    cfg.model.validate();
  } catch (const std::invalid_argument& e) {
    throw io::CheckpointError(fmt::format("'{}': {}", ckpt.source, e.what()));
  }
  check_weights_fit(ckpt, cfg.model, "disagrees with its own config");
  auto model = std::make_unique<nn::GPT>(cfg.model, cfg.seed);
  io::load_model_weights(ckpt, *model);
  return model;
}

// ------------------------------------------------------------------ training
namespace {

struct Reporter {
  const RunConfig& cfg;
  std::optional<MetricsFile> metrics;
  bool tty = isatty(STDOUT_FILENO);
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  int64_t first_step = 0;

  explicit Reporter(const RunConfig& c, int64_t start_step) : cfg(c), first_step(start_step) {
    if (!cfg.metrics.empty()) metrics.emplace(cfg.metrics);
  }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  // What follows a progress bar on a terminal starts on a line of its own.
  const char* fresh_line() const { return tty ? "\n" : ""; }
  void progress(int64_t step, double loss) {
    if (!tty) return;
    const int width = 24;
    const int filled = static_cast<int>(width * step / std::max<int64_t>(cfg.steps, 1));
    sayf("\r[{}{}] step {}/{} loss {:.4f}\033[K", std::string(filled, '#'),
         std::string(width - filled, '.'), step, cfg.steps, loss);
  }
  void line(int64_t step, double loss, double val_loss, double lr, double grad_norm,
            int64_t tokens) {
    const double secs = elapsed();
    const double done = static_cast<double>(step - first_step);
    const double tok_s = secs > 0 ? tokens / secs : 0;
    const double eta = done > 0 ? secs / done * (cfg.steps - step) : 0;
    std::string val = std::isnan(val_loss) ? "" : fmt::format(" | val {:.4f}", val_loss);
    sayf("{}step {:>5}/{} | loss {:.4f}{} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | ETA {}\n",
         tty ? "\r\033[K" : "", step, cfg.steps, loss, val, lr, grad_norm, tok_s,
         format_duration(eta));
    if (metrics) {
      nlohmann::json j = {
          {"step", step},          {"loss", loss},      {"lr", lr},    {"grad_norm", grad_norm},
          {"tokens_per_s", tok_s}, {"elapsed_s", secs}, {"eta_s", eta}};
      if (!std::isnan(val_loss)) j["val_loss"] = val_loss;
      metrics->append(j.dump());
    }
  }
};

io::Checkpoint make_checkpoint(const RunConfig& cfg, int64_t step, nn::GPT& model,
                               const optim::Optimizer& opt, const RunData& d,
                               const ag::Generator& data_gen) {
  io::Checkpoint c;
  c.config = cfg.to_json();
  c.step = step;
  c.model = model.named_parameters();
  optim::OptimizerState st = opt.state();
  c.optimizer = io::OptimizerSection{st.type, st.scalars, st.tensors};
  c.tokenizer = tokenizer_section(*d.tokenizer);
  c.data_identity = d.identity;
  c.rng = {{"data", data_gen.state()}, {"dropout", model.dropout_generator().state()}};
  return c;
}

ag::Generator::State find_rng(const io::Checkpoint& c, const std::string& name) {
  for (const auto& [n, s] : c.rng)
    if (n == name) return s;
  throw std::runtime_error(
      fmt::format("{}: no /rng/{} state, so the run cannot resume exactly", c.source, name));
}

// Refuses, before the text is read, data that alone would not fit in memory.
void check_data_fits(const RunConfig& cfg) {
  const int64_t needed = data_bytes_for_text(text_bytes_of(cfg));
  const int64_t available = available_memory();
  if (available > 0 && needed > available)
    throw std::runtime_error(fmt::format(
        "reading '{}' needs about {} (the text and its token ids) but only {} of memory is "
        "available",
        cfg.data, format_bytes(needed), format_bytes(available)));
}

// A resumed run must continue on the text it trained on, wherever that text is now.
void check_same_data(const io::Checkpoint& resumed, const std::string& identity,
                     const RunConfig& cfg) {
  if (resumed.data_identity.empty() || resumed.data_identity == identity) return;
  throw std::runtime_error(fmt::format(
      "{} is not the text this run trained on ({} has data_identity {}, the text has {}); resume "
      "needs the same data (to train on new text, start from these weights with 'train "
      "--init-from {}')",
      cfg.data.empty() ? "the built-in corpus" : "'" + cfg.data + "'", resumed.source,
      data::printable(resumed.data_identity), identity, resumed.source));
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
          "--inject-nan '{}': the step after '@' is not a number", data::printable(option)));
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
                    data::printable(module), "blocks.0.attn.qkv", "blocks.0.mlp.fc2"));
  return {spec, at};
}

}  // namespace

int run_training(RunConfig cfg, const io::Checkpoint* resumed) {
  ag::set_num_threads(cfg.threads);
  if (resumed && (!resumed->optimizer || resumed->rng.empty()))
    throw std::runtime_error(
        fmt::format("{} holds weights only (no optimizer or RNG state): resume needs a training "
                    "checkpoint; start a new run from its weights with 'train --init-from {}'",
                    resumed->source, resumed->source));
  std::optional<io::Checkpoint> init;
  if (!cfg.init_from.empty()) init = io::load_checkpoint(cfg.init_from);

  check_data_fits(cfg);
  const io::TokenizerSection* saved_tok = resumed ? &resumed->tokenizer
                                          : init  ? &init->tokenizer
                                                  : nullptr;
  RunData d = load_run_data(cfg, saved_tok, [&](const std::string& identity) {
    if (resumed) check_same_data(*resumed, identity, cfg);
  });
  if (cfg.model.vocab_size == 0) cfg.model.vocab_size = d.tokenizer->vocab_size();
  if (cfg.model.vocab_size < d.tokenizer->vocab_size())
    throw std::invalid_argument(fmt::format("vocab_size {} is smaller than the tokenizer's {}",
                                            cfg.model.vocab_size, d.tokenizer->vocab_size()));
  cfg.validate();
  const int64_t T = cfg.model.context_length;
  if (static_cast<int64_t>(d.train.size()) < T + 1)
    throw std::invalid_argument(
        fmt::format("the training split has {} tokens, fewer than "
                    "context_length + 1 = {}",
                    d.train.size(), T + 1));
  // before anything large is allocated: the weights must fit, and so must the run
  if (init) check_weights_fit(*init, cfg.model);
  if (resumed) check_weights_fit(*resumed, cfg.model);
  const int64_t held = static_cast<int64_t>((d.train.size() + d.val.size()) * sizeof(int64_t));
  MemoryPlan plan = plan_memory(cfg, cfg.model.num_parameters(), held);
  sayf(
      "attograd: {} parameters | data {} | {} train / {} val tokens | vocab {} | BLAS {} ({}, {} "
      "threads)\n",
      cfg.model.num_parameters(), d.source, d.train.size(), d.val.size(), cfg.model.vocab_size,
      "OpenBLAS", ag::blas_kernel_name(), cfg.threads);
  sayf("{}\n", plan.describe());
  if (!plan.fits())
    throw std::runtime_error(fmt::format(
        "this run needs about {} but only {} of memory is available; lower --batch-size, "
        "--context-length or the model size",
        format_bytes(plan.total()), format_bytes(plan.available)));
  nn::GPT model(cfg.model, cfg.seed);
  if (init) io::load_model_weights(*init, model);
  if (resumed) io::load_model_weights(*resumed, model);
  model.train();

  auto groups = optim::decay_groups(model.named_parameters(), cfg.weight_decay);
  optim::AdamW opt(groups, cfg.lr, cfg.beta1, cfg.beta2, cfg.eps);
  optim::WarmupCosineLR schedule(cfg.lr, cfg.effective_min_lr(), cfg.warmup_steps, cfg.steps);
  ag::Generator data_gen(cfg.seed + ag::kDataStream);
  int64_t step = 0;
  if (resumed) {
    optim::OptimizerState st{resumed->optimizer->type, resumed->optimizer->scalars,
                             resumed->optimizer->tensors};
    opt.load_state(st);
    data_gen.set_state(find_rng(*resumed, "data"));
    model.dropout_generator().set_state(find_rng(*resumed, "dropout"));
    step = resumed->step;
  }

  if (d.ideal_loss >= 0)
    sayf("baselines on val: unigram {:.4f} | bigram {:.4f} | corpus floor (ideal) {:.4f}\n",
         data::unigram_loss(d.val, cfg.model.vocab_size),
         data::bigram_loss(d.train, d.val, cfg.model.vocab_size), d.ideal_loss);

  data::BatchSampler sampler(&d.train, cfg.batch_size, T);
  ag::set_detect_anomaly(cfg.detect_anomaly);
  const auto [inject_spec, inject_at] = parse_nan_injection(cfg.inject_nan, model);
  Reporter report(cfg, step);
  auto params = model.parameters();
  StopSignals stop_signals;
  auto save = [&](int64_t at, const std::string& path) {
    io::save_checkpoint(path, make_checkpoint(cfg, at, model, opt, d, data_gen));
  };
  // a resume that writes back to its own file starts with that file saved
  int64_t last_saved = resumed && io::same_file(resumed->source, cfg.out) ? step : -1;
  int64_t tokens = 0;
  double last_val = NAN;
  int exit_code = 0;
  while (step < cfg.steps && !StopSignals::requested()) {
    ++step;
    const double lr = schedule.lr_at(step);
    opt.set_lr(lr);
    auto [x, y] = sampler.next(data_gen);
    opt.zero_grad();
    if (inject_at == step) ag::set_nan_injection(inject_spec);
    // A non-finite value stops the run before it touches the weights: the last
    // checkpoint stays the last good state.
    auto last_good = [&] {
      return last_saved >= 0
                 ? fmt::format("The last good checkpoint is {} (step {}).", cfg.out, last_saved)
                 : std::string("No checkpoint was written in this run.");
    };
    auto stop_non_finite = [&](const char* what, double value) {
      fmt::print(stderr, "{}attograd: {} is {} at step {}; stopping before the update. {}\n",
                 report.fresh_line(), what,
                 std::isnan(value) ? "NaN"
                 : value > 0       ? "+inf"
                                   : "-inf",
                 step, last_good());
      exit_code = 1;
    };
    double loss = 0, grad_norm = 0;
    try {
      auto out = model.forward(x, y);
      loss = out.loss.item();
      if (!std::isfinite(loss)) {
        stop_non_finite("the loss", loss);
        break;
      }
      out.loss.backward();
      grad_norm = optim::clip_grad_norm(params, cfg.grad_clip > 0 ? cfg.grad_clip : INFINITY);
    } catch (const ag::AnomalyError& e) {
      fmt::print(stderr, "{}attograd: step {}: {}; stopping before the update. {}\n",
                 report.fresh_line(), step, e.what(), last_good());
      exit_code = 1;
      break;
    }
    if (!std::isfinite(grad_norm)) {
      stop_non_finite("the gradient norm", grad_norm);
      break;
    }
    opt.step();
    tokens += cfg.batch_size * T;
    const bool last = step == cfg.steps;
    const bool eval_now =
        !d.val.empty() && ((cfg.eval_interval > 0 && step % cfg.eval_interval == 0) || last);
    if (eval_now) last_val = evaluate(model, d.val, cfg.eval_windows, StopSignals::requested).first;
    if (step % cfg.log_interval == 0 || last || eval_now || step == 1)
      report.line(step, loss, eval_now ? last_val : NAN, lr, grad_norm, tokens);
    else
      report.progress(step, loss);
    if (cfg.checkpoint_interval > 0 && step % cfg.checkpoint_interval == 0 && !last &&
        !StopSignals::requested()) {
      // A failed periodic save (full disk, folder gone) loses nothing: the run goes on
      // with its state in memory and tries again at the next interval.
      try {
        save(step, cfg.out);
        last_saved = step;
      } catch (const io::CheckpointError& e) {
        warn(fmt::format("step {}: {}; training continues and tries again at step {} ({})", step,
                         e.what(), step + cfg.checkpoint_interval,
                         last_saved >= 0 ? fmt::format("last good checkpoint: step {}", last_saved)
                                         : std::string("no checkpoint written yet")));
      }
    }
    if (cfg.stop_at > 0 && step >= cfg.stop_at) {
      sayf("{}attograd: stopping after step {} as asked (--stop-at)\n", report.fresh_line(), step);
      break;
    }
  }
  if (StopSignals::requested())
    fmt::print(stderr, "{}attograd: {}: stopping after step {}; saving {}\n", report.fresh_line(),
               signal_name(StopSignals::first()), step, cfg.out);
  if (exit_code != 0) return exit_code;
  if (last_saved != step) {
    try {
      save(step, cfg.out);
    } catch (const io::CheckpointError& e) {
      // the run's state is still in memory: keep it somewhere before giving up
      std::string rescue;
      try {
        rescue = io::make_rescue_path(cfg.out);
        save(step, rescue);
      } catch (const std::exception& e2) {
        throw std::runtime_error(
            fmt::format("{}; the rescue copy failed too: {}", e.what(), e2.what()));
      }
      throw std::runtime_error(fmt::format("{}; the run's state (step {}) was saved to {} instead",
                                           e.what(), step, rescue));
    }
    sayf("saved checkpoint {} (step {})\n", cfg.out, step);
  } else if (resumed && step == resumed->step) {
    sayf("no step was trained (the run is at step {} of {}): {} is unchanged\n", step, cfg.steps,
         cfg.out);
  } else {
    sayf("saved checkpoint {} (step {})\n", cfg.out, step);
  }
  if (!std::isnan(last_val) && d.ideal_loss >= 0)
    sayf("val loss {:.4f}, {:.4f} above the corpus floor {:.4f}\n", last_val,
         last_val - d.ideal_loss, d.ideal_loss);
  const bool finished = step == cfg.steps;
  if (cfg.sample_tokens > 0 && finished && !StopSignals::requested()) {
    ag::Generator gen(cfg.seed);
    std::vector<int64_t> prompt{d.val.empty() ? d.train.front() : d.val.front()};
    model.eval();
    ag::Tensor ids =
        model.generate(ag::from_vector(prompt, {1, 1}), cfg.sample_tokens, 0.8, 0, gen);
    std::vector<int64_t> out;
    for (double v : ids.to_vector()) out.push_back(static_cast<int64_t>(v));
    sayf("sample:\n{}\n", d.tokenizer->decode(out));
  }
  return 0;
}

}  // namespace train
