// `eval`: the evaluation loss (over docs/model.md's scoring windows, side by side or sliding
// with --stride) of a checkpoint on a text file or a prepared folder, its validation part,
// training part or all of it (--split: a text cut as training cuts it), in nats per token
// and in bits per byte of text; or, with --multiple-choice, its accuracy on multiple-choice
// items (train/multiple_choice.h); or, on a classifier's checkpoint, its accuracy and
// per-label scores on a labelled file (classification_commands.h); or, on an instruct or
// chat checkpoint (or with --task instruct|chat), the loss over the tokens its training
// counts: the responses of instruction records, the assistant turns of conversations.
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/posix_file.h"
#include "base/utf8.h"
#include "cli/classification_commands.h"
#include "cli/cli.h"
#include "cli/command_support.h"
#include "data/data_error.h"
#include "data/identity.h"
#include "data/instructions.h"
#include "data/prepared.h"
#include "data/text_ids.h"
#include "io/checkpoint.h"
#include "io/tokenizer_section.h"
#include "train/gemm_agreement.h"
#include "train/tasks/example_task.h"
#include "train/train.h"

namespace cli {

namespace {

// eval --task: what --data holds, for a checkpoint that does not say (absent: its own).
enum class EvalTask { classify, instruct, chat };
// eval --split: the part of a text or prepared folder scored
enum class Split { val, train, all };

}  // namespace
}  // namespace cli

template <>
struct base::ChoiceNames<cli::EvalTask> {
  static constexpr const char* key = "--task";
  static constexpr std::array<std::pair<cli::EvalTask, const char*>, 3> rows = {
      {{cli::EvalTask::classify, "classify"},
       {cli::EvalTask::instruct, "instruct"},
       {cli::EvalTask::chat, "chat"}}};
};
template <>
struct base::ChoiceNames<cli::Split> {
  static constexpr const char* key = "--split";
  static constexpr std::array<std::pair<cli::Split, const char*>, 3> rows = {
      {{cli::Split::val, "val"}, {cli::Split::train, "train"}, {cli::Split::all, "all"}}};
};

