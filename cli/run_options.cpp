// The options of `train` and of its config files: one per RunConfig field, named as the
// spec's config keys with '-' for '_'.
#include <fmt/format.h>

#include <algorithm>
#include <variant>

#include "cli/cli.h"
#include "cli/options.h"

namespace cli {

namespace {

// An option bound to a config field, shown with its default as fmt writes it
// (0.1, not Boost's 0.10000000000000001).
template <typename T>
po::typed_value<T>* field(T& f) {
  return po::value(&f)->default_value(f, fmt::format("{}", f));
}

// One option per key of nn::config_fields(), named with '-' for '_'; a flag for a bool.
po::options_description model_options(nn::GPTConfig& m) {
  po::options_description model("model (the config keys of docs/model.md)");
  for (const auto& f : nn::config_fields()) {
    std::string name = f.key;
    std::replace(name.begin(), name.end(), '_', '-');
    std::visit(
        [&](auto member) {
          auto* value = field(m.*member);
          if constexpr (std::is_same_v<decltype(member), bool nn::GPTConfig::*>)
            value->implicit_value(true);
          model.add_options()(name.c_str(), value, f.help);
        },
        f.member);
  }
  return model;
}

po::options_description data_options(train::RunConfig& c) {
  po::options_description data("data");
  auto add = data.add_options();
  add("data", field(c.data),
      "UTF-8 text file, or a folder made by 'attograd prepare' (default: the built-in corpus)");
  add("val-fraction", field(c.val_fraction), "last fraction of a text held out");
  add("tokenizer", field(c.tokenizer),
      "for a text: char, byte or bpe (bpe learns --vocab-size tokens from the training part)");
  add("corpus-seed", field(c.corpus_seed), "seed of the built-in corpus");
  return data;
}

po::options_description optimiser_options(train::RunConfig& c) {
  po::options_description opt("optimisation (AdamW, warm-up then cosine)");
  auto add = opt.add_options();
  add("steps", field(c.steps), "optimiser steps");
  add("batch-size", field(c.batch_size), "sequences per micro-batch");
  add("grad-accum-steps", field(c.grad_accum_steps),
      "micro-batches per step: the gradient of batch-size x N sequences, one micro-batch in "
      "memory at a time");
  add("lr", field(c.lr), "peak learning rate");
  add("min-lr", field(c.min_lr), "final learning rate (negative: lr / 10)");
  add("warmup-steps", field(c.warmup_steps), "linear warm-up steps");
  add("weight-decay", field(c.weight_decay), "AdamW decay of 2-D+ parameters");
  add("beta1", field(c.beta1), "AdamW beta1");
  add("beta2", field(c.beta2), "AdamW beta2");
  add("grad-clip", field(c.grad_clip), "global gradient norm limit (0: off)");
  return opt;
}

po::options_description run_only_options(train::RunConfig& c) {
  po::options_description run("run");
  auto add = run.add_options();
  add("help,h", "show this help");
  add("config", po::value<std::string>(), "read options from an INI file (the command line wins)");
  add("seed", field(c.seed), "initialisation, batches and dropout");
  add("out", field(c.out), "checkpoint path");
  add("eval-interval", field(c.eval_interval), "steps between validation (0: end only)");
  add("eval-windows", field(c.eval_windows), "validation windows per evaluation (0: all)");
  add("checkpoint-interval", field(c.checkpoint_interval),
      "steps between checkpoints (0: end only)");
  add("log-interval", field(c.log_interval), "steps between report lines");
  add("metrics", field(c.metrics), "append JSON lines of metrics to this file");
  add("report", field(c.report),
      "write an HTML report here at each evaluation and at the end (replaced atomically)");
  add("report-prompt", field(c.report_prompt),
      "the text of the report's attention maps (default: the start of the validation text)");
  add("threads", field(c.threads), "threads for kernels and BLAS");
  add("precision", field(c.precision),
      "fp32, or bf16: matmuls and attention products on bfloat16 operands with float32 "
      "accumulation (autocast); weights, optimizer and the rest stay float32");
  add("bucket-mb", field(c.bucket_mb),
      "under mpirun: gradient bucket size in MB (each is sent as soon as backward finishes it)");
  add("reduce", field(c.reduce),
      "under mpirun: tree (default: the same bits on any number of processes) or allreduce "
      "(MPI_Allreduce: agrees to rounding only)");
  add("profile", po::bool_switch(&c.profile),
      "print where the steps' time went (compute, waiting on other processes)");
  add("sample-tokens", field(c.sample_tokens), "length of the sample printed at the end");
  add("init-from", field(c.init_from), "start from this checkpoint's weights");
  add("stop-at", field(c.stop_at), "end this run after this step, checkpointed (0: run all steps)");
  add("detect-anomaly", po::bool_switch(&c.detect_anomaly),
      "check every op's output and gradients for NaN/inf; "
      "report the first with its op, module and input statistics");
  add("inject-nan", field(c.inject_nan),
      "testing aid: plant a NaN, forward:MODULE or backward:MODULE, "
      "optionally @STEP (e.g. backward:blocks.0.mlp.fc2@5)");
  return run;
}

}  // namespace

po::options_description run_options(train::RunConfig& c) {
  po::options_description all;
  all.add(model_options(c.model))
      .add(data_options(c))
      .add(optimiser_options(c))
      .add(run_only_options(c));
  return all;
}

}  // namespace cli
