#pragma once
// The `attograd` command line, the map of cli/: one function per subcommand, each taking
// the arguments after its name and returning the process exit code (0 ok, 1 a failure of
// the machine or the run, 2 bad input of any kind, 128 + N a run stopped by signal N and
// saved: docs/exit-codes.md). Training itself lives in train/; this folder only turns words into a
// RunConfig, checks paths before any work, and prints.
//
//   dispatch.cpp         cli_main: the usage text and the subcommand table
//   options.h            parsing with Boost.Program_options (files too), UsageError
//   option_aliases.h     other tools' option names (nanoGPT, Hugging Face, llama.cpp) as
//                        data, for "did you mean" on an unrecognised option
//   run_options.cpp      the options of `train` (and those `resume` takes), each bound to a
//                        RunConfig field
//   command_support.h    what every command shares: the one exit-code rule (is_bad_input,
//                        docs/exit-codes.md), path checks
//   train_commands.cpp   train, resume
//   other_runs.h         train refuses outputs holding another run (--overwrite); the
//                        program's path for the commands messages print
//   prepare_command.cpp  prepare: text files to a tokenized folder (data/prepared.h)
//   codec_commands.cpp   encode, decode: stdin to ids and back with a folder's or
//                        checkpoint's tokenizer, streamed
//   sample_command.cpp   sample
//   serve_command.cpp    serve: a checkpoint behind serve/'s OpenAI-compatible server
//   eval_command.cpp     eval: the loss on a text or folder, or --multiple-choice accuracy
//   classification_commands.cpp  classify; eval on a classifier's checkpoint
//   inspect_command.cpp  inspect (a checkpoint, or a prepared folder)
//   report_command.cpp   report: the page report/ draws, from metrics files and a checkpoint
//   attention_command.cpp  attention: a checkpoint's attention weights over a prompt
//   interop_commands.cpp  import, export: models to and from other tools' formats (interop/)
//   merge_command.cpp    merge: a LoRA checkpoint's adapters folded into its weights
//   gradcheck.cpp        gradcheck: the op table's checks, printed as a table
//   demo.cpp             demo: the attention chapter's numbers
//   version_command.cpp  version (--version): version, commit, compiler, kernels, MPI
//   main.cpp             main()
#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "train/config.h"

namespace cli {

using Args = std::vector<std::string>;

int cli_main(int argc, char** argv);

// The options of `train` (and of config files), each bound to a field of cfg; for
// `resume`, the ones a resumed run may change, without defaults (only the options given
// are stored into cfg).
enum class RunOptions { train, resume };
boost::program_options::options_description run_options(train::RunConfig& cfg,
                                                        RunOptions use = RunOptions::train);

int train_command(const Args& args);
int resume_command(const Args& args);
int prepare_command(const Args& args);
int encode_command(const Args& args);
int decode_command(const Args& args);
int sample_command(const Args& args);
int serve_command(const Args& args);
int eval_command(const Args& args);
int classify_command(const Args& args);
int inspect_command(const Args& args);
int report_command(const Args& args);
int attention_command(const Args& args);
int import_command(const Args& args);
int export_command(const Args& args);
int merge_command(const Args& args);
int gradcheck_command(const Args& args);
int demo_command(const Args& args);
int version_command(const Args& args);
// What `attograd --version` prints: the version and git commit, the compiler, OpenBLAS's
// build and kernel, oneDNN's version and bfloat16 kernel, and whether MPI is compiled in.
std::string version_text();

}  // namespace cli