namespace cli {
namespace {

struct EvalOptions {
  std::string path, data_path, dump, choices;
  std::optional<Split> split;  // absent: val of a folder or of the text a run trained on, else all
  std::optional<EvalTask> task;
  int64_t context = 0, limit = 0, stride = 0;
  int threads = ag::kDefaultThreads;
  bool overwrite = false;
};

po::options_description eval_options(EvalOptions& o) {
  po::options_description desc("eval options");
  auto add = desc.add_options();
  add("help,h", "show this help");
  add("checkpoint", po::value(&o.path),
      "checkpoint to evaluate (also the first bare argument; default: attograd.h5 when there "
      "is one here)");
  add("data", po::value(&o.data_path),
      "UTF-8 text file, or a folder made by 'attograd prepare'; for a checkpoint trained "
      "with --task instruct, instruction records (JSON or JSON lines); default: the data the "
      "checkpoint trained on, when it is still there and unchanged");
  add("multiple-choice", po::value(&o.choices),
      "instead of --data: a JSON Lines file of multiple-choice items ({\"ctx\", \"endings\", "
      "\"label\"} or {\"question\", \"choices\", \"answer\"}): acc and acc_norm");
  add("limit", po::value(&o.limit)->default_value(0),
      "with --multiple-choice: score the first N items only (0: all)");
  add("split", po::value<Split>()->notifier([&o](Split s) { o.split = s; }),
      "val, train or all: the part scored, a text cut as training cuts it (default: val of a "
      "prepared folder or of the text the checkpoint trained on, all of a text named)");
  add("context-length", po::value(&o.context)->default_value(0),
      "window length T (0: the model's)");
  add("stride", po::value(&o.stride)->default_value(0),
      "sliding windows of T tokens advancing by S < T, each token scored once with at least "
      "T - S tokens of history (0: windows side by side)");
  add("json", "print one JSON object as the last line");
  add("task", po::value<EvalTask>()->notifier([&o](EvalTask t) { o.task = t; }),
      "classify: the checkpoint must be a classifier, --data a TSV/CSV of text and label "
      "(a classifier's checkpoint is evaluated so without it); instruct: --data instruction "
      "records, also for a model not trained on them (an instruct checkpoint: without it)");
  add("dump-grads", po::value(&o.dump), "also write d loss / d parameter to this HDF5 file");
  add("threads", po::value(&o.threads)->default_value(ag::kDefaultThreads), "threads");
  add("config", po::value<std::string>(), "read options from an INI file");
  add_overwrite_option(desc, o.overwrite);
  return desc;
}

// The windows --context-length and --stride ask for (data/scoring_windows.h).
data::ScoringWindows scoring_rule(const nn::GPT& model, const EvalOptions& o) {
  return {.context = o.context ? o.context : model.config().context_length, .stride = o.stride};
}

// Too short a text is bad input (the exit status of a bad file, whatever it is).
void require_targets(const train::EvalResult& r, const std::string& what, int64_t ids) {
  if (r.tokens == 0)
    throw data::DataError(
        fmt::format("{} has {} token{}: nothing to score (each scored token needs one before it)",
                    what, ids, ids == 1 ? "" : "s"));
}

// A prepared folder's part, or a text's cut as the run that made the checkpoint cut it
// (train::load_run_data with its val_fraction), or both parts one after the other; a
// folder must have been prepared with the checkpoint's tokenizer.
train::EvalResult eval_parts(nn::GPT& model, const io::Checkpoint& ckpt, const EvalOptions& o,
                             Split split, const std::string* dump) {
  train::RunConfig cfg;
  cfg.data = o.data_path;
  cfg.val_fraction = train::RunConfig::from_json(ckpt.config).val_fraction;
  const train::RunData d = train::load_run_data(cfg, &ckpt.tokenizer);
  train::end_setup(train::World::current());
  std::vector<const data::TokenStore*> parts;
  if (split != Split::val) parts.push_back(&d.train);
  if (split != Split::train) parts.push_back(&d.val);
  auto r = train::evaluate_stores(model, parts, d.token_bytes, scoring_rule(model, o), dump);
  require_targets(r, parts.size() == 1 ? parts[0]->name() : base::printable(o.data_path),
                  static_cast<int64_t>(d.train.size() * (split != Split::val) +
                                       d.val.size() * (split != Split::train)));
  return r;
}

// A whole text file, read and encoded a chunk at a time as its windows are evaluated.
train::EvalResult eval_text(nn::GPT& model, const io::Checkpoint& ckpt, const EvalOptions& o,
                            const std::string* dump) {
  const auto tok = io::make_tokenizer(ckpt.tokenizer);
  data::TextIds text(o.data_path, *tok);
  train::end_setup(train::World::current());
  auto r = train::evaluate_text(model, text, data::token_byte_lengths(*tok), scoring_rule(model, o),
                                dump);
  require_targets(r, fmt::format("'{}'", base::printable(o.data_path)), r.ids);
  return r;
}

// The task whose records --data holds: --task instruct|chat, else the checkpoint's own when
// it reads a file of examples (instruct, chat; a classifier is evaluated before this);
// none for a language model's text.
const train::ExampleTask* example_task(const train::RunConfig& run, const EvalOptions& o) {
  if (o.task)
    return dynamic_cast<const train::ExampleTask*>(&train::task_named(base::choice_name(*o.task)));
  return dynamic_cast<const train::ExampleTask*>(&*run.task);
}

// The model must have the ids the task adds to its tokenizer's (an end-of-text, a chat
// format's special tokens): a base model evaluated with --task lacks them.
void check_task_ids(const nn::GPT& model, const data::Tokenizer& tok, const train::RunConfig& run,
                    const train::Task& task, const EvalOptions& o) {
  const int64_t extra = task.extra_ids(run, tok), vocab = model.config().vocab_size;
  if (tok.vocab_size() + extra > vocab)
    throw UsageError(fmt::format(
        "'{}' has {} ids, but its {} records need {} ({} past the {} tokenizer's {}): it was "
        "not trained with --task {}",
        base::printable(o.path), vocab, task.name(), tok.vocab_size() + extra,
        task.extra_ids_help(), tok.type(), tok.vocab_size(), task.name()));
}

// An instruct or chat checkpoint (or --task instruct|chat) on its records: each formatted as
// in training (the checkpoint's template or chat format; Alpaca's and ChatML for a model not
// trained on them); the loss over the tokens training counts (a response and its end-of-text,
// an assistant turn and its end-of-turn: docs/finetuning.md) and their count.
void eval_examples(nn::GPT& model, const io::Checkpoint& ckpt, const train::RunConfig& run,
                   const train::ExampleTask& task, const EvalOptions& o, bool json) {
  if (!o.dump.empty() || o.split || o.stride)
    throw UsageError(fmt::format(
        "--dump-grads, --split and --stride are for a text or a prepared folder; {} records "
        "are scored whole",
        task.name()));
  const auto tok = io::make_tokenizer(ckpt.tokenizer);
  data::TaskOptions t = train::task_options(run, *tok);
  if (o.context) t.context_length = o.context;
  check_task_ids(model, *tok, run, task, o);
  const data::TaskExamples ex = task.read_examples(o.data_path, *tok, t);
  train::end_setup(train::World::current());
  // padding reads what it reads in training
  const train::ExampleEval r =
      train::evaluate_examples(model, ex.examples, /*batch_size=*/8, task.pad_id(*tok));
  if (!train::World::current().root()) return;
  fmt::print("loss {:.4f} over {} response tokens | {} examples ({} cut to the context of {})\n",
             r.loss, r.targets, r.examples, ex.truncated, t.context_length);
  if (json)
    fmt::print("{}\n", nlohmann::json{{"loss", r.loss},
                                      {"perplexity", std::exp(r.loss)},
                                      {"response_tokens", r.targets},
                                      {"examples", r.examples},
                                      {"truncated", ex.truncated},
                                      {"task", task.name()},
                                      {"checkpoint", o.path},
                                      {"data", base::printable(o.data_path)}}
                           .dump());
}

void print_result(const train::EvalResult& r, const EvalOptions& o, Split split, bool json) {
  const std::string stride = o.stride ? fmt::format(", stride {}", o.stride) : "";
  fmt::print("loss {:.4f} | {:.4f} bits per byte | {} tokens scored over {} windows ({}{})\n",
             r.loss, r.bits_per_byte(), r.tokens, r.windows, base::choice_name(split), stride);
  if (!o.dump.empty()) fmt::print("gradients written to {}\n", o.dump);
  if (json)
    fmt::print("{}\n", nlohmann::json{{"loss", r.loss},
                                      {"tokens", r.tokens},
                                      {"windows", r.windows},
                                      {"stride", o.stride},
                                      {"bytes", r.bytes},
                                      {"bits_per_byte", r.bits_per_byte()},
                                      {"split", base::choice_name(split)},
                                      {"checkpoint", o.path},
                                      {"data", base::printable(o.data_path)}}
                           .dump());
}

// --multiple-choice: every item read and tokenized first (a bad line fails before any
// scoring, once under mpirun), then scored; rank 0 prints.
void eval_choices(nn::GPT& model, const io::Checkpoint& ckpt, const EvalOptions& o, bool json) {
  const auto tok = io::make_tokenizer(ckpt.tokenizer);
  const train::ChoiceOptions co{.limit = o.limit, .context_length = o.context};
  train::check_choice_file(model, *tok, o.choices, co);
  train::end_setup(train::World::current());
  const train::ChoiceTally t = train::score_choice_file(model, *tok, o.choices, co);
  if (!train::World::current().root()) return;
  const auto stderr_text = [](double s) {
    return std::isnan(s) ? "n/a" : fmt::format("{:.4f}", s);
  };
  fmt::print("acc {:.4f} (stderr {}) | acc_norm {:.4f} (stderr {}) | {} items (chance {:.4f})\n",
             t.acc(), stderr_text(t.acc_stderr()), t.acc_norm(), stderr_text(t.acc_norm_stderr()),
             t.n, t.chance());
  if (t.truncated > 0)
    fmt::print("{} of {} contexts lost their oldest tokens to fit the window of {} tokens\n",
               t.truncated, t.n, o.context ? o.context : model.config().context_length);
  if (json)
    fmt::print("{}\n", nlohmann::json{{"acc", t.acc()},
                                      {"acc_norm", t.acc_norm()},
                                      {"n", t.n},
                                      {"acc_stderr", t.acc_stderr()},
                                      {"acc_norm_stderr", t.acc_norm_stderr()},
                                      {"correct", t.correct},
                                      {"correct_norm", t.correct_norm},
                                      {"chance", t.chance()},
                                      {"truncated", t.truncated},
                                      {"checkpoint", o.path},
                                      {"data", base::printable(o.choices)}}
                           .dump());
}

// No --data and no --multiple-choice: the data the checkpoint trained on, when its config
// names a file or folder that is still there and whose identity is the one the checkpoint
// recorded (a file could name any path on this machine as its "data", and a text edited
// since is not the one the run saw); otherwise a usage error saying which of these failed.
std::string recorded_data(const io::Checkpoint& ckpt, const std::string& path) {
  const train::RunConfig run = train::RunConfig::from_json(ckpt.config);
  const std::string name = base::printable(path), data = base::printable(run.data);
  constexpr const char* kRequired = "the option '--data' (or '--multiple-choice') is required";
  if (run.data.empty())
    throw UsageError(fmt::format(
        "no --data given, and '{}' trained on the built-in corpus, no file to evaluate on: {}",
        name, kRequired));
  if (ckpt.data_identity.empty())
    throw UsageError(fmt::format(
        "no --data given, and '{}' does not record the identity of its data ('{}'), so it "
        "cannot be checked: {}",
        name, data, kRequired));
  std::string identity;
  try {
    identity = data::is_prepared_folder(run.data)
                   ? data::open_prepared(run.data).identity
                   : data::text_identity(base::read_input_file(run.data, "data file"));
  } catch (const std::exception& e) {
    throw UsageError(fmt::format(
        "no --data given, and '{}', the data '{}' trained on, cannot be read now ({}): {} (if "
        "it moved, name its new place)",
        data, name, e.what(), kRequired));
  }
  if (identity != ckpt.data_identity)
    throw UsageError(fmt::format(
        "no --data given, and '{}', the data '{}' trained on, has changed since (identity {}, "
        "the checkpoint records {}): give --data '{}' to evaluate on it as it is now",
        data, name, identity, base::printable(ckpt.data_identity), data));
  if (train::World::current().root())
    train::noticef(
        "attograd eval: no --data given: evaluating on '{}', the data '{}' trained on "
        "(unchanged since){}\n",
        data, name,
        data::is_prepared_folder(run.data) || !run.task->reads_text()
            ? ""
            : "; its validation part, cut as training cut it (--split all: the whole text)");
  return run.data;
}

// Which of --data and --multiple-choice, and the options that go with each.
void check_inputs(const po::variables_map& vm, const EvalOptions& o) {
  const bool data = vm.count("data") > 0 || !o.data_path.empty(),
             choices = vm.count("multiple-choice") > 0;
  if (data == choices)
    throw UsageError(data ? "--data and --multiple-choice: give one of them"
                          : "the option '--data' (or '--multiple-choice') is required but missing");
  if (choices) {
    require_file(o.choices, "multiple-choice file");
    if (o.limit < 0) throw UsageError(fmt::format("--limit must be >= 0, got {}", o.limit));
    for (const char* option : {"dump-grads", "split", "stride", "task"})
      if (vm.count(option) && !vm[option].defaulted())
        throw UsageError(fmt::format("--{} is for --data, not --multiple-choice", option));
    return;
  }
  if (!vm["limit"].defaulted()) throw UsageError("--limit is for --multiple-choice");
  require_data(o.data_path);
}

// A classifier is evaluated on a labelled file, whole.
void check_classifier_options(const po::variables_map& vm, const EvalOptions& o) {
  if (o.task && *o.task != EvalTask::classify)
    throw UsageError(fmt::format("--task {}: '{}' is a classifier, not a language model",
                                 base::choice_name(*o.task), base::printable(o.path)));
  if (!o.choices.empty())
    throw UsageError(
        "--multiple-choice scores a language model's next tokens; this checkpoint is a "
        "classifier");
  if (vm.count("dump-grads") || o.context != 0 || o.split || o.stride != 0)
    throw UsageError(
        "--dump-grads, --context-length, --split and --stride are for a language "
        "model; a classifier is evaluated on a TSV/CSV file whole");
}

// --context-length within the model's; --stride below the window.
void check_windows(const nn::GPT& model, const EvalOptions& o) {
  const int64_t model_T = model.config().context_length, T = o.context ? o.context : model_T;
  if (o.context < 0 || o.context > model_T)
    throw UsageError(fmt::format("--context-length {} must be between 1 and the model's {}",
                                 o.context, model_T));
  if (o.stride < 0 || o.stride >= T)
    throw UsageError(fmt::format(
        "--stride {} must be between 1 and {}, below the window of {} tokens (0, the default: "
        "windows side by side)",
        o.stride, T - 1, T));
}

}  // namespace

int eval_command(const Args& args) {
  return guarded("eval", [&] {
    const train::World& world = train::World::join();  // under mpirun: windows shared out
    EvalOptions o;
    auto desc = eval_options(o);
    auto vm = parse_options(args, desc, "checkpoint");
    if (wants_help(vm, "eval", desc, "[CHECKPOINT]")) return 0;
    if (!vm.count("dump-grads")) o.dump.clear();
    if (!o.dump.empty() && world.distributed())
      throw UsageError("--dump-grads runs in one process, not under mpirun");
    check_threads(o.threads);
    if (o.path.empty()) o.path = default_checkpoint("eval");
    require_file(o.path, "checkpoint");
    io::Checkpoint ckpt;
    const bool loaded = !vm.count("data") && !vm.count("multiple-choice");
    if (loaded) {  // the checkpoint says what to evaluate on
      ckpt = io::load_checkpoint(o.path, io::LoadOptions{.weights_only = true});
      o.data_path = recorded_data(ckpt, o.path);
    }
    check_inputs(vm, o);
    const auto claim = claim_outputs({{"--dump-grads", o.dump, io::OutputKind::checkpoint}},
                                     with_data_files({{"--checkpoint", o.path},
                                                      {"--config", config_file(vm)},
                                                      {"--multiple-choice", o.choices}},
                                                     o.data_path),
                                     {.overwrite = o.overwrite});
    ag::set_num_threads(o.threads);
    if (!loaded) ckpt = io::load_checkpoint(o.path, io::LoadOptions{.weights_only = true});
    if (o.task == EvalTask::classify) classifier_labels(ckpt, "eval --task classify");
    auto model = train::model_from_checkpoint(ckpt);
    ckpt.model.clear();  // the model holds the weights now
    if (model->config().num_classes > 0) {
      check_classifier_options(vm, o);
      eval_classifier(*model, ckpt, {o.path, o.data_path, 16, vm.count("json") > 0});
      return 0;
    }
    check_windows(*model, o);
    if (!o.choices.empty()) {
      eval_choices(*model, ckpt, o, vm.count("json") > 0);
      return 0;
    }
    const train::RunConfig run = train::RunConfig::from_json(ckpt.config);
    if (const train::ExampleTask* task = example_task(run, o)) {
      eval_examples(*model, ckpt, run, *task, o, vm.count("json") > 0);
      return 0;
    }
    // the text a run trained on (no --data): its held-out part, as a folder's
    const bool prepared = data::is_prepared_folder(o.data_path);
    const Split split = o.split.value_or(prepared || loaded ? Split::val : Split::all);
    const std::string* dump = vm.count("dump-grads") ? &o.dump : nullptr;
    const auto result = !prepared && split == Split::all ? eval_text(*model, ckpt, o, dump)
                                                         : eval_parts(*model, ckpt, o, split, dump);
    if (world.root()) print_result(result, o, split, vm.count("json") > 0);
    return 0;
  });
}

}  // namespace cli
