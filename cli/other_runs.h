#pragma once
// Nothing lost by re-running: `train` refuses an --out that holds a checkpoint of another
// run and a --metrics file that holds another run's lines (each a UsageError, exit 2,
// naming the run's step and the two ways on: continue it with resume, or --overwrite),
// and `resume` refuses a --metrics file of a run other than its checkpoint's (checked on
// rank 0 of a distributed run, which alone writes them). The program
// as invoked is kept for the commands these messages and an interrupted run print.
#include <string>

#include "io/checkpoint.h"
#include "train/config.h"

namespace cli {

// argv[0], set once by cli_main ("attograd" until then).
void set_program_path(const std::string& path);
const std::string& program_path();

// train: cfg.out and cfg.metrics hold nothing of another run, unless cfg.overwrite.
void refuse_other_runs(const train::RunConfig& cfg);

// resume: the --metrics file holds only lines of the checkpoint's run (or none, or lines
// of an older attograd that named no run).
void refuse_other_run_metrics(const std::string& metrics, const io::Checkpoint& resumed);

}  // namespace cli
