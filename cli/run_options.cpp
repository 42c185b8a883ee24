// The options of `train` and of its config files: one per RunConfig field, named as the
// config keys of a checkpoint (docs/checkpoint.md's config JSON) with '-' for '_'. `resume`
// takes the ones marked Resume::yes from the same declarations.
#include <fmt/format.h>

#include <algorithm>
#include <variant>

#include "cli/cli.h"
#include "cli/options.h"
#include "train/task.h"

namespace cli {

namespace {

// Whether `resume` takes the option too: what a resumed run may change without becoming
// another run -- what it prints, evaluates, writes and where, how long it runs, the machine
// it runs on -- while the rest (the model, the data and its order, the optimiser and its
// schedule, the seed) comes from its checkpoint, so the steps continue bit for bit.
enum class Resume : bool { no, yes };

// Declares options bound to RunConfig fields into one group: for `train`, each shown
// with its default; for `resume`, only those marked Resume::yes, without defaults, so
// that the checkpoint's values stay unless an option is given.
class Declare {
 public:
  Declare(po::options_description& group, RunOptions use) : group_(group), use_(use) {}

  template <typename T>
  void operator()(const char* name, T& f, const char* help, Resume resume = Resume::no,
                  const char* resume_help = nullptr) {
    if (use_ == RunOptions::train)
      group_.add_options()(name, field(f), help);
    else if (resume == Resume::yes)
      group_.add_options()(name, po::value(&f), resume_help ? resume_help : help);
  }
  // --name alone means true (the model's switches, which take true or false too)
  void switch_or_value(const char* name, bool& f, const char* help) {
    if (use_ == RunOptions::train) group_.add_options()(name, field(f)->implicit_value(true), help);
  }
  // an option that is unset unless given (no default to show)
  template <typename T>
  void unset_unless_given(const char* name, std::optional<T>& f, const char* help) {
    if (use_ == RunOptions::train) group_.add_options()(name, po::value(&f), help);
  }
  // --name alone means true; it is never false unless given
  void flag(const char* name, bool& f, const char* help, Resume resume = Resume::no) {
    if (use_ == RunOptions::train || resume == Resume::yes)
      group_.add_options()(name, po::bool_switch(&f), help);
  }

 private:
  // An option bound to a config field, shown with its default as fmt writes it
  // (0.1, not Boost's 0.10000000000000001).
  template <typename T>
  static po::typed_value<T>* field(T& f) {
    return value_with_default(&f, f);
  }

