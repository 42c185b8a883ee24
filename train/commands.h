#pragma once
// The `attograd` command line: one function per subcommand, each taking the arguments
// after its name and returning the process exit code (0 ok, 1 failure, 2 usage error).
#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "train/config.h"

namespace train {

using Args = std::vector<std::string>;

int cli_main(int argc, char** argv);

// The options of `train` (and of config files), each bound to a field of cfg.
boost::program_options::options_description run_options(RunConfig& cfg);

int train_command(const Args& args);
int resume_command(const Args& args);
int sample_command(const Args& args);
int eval_command(const Args& args);
int inspect_command(const Args& args);
int gradcheck_command(const Args& args);  // train/gradcheck_table.cpp
int demo_command(const Args& args);       // train/demo.cpp

}  // namespace train
