#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "bench/bench.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "cli/other_runs.h"
#include "train/console.h"

namespace cli {

namespace {

constexpr const char* kUsage = R"(usage: attograd <command> [options]

commands:
  train      train a GPT (default: the model of docs/model.md on the built-in corpus)
  resume     continue a run from its checkpoint, exactly
  prepare    tokenize text files once into a folder that train and eval map (any size)
  encode     text on stdin to token ids with a prepared folder's or checkpoint's tokenizer
  decode     token ids on stdin back to the exact text
  sample     generate text from a checkpoint (--instruction: an instruct model's response)
  serve      a checkpoint behind an OpenAI-compatible HTTP server on this machine
  eval       the evaluation loss of a checkpoint on a text or prepared folder (and bits/byte),
             or its accuracy on multiple-choice items (--multiple-choice)
  classify   each label's probability for texts, from a classifier (train --task classify)
  inspect    show what a checkpoint holds (--verify checks every dataset)
  report     a training report page: curves of --metrics files, a checkpoint's attention maps
  attention  a checkpoint's attention weights over a prompt, printed (or --svg, a heat map)
  import     a model from elsewhere (Hugging Face GPT-2, safetensors, llm.c, GGUF) as a checkpoint
  export     a checkpoint as other tools' files (--format hf, gguf or llmc)
  merge      fold a LoRA checkpoint's adapters into its weights (a plain checkpoint)
  gradcheck  run the finite-difference gradient checks of every op
  bench      time training steps (tiny, small, base, gpt2) or the hot kernels (--micro)
  demo       the attention chapter's numbers and a small network trained by backprop
  version    the version, git commit, compiler, kernels and MPI of this build (--version)

'attograd <command> --help' lists a command's options.
)";

using Command = int (*)(const Args&);

std::span<const std::pair<const char*, Command>> commands() {
  static const std::pair<const char*, Command> kCommands[] = {
      {"train", train_command},         {"resume", resume_command},
      {"prepare", prepare_command},     {"encode", encode_command},
      {"decode", decode_command},       {"sample", sample_command},
      {"eval", eval_command},           {"inspect", inspect_command},
      {"gradcheck", gradcheck_command}, {"bench", bench::bench_command},
      {"demo", demo_command},           {"report", report_command},
      {"attention", attention_command}, {"import", import_command},
      {"export", export_command},       {"classify", classify_command},
      {"merge", merge_command},         {"version", version_command},
      {"serve", serve_command},
  };
  return kCommands;
}

Command find_command(const std::string& name) {
  for (const auto& [n, command] : commands())
    if (name == n) return command;
  return nullptr;
}

// " (did you mean 'train'?)" for the command a misspelling is closest to, else "".
std::string suggestion(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& [n, command] : commands()) names.emplace_back(n);
  return did_you_mean(name, names);
}

int run_command(int argc, char** argv) {
  const std::string command = argc < 2 ? "help" : argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (command == "--version" || command == "-V")
    return version_command(Args(argv + 2, argv + argc));
  if (Command run = find_command(command)) return run(Args(argv + 2, argv + argc));
  train::noticef("attograd: error: unknown command '{}'{} (try 'attograd --help')\n",
                 base::printable(command), suggestion(command));
  return 2;
}

// What a command printed must have reached standard output (a full disk, a closed pipe, a
// closed descriptor): a result that was not written is a failure, never exit 0.
int with_output_written(int status) {
  std::cout.flush();
  errno = 0;
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout;
  if (!failed || train::stdout_problem_reported()) return status;
  const int err = errno;
  train::noticef("attograd: error: standard output could not be written{}\n",
                 err != 0 ? fmt::format(" ({})", std::strerror(err)) : "");
  return status == 0 ? 1 : status;
}

}  // namespace

int cli_main(int argc, char** argv) {
  if (argc > 0) set_program_path(argv[0]);
  return with_output_written(run_command(argc, argv));
}

}  // namespace cli