  po::options_description& group_;
  RunOptions use_;
};

// One option per key of nn::config_fields(), named with '-' for '_'; a switch for a bool.
po::options_description model_options(nn::GPTConfig& m, RunOptions use) {
  po::options_description model("model (the config keys of docs/model.md)");
  Declare add(model, use);
  for (const auto& f : nn::config_fields()) {
    const std::string name = option_name(f.key);
    std::visit(
        [&](auto member) {
          if constexpr (std::is_same_v<decltype(member), bool nn::GPTConfig::*>)
            add.switch_or_value(name.c_str(), m.*member, f.help);
          else
            add(name.c_str(), m.*member, f.help);
        },
        f.member);
  }
  return model;
}

po::options_description data_options(train::RunConfig& c, RunOptions use) {
  po::options_description data("data");
  Declare add(data, use);
  add("data", c.data,
      "UTF-8 text file, or a folder made by 'attograd prepare' (default: the built-in corpus)",
      Resume::yes,
      "the corpus, when it moved since the run began (checked against the text the run "
      "trained on)");
  add("val-fraction", c.val_fraction, "last fraction of a text held out");
  add("tokenizer", c.tokenizer,
      "for a text: char, byte or bpe (bpe learns --vocab-size tokens from the training part; "
      "gpt2 comes with --init-from or a folder prepared with it)");
  add("corpus-seed", c.corpus_seed, "seed of the built-in corpus");
  add("task", c.task, (train::tasks_help() + "; docs/finetuning.md").c_str());
  add("template", c.template_file,
      "instruct: a prompt template file (default: Alpaca's; docs/finetuning.md)");
  add.flag("no-truncate", c.no_truncate,
           "classify/instruct/chat: refuse a record longer than the context instead of cutting "
           "it");
  add.unset_unless_given("chat-format", c.chat_format,
                         "chatml or llama3: how conversations are written (task chat, sample "
                         "--chat; default: the --init-from checkpoint's, else chatml)");
  return data;
}

// The optimiser by name and every setting of optim/registry.h's table, each saying which
// optimisers read it.
void optimizer_settings(Declare& add, optim::OptimizerConfig& o) {
  const std::string names = fmt::format("{}", fmt::join(optim::optimizer_names(), ", "));
  add("optimizer", o.name, ("the optimiser: " + names).c_str());  // (Boost copies the texts)
  for (const optim::Hyperparameter& h : optim::hyperparameter_table())
    add(option_name(h.key).c_str(), o.*h.field, h.help);
}

po::options_description optimiser_options(train::RunConfig& c, RunOptions use) {
  po::options_description opt("optimisation (AdamW unless --optimizer, warm-up then cosine)");
  Declare add(opt, use);
  add("steps", c.steps, "optimiser steps", Resume::yes);
  add("epochs", c.epochs,
      "passes over the training examples (a text's windows) instead of --steps: the steps are "
      "counted from the data, the batch, --grad-accum-steps and the processes, and printed "
      "(0: use --steps)");
  add("batch-size", c.batch_size, "sequences per micro-batch");
  add("grad-accum-steps", c.grad_accum_steps,
      "micro-batches per step: the gradient of batch-size x N sequences, one micro-batch in "
      "memory at a time",
      Resume::yes);
  add("lr", c.lr, "peak learning rate");
  add("min-lr", c.min_lr, "final learning rate (negative: lr / 10)");
  add("warmup-steps", c.warmup_steps,
      "linear warm-up steps (-1: 30, at most a tenth of the run; a warm-up longer than the run "
      "is warned of)");
  optimizer_settings(add, c.optimizer);
  add("grad-clip", c.grad_clip, "global gradient norm limit (0: off)");
  return opt;
}

void output_options(Declare& add, train::RunConfig& c) {
  add("out", c.out, "checkpoint path", Resume::yes, "checkpoint path (default: the resumed file)");
  add("eval-interval", c.eval_interval, "steps between validation (0: end only)", Resume::yes);
  add("eval-windows", c.eval_windows, "validation windows per evaluation (0: all)", Resume::yes);
  add("early-stopping", c.early_stopping,
      "stop, saved, when the validation metric (loss; a classifier's accuracy) has not "
      "improved for this many evaluations (0: never)",
      Resume::yes);
  add.flag("keep-best", c.keep_best,
           "keep the best evaluation's checkpoint beside --out, as OUT.best.h5 (a resume keeps "
           "the run's choice)");
  add("checkpoint-interval", c.checkpoint_interval, "steps between checkpoints (0: end only)",
      Resume::yes);
  add("log-interval", c.log_interval, "steps between report lines", Resume::yes);
  add("metrics", c.metrics, "append JSON lines of metrics to this file", Resume::yes);
  add("report", c.report,
      "write an HTML report here at each evaluation and at the end (replaced atomically)",
      Resume::yes);
  add("report-prompt", c.report_prompt,
      "the text of the report's attention maps (default: the start of the validation text)",
      Resume::yes);
}

void machine_options(Declare& add, train::RunConfig& c) {
  add("threads", c.threads, "threads for kernels and BLAS", Resume::yes);
  add("precision", c.precision,
      "fp32, or bf16: matmuls and attention products on bfloat16 operands with float32 "
      "accumulation (autocast); weights, optimizer and the rest stay float32",
      Resume::yes);
  add("base-precision", c.base_precision,
      "how the frozen weights of a LoRA or --freeze run are held: fp32 (default), bf16, "
      "ggml blocks q8_0, q4_k, q4_0, q4_1, q5_0, q5_1, q5_k or q6_k (QLoRA-style: dequantized "
      "a matrix at a time inside the linear; adapters and what trains stay float32), or own "
      "(each as the --init-from file holds it: a GGUF import's blocks; the default for one)");
  add("bucket-mb", c.bucket_mb,
      "under mpirun: gradient bucket size in MB (each is sent as soon as backward finishes it)",
      Resume::yes);
  add("reduce", c.reduce,
      "under mpirun: tree (default: the same bits on any number of processes) or allreduce "
      "(MPI_Allreduce: agrees to rounding only)",
      Resume::yes);
  add.flag("checkpoint-activations", c.checkpoint_activations,
           "keep each block's input only and run the block again in backward: the blocks' "
           "activations held one block at a time, for a second forward (the same bits)",
           Resume::yes);
  add.flag("profile", c.profile,
           "print where the steps' time went (compute, waiting on other processes)", Resume::yes);
}

po::options_description run_only_options(train::RunConfig& c, RunOptions use) {
  po::options_description run("run");
  run.add_options()("help,h", "show this help");
  run.add_options()("config", po::value<std::string>(),
                    "read options from an INI file (the command line wins)");
  Declare add(run, use);
  add("seed", c.seed, "initialisation, batches and dropout");
  output_options(add, c);
  machine_options(add, c);
  add("sample-tokens", c.sample_tokens, "length of the sample printed at the end", Resume::yes);
  add("init-from", c.init_from, "start from this checkpoint's weights");
  add("freeze", c.freeze,
      "freeze the parameters these comma-separated patterns name (fnmatch over names such "
      "as blocks.*.attn.*); --lora-rank freezes every base weight");
  add("stop-at", c.stop_at, "end this run after this step, checkpointed (0: run all steps)",
      Resume::yes);
  add("max-time", c.max_time,
      "end this run after the step that passes this many seconds, checkpointed (0: no limit)",
      Resume::yes);
  add("name", c.name,
      "the run's name in reports and legends (default: --out's file name without extension; "
      "a resume keeps the checkpoint's)",
      Resume::yes);
  add.flag("overwrite", c.overwrite,
           "replace --out and --metrics even when they hold another run (refused otherwise)");
  add.flag("detect-anomaly", c.detect_anomaly,
           "check every op's output and gradients for NaN/inf; "
           "report the first with its op, module and input statistics",
           Resume::yes);
  add("inject-nan", c.inject_nan,
      "testing aid: plant a NaN, forward:MODULE or backward:MODULE, "
      "optionally @STEP (e.g. backward:blocks.0.mlp.fc2@5)");
  return run;
}

}  // namespace

po::options_description run_options(train::RunConfig& c, RunOptions use) {
  po::options_description all;
  for (auto group : {model_options(c.model, use), data_options(c, use), optimiser_options(c, use),
                     run_only_options(c, use)})
    if (!group.options().empty()) all.add(group);
  return all;
}

}  // namespace cli
