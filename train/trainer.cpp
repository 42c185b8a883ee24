#include "train/trainer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "optim/optim.h"
#include "train/memory_plan.h"

namespace train {

namespace {

std::atomic<bool> g_stop_requested{false};

extern "C" void on_stop_signal(int) {
  g_stop_requested = true;
  // a second signal stops at once
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read data file '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Where the final state goes when the checkpoint path cannot be written: the temporary
// folder, which is on another file system often enough to matter.
std::string rescue_path(const std::string& out) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string folder = tmp && *tmp ? tmp : "/tmp";
  return fmt::format("{}/attograd-rescue-{}-{}", folder, ::getpid(),
                     std::filesystem::path(out).filename().string());
}

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

RunData load_run_data(const RunConfig& cfg, const io::TokenizerSection* saved) {
  RunData d;
  std::string text;
  if (cfg.data.empty()) {
    data::Corpus corpus = data::builtin_corpus(cfg.corpus_seed);
    text = std::move(corpus.text);
    d.ideal_loss = corpus.ideal_loss;
    d.source = fmt::format("built-in corpus (seed {}, {} chars)", cfg.corpus_seed, text.size());
  } else {
    text = read_text_file(cfg.data);
    d.source = fmt::format("{} ({} bytes)", cfg.data, text.size());
  }
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
    throw std::invalid_argument(fmt::format("{}: {}", cfg.data.empty() ? "corpus" : cfg.data, e.what()));
  }
  data::Split split = data::split_tokens(ids, cfg.val_fraction);
  d.train = std::move(split.train);
  d.val = std::move(split.val);
  return d;
}

// ------------------------------------------------------------------ evaluation
EvalResult evaluate_with_grads(nn::GPT& model, const std::vector<int64_t>& ids, int64_t T,
                               const std::string* grads_path) {
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

std::pair<double, int64_t> evaluate(nn::GPT& model, const std::vector<int64_t>& ids,
                                    int64_t max_windows, int64_t batch) {
  const int64_t T = model.config().context_length;
  std::vector<int64_t> used = ids;
  if (max_windows > 0 && static_cast<int64_t>(ids.size()) > max_windows * T + 1)
    used.resize(max_windows * T + 1);  // the first max_windows windows
  (void)batch;
  EvalResult r = evaluate_with_grads(model, used, T, nullptr);
  return {r.tokens ? r.loss : NAN, r.tokens};
}

std::unique_ptr<nn::GPT> model_from_checkpoint(const io::Checkpoint& ckpt) {
  RunConfig cfg = RunConfig::from_json(ckpt.config);
  auto model = std::make_unique<nn::GPT>(cfg.model, cfg.seed);
  io::load_model_weights(ckpt, *model);
  return model;
}

// ------------------------------------------------------------------ training
namespace {

struct Reporter {
  const RunConfig& cfg;
  std::ofstream metrics;
  bool tty = isatty(STDOUT_FILENO);
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  int64_t first_step = 0;

  explicit Reporter(const RunConfig& c, int64_t start_step) : cfg(c), first_step(start_step) {
    if (!cfg.metrics.empty()) {
      metrics.open(cfg.metrics, std::ios::app);
      if (!metrics) throw std::runtime_error(fmt::format("cannot open metrics file '{}'", cfg.metrics));
    }
  }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  void progress(int64_t step, double loss) {
    if (!tty) return;
    const int width = 24;
    const int filled = static_cast<int>(width * step / std::max<int64_t>(cfg.steps, 1));
    fmt::print("\r[{}{}] step {}/{} loss {:.4f}\033[K", std::string(filled, '#'),
               std::string(width - filled, '.'), step, cfg.steps, loss);
    std::fflush(stdout);
  }
  void line(int64_t step, double loss, double val_loss, double lr, double grad_norm, int64_t tokens) {
    const double secs = elapsed();
    const double done = static_cast<double>(step - first_step);
    const double tok_s = secs > 0 ? tokens / secs : 0;
    const double eta = done > 0 ? secs / done * (cfg.steps - step) : 0;
    std::string val = std::isnan(val_loss) ? "" : fmt::format(" | val {:.4f}", val_loss);
    fmt::print("{}step {:>5}/{} | loss {:.4f}{} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | ETA {}\n",
               tty ? "\r\033[K" : "", step, cfg.steps, loss, val, lr, grad_norm, tok_s,
               format_duration(eta));
    std::fflush(stdout);
    if (metrics) {
      nlohmann::json j = {{"step", step}, {"loss", loss}, {"lr", lr}, {"grad_norm", grad_norm},
                          {"tokens_per_s", tok_s}, {"elapsed_s", secs}, {"eta_s", eta}};
      if (!std::isnan(val_loss)) j["val_loss"] = val_loss;
      metrics << j.dump() << "\n";
      metrics.flush();
    }
  }
};

io::Checkpoint make_checkpoint(const RunConfig& cfg, int64_t step, const nn::GPT& model,
                               const optim::Optimizer& opt, const data::Tokenizer& tok,
                               const ag::Generator& data_gen, nn::GPT& mutable_model) {
  io::Checkpoint c;
  c.config = cfg.to_json();
  c.step = step;
  c.model = model.named_parameters();
  optim::OptimizerState st = opt.state();
  c.optimizer = io::OptimizerSection{st.type, st.scalars, st.tensors};
  c.tokenizer = tokenizer_section(tok);
  c.rng = {{"data", data_gen.state()}, {"dropout", mutable_model.dropout_generator().state()}};
  return c;
}

ag::Generator::State find_rng(const io::Checkpoint& c, const std::string& name, const std::string& path) {
  for (const auto& [n, s] : c.rng)
    if (n == name) return s;
  throw std::runtime_error(fmt::format("{}: no /rng/{} state, so the run cannot resume exactly", path, name));
}

}  // namespace

int run_training(RunConfig cfg, const std::string& resume_path) {
  ag::set_num_threads(cfg.threads);
  std::optional<io::Checkpoint> resumed;
  if (!resume_path.empty()) {
    resumed = io::load_checkpoint(resume_path);
    if (!resumed->optimizer || resumed->rng.empty())
      throw std::runtime_error(fmt::format(
          "{} holds weights only (no optimizer or RNG state): resume needs a training "
          "checkpoint; start a new run from its weights with 'train --init-from {}'",
          resume_path, resume_path));
  }
  std::optional<io::Checkpoint> init;
  if (!cfg.init_from.empty()) init = io::load_checkpoint(cfg.init_from);

  const io::TokenizerSection* saved_tok = resumed ? &resumed->tokenizer : init ? &init->tokenizer : nullptr;
  RunData d = load_run_data(cfg, saved_tok);
  if (cfg.model.vocab_size == 0) cfg.model.vocab_size = d.tokenizer->vocab_size();
  if (cfg.model.vocab_size < d.tokenizer->vocab_size())
    throw std::invalid_argument(fmt::format("vocab_size {} is smaller than the tokenizer's {}",
                                            cfg.model.vocab_size, d.tokenizer->vocab_size()));
  cfg.validate();
  const int64_t T = cfg.model.context_length;
  if (static_cast<int64_t>(d.train.size()) < T + 1)
    throw std::invalid_argument(fmt::format("the training split has {} tokens, fewer than "
                                            "context_length + 1 = {}",
                                            d.train.size(), T + 1));

  // the plan before anything large is allocated: what the run will hold in memory
  MemoryPlan plan = plan_memory(cfg, cfg.model.num_parameters());
  fmt::print("attograd: {} parameters | data {} | {} train / {} val tokens | vocab {}\n",
             cfg.model.num_parameters(), d.source, d.train.size(), d.val.size(), cfg.model.vocab_size);
  fmt::print("{}\n", plan.describe());
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
  ag::Generator data_gen(cfg.seed + 2);
  int64_t step = 0;
  if (resumed) {
    optim::OptimizerState st{resumed->optimizer->type, resumed->optimizer->scalars,
                             resumed->optimizer->tensors};
    opt.load_state(st);
    data_gen.set_state(find_rng(*resumed, "data", resume_path));
    model.dropout_generator().set_state(find_rng(*resumed, "dropout", resume_path));
    step = resumed->step;
  }

  if (d.ideal_loss >= 0)
    fmt::print("baselines on val: unigram {:.4f} | bigram {:.4f} | corpus floor (ideal) {:.4f}\n",
               data::unigram_loss(d.val, cfg.model.vocab_size),
               data::bigram_loss(d.train, d.val, cfg.model.vocab_size), d.ideal_loss);

  data::BatchSampler sampler(&d.train, cfg.batch_size, T);
  // --detect-anomaly, and --inject-nan PHASE:MODULE[@STEP] (a fault-injection aid for
  // testing that detection: it arms at STEP, default 1)
  ag::set_detect_anomaly(cfg.detect_anomaly);
  std::string inject_spec = cfg.inject_nan;
  int64_t inject_at = inject_spec.empty() ? -1 : 1;
  if (const auto at = inject_spec.find('@'); at != std::string::npos) {
    try {
      inject_at = std::stoll(inject_spec.substr(at + 1));
    } catch (const std::exception&) {
      throw std::invalid_argument(fmt::format("--inject-nan '{}': the step after '@' is not a number", cfg.inject_nan));
    }
    inject_spec.resize(at);
  }
  ag::set_nan_injection(inject_spec);  // validates the spec
  ag::set_nan_injection("");
  Reporter report(cfg, step);
  auto params = model.parameters();
  g_stop_requested = false;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  auto save = [&](int64_t at, const std::string& path) {
    io::save_checkpoint(path, make_checkpoint(cfg, at, model, opt, *d.tokenizer, data_gen, model));
  };
  int64_t last_saved = resumed ? step : -1;
  int64_t tokens = 0;
  double last_loss = NAN, last_val = NAN;
  int exit_code = 0;
  while (step < cfg.steps) {
    ++step;
    const double lr = schedule.lr_at(step);
    opt.set_lr(lr);
    auto [x, y] = sampler.next(data_gen);
    opt.zero_grad();
    if (inject_at == step) ag::set_nan_injection(inject_spec);
    // A non-finite value stops the run before it touches the weights: the last
    // checkpoint stays the last good state.
    auto last_good = [&] {
      return last_saved >= 0 ? fmt::format("The last good checkpoint is {} (step {}).", cfg.out, last_saved)
                             : std::string("No checkpoint was written in this run.");
    };
    auto stop_non_finite = [&](const char* what, double value) {
      fmt::print(stderr, "{}attograd: {} is {} at step {}; stopping before the update. {}\n",
                 report.tty ? "\n" : "", what, std::isnan(value) ? "NaN" : value > 0 ? "+inf" : "-inf",
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
                 report.tty ? "\n" : "", step, e.what(), last_good());
      exit_code = 1;
      break;
    }
    if (!std::isfinite(grad_norm)) {
      stop_non_finite("the gradient norm", grad_norm);
      break;
    }
    opt.step();
    tokens += cfg.batch_size * T;
    last_loss = loss;
    const bool last = step == cfg.steps;
    const bool eval_now = !d.val.empty() && ((cfg.eval_interval > 0 && step % cfg.eval_interval == 0) || last);
    if (eval_now) last_val = evaluate(model, d.val, cfg.eval_windows).first;
    if (step % cfg.log_interval == 0 || last || eval_now || step == 1)
      report.line(step, loss, eval_now ? last_val : NAN, lr, grad_norm, tokens);
    else
      report.progress(step, loss);
    if (cfg.checkpoint_interval > 0 && step % cfg.checkpoint_interval == 0 && !last) {
      // A failed periodic save (full disk, folder gone) loses nothing: the run goes on
      // with its state in memory and tries again at the next interval.
      try {
        save(step, cfg.out);
        last_saved = step;
      } catch (const io::CheckpointError& e) {
        fmt::print(stderr, "{}attograd: warning: step {}: {}; training continues and tries again at step {} ({})\n",
                   report.tty ? "\n" : "", step, e.what(), step + cfg.checkpoint_interval,
                   last_saved >= 0 ? fmt::format("last good checkpoint: step {}", last_saved)
                                   : std::string("no checkpoint written yet"));
      }
    }
    if (cfg.stop_at > 0 && step >= cfg.stop_at) {
      fmt::print("{}attograd: stopping after step {} as asked (--stop-at)\n", report.tty ? "\n" : "", step);
      break;
    }
    if (g_stop_requested) {
      fmt::print("{}attograd: stopping on signal after step {}\n", report.tty ? "\n" : "", step);
      break;
    }
  }
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (exit_code != 0) return exit_code;
  if (last_saved != step) {
    try {
      save(step, cfg.out);
    } catch (const io::CheckpointError& e) {
      // the run's state is still in memory: keep it somewhere before giving up
      const std::string rescue = rescue_path(cfg.out);
      try {
        save(step, rescue);
      } catch (const io::CheckpointError& e2) {
        throw std::runtime_error(fmt::format("{}; the rescue copy failed too: {}", e.what(), e2.what()));
      }
      throw std::runtime_error(fmt::format("{}; the run's state (step {}) was saved to {} instead",
                                           e.what(), step, rescue));
    }
  }
  fmt::print("saved checkpoint {} (step {})\n", cfg.out, step);
  if (!std::isnan(last_val) && d.ideal_loss >= 0)
    fmt::print("val loss {:.4f}, {:.4f} above the corpus floor {:.4f}\n", last_val,
               last_val - d.ideal_loss, d.ideal_loss);
  const bool finished = step == cfg.steps;
  if (cfg.sample_tokens > 0 && finished) {
    ag::Generator gen(cfg.seed);
    std::vector<int64_t> prompt{d.val.empty() ? d.train.front() : d.val.front()};
    model.eval();
    ag::Tensor ids = model.generate(ag::from_vector(prompt, {1, 1}), cfg.sample_tokens, 0.8, 0, gen);
    std::vector<int64_t> out;
    for (double v : ids.to_vector()) out.push_back(static_cast<int64_t>(v));
    fmt::print("sample:\n{}\n", d.tokenizer->decode(out));
  }
  (void)last_loss;
  return 0;
}

}  // namespace train
