#pragma once
// The one rule every command that writes follows (import, export, merge, prepare, report,
// attention --svg, eval --dump-grads, bench --save-checkpoint, train, resume), checked before
// any work is done:
//
// - never an input: no output is a file the command reads (by path, hard link or symbolic
//   link), nor a file in a folder it reads, nor a folder holding one of its inputs;
// - never what someone had, without --overwrite: what is at an output now decides. A page
//   or picture attograd wrote is replaced freely; a checkpoint, a model file, a non-empty
//   folder or any other file only with --overwrite, and a folder even then only when it
//   holds nothing but files (a folder holding only what killed writers left, their partial
//   files, holds nothing: base/abandoned_partials.h). train's and resume's checkpoint and metrics
//   are judged by whose run they hold (cli/other_runs.h);
// - one writer at a time: every output is locked (files.h OutputLock) until the command
//   ends, so export, merge or import respect a running train's lock, and the reverse;
// - nothing partial left: outputs are written to temporary siblings renamed into place,
//   removed on a failure or a fatal signal (base/partial_outputs.h), and, when the writer
//   was killed outright, by the next writer of that output.
//
//   io::ClaimedOutputs claim({{"--out", out, io::OutputKind::checkpoint}},
//                            {{"--checkpoint", path}}, {.overwrite = overwrite});
//   ... write out ...   // the locks are released when claim goes
#include <memory>
#include <string>
#include <vector>

#include "io/files.h"

namespace io {

enum class OutputKind {
  checkpoint,  // an attograd checkpoint or gradient dump (HDF5)
  model_file,  // one file of another tool's format (GGUF, llm.c)
  folder,      // a folder of files written whole (export --format hf, prepare)
  page,        // an HTML report or an SVG picture
  run,         // train's and resume's --out and --metrics: judged by the run they hold
};

struct Output {
  std::string option;  // "--out"
  std::string path;    // empty: not asked for
  OutputKind kind = OutputKind::checkpoint;
  // the option that moves this output, when it is not `option`'s own value: "--out" for
  // --keep-best's OUT.best.h5, "--out folder" for a file written beside --out
  std::string moved_by = {};
};

struct OutputClaim {
  bool overwrite = false;  // the command's --overwrite
  bool lock = true;        // false on the ranks of a distributed run that do not write
};

// Checks every output against the rule, then locks each: held until destroyed. A refusal
// is std::invalid_argument (a usage error) naming the output, what is there and the way on;
// a lock held by another writer is std::runtime_error naming its PID.
class ClaimedOutputs {
 public:
  ClaimedOutputs(const std::vector<Output>& outputs, const NamedPaths& inputs,
                 const OutputClaim& claim);
  ClaimedOutputs(const ClaimedOutputs&) = delete;
  ClaimedOutputs& operator=(const ClaimedOutputs&) = delete;

 private:
  std::vector<std::unique_ptr<OutputLock>> locks_;
};

// What the rule says of one output, without locking: the checks alone (cli's require_outputs
// for outputs a command locks itself). Throws as ClaimedOutputs does.
void check_output_rule(const std::vector<Output>& outputs, const NamedPaths& inputs,
                       const OutputClaim& claim);

}  // namespace io
