#pragma once
// What every subcommand shares: the exit-code contract (usage problems 2, failures 1, each
// one line naming the command), --help, and the checks on paths made before any work.
#include <fmt/format.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/options.h"
#include "data/tokenizer.h"
#include "io/files.h"
#include "io/output_rule.h"
#include "train/world.h"

namespace cli {

// One line on stderr, exit code 2: the contract for every usage problem.
int usage_error(const std::string& command, const std::string& what);

// Prints the command's usage and options when --help was given; `operands` is what may
// follow the command name without an option ("[CHECKPOINT]").
bool wants_help(const po::variables_map& vm, const std::string& command,
                const po::options_description& desc, const std::string& operands = "");

// The checkpoint a command reads when none was named: train's default output (attograd.h5)
// when there is one here, named on stderr (rank 0) so that the user knows which file was
// used; else a usage error saying how to name one (or `when_none`, when given, saying that
// there is no attograd.h5 either).
std::string default_checkpoint(const std::string& command, const std::string& when_none = "");

// The --config file named on the command line, or "".
std::string config_file(const po::variables_map& vm);

// An input must be a regular file we can read: a folder, a FIFO (whose open would block)
// or a device such as /dev/zero is refused by name before any work.
void require_file(const std::string& path, const char* what);

// --threads: 1 to train::kMaxThreads (each thread holds its own scratch, so a count from
// a typo is refused rather than allocated for), or a usage error.
void check_threads(int threads);

// --data: a prepared folder (data/prepared.h), or a text file as require_file checks it.
void require_data(const std::string& path);

// The tokenizer at a path given with `option`: a prepared folder's tokenizer.json, a
// tokenizer .json file, a folder of GPT-2's tokenizer files (data/gpt2_tokenizer.h; a
// Hugging Face model folder, whose tokenizer.json is not attograd's) or a checkpoint's
// /tokenizer (one without, a gradient dump, is refused).
std::unique_ptr<data::Tokenizer> load_tokenizer(const std::string& path, const char* option);

// inputs with --data's files added (named `name`): the folder's files when it is a
// prepared folder, so no output can replace one of them.
io::NamedPaths with_data_files(io::NamedPaths inputs, const std::string& data_path,
                               const std::string& name = "--data");

// Before any work, the output rule (io/output_rule.h): every output can be written, none
// is an input or another output, none replaces what someone had unless claim.overwrite,
// and each is locked (unless claim.lock is false) until the result is destroyed. Every
// refusal is a UsageError.
std::unique_ptr<io::ClaimedOutputs> claim_outputs(const std::vector<io::Output>& outputs,
                                                  const io::NamedPaths& inputs,
                                                  const io::OutputClaim& claim = {});

// The --overwrite switch of a command that writes, described once.
void add_overwrite_option(po::options_description& desc, bool& overwrite);

// One line on stderr naming the command; returns `code`. In a distributed run, a failure
// during set-up is agreed on by every rank and printed once, by rank 0; a failure after
// set-up is printed by its rank and ends the job (train::World::abort).
int report_failure(const std::string& command, int code, const std::string& message);
// Another rank's set-up failure, agreed on: rank 0 prints it.
int report_peer_failure(const std::string& command, const train::PeerFailure& e);

// The one rule of the exit codes, for every command (docs/exit-codes.md): 2 when what was
// given is wrong, whatever is wrong with it -- an option, a value, or the content of an
// input file, as its reader says (a checkpoint, a data file or folder, a metrics file, a
// JSON file, another tool's model file) -- and 1 when the machine or the run failed (a
// write, memory, a file the system would not read, a lock another process holds, a NaN).
bool is_bad_input(const std::exception& e);

// Runs body, mapping errors to the CLI's exit codes by is_bad_input: 2 or 1.
template <typename Body>
int guarded(const std::string& command, Body body) {
  try {
    return body();
  } catch (const train::PeerFailure& e) {
    return report_peer_failure(command, e);
  } catch (const std::exception& e) {
    return is_bad_input(e) ? usage_error(command, e.what()) : report_failure(command, 1, e.what());
  }
}

}  // namespace cli
