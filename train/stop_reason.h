#pragma once
// What stopped a run, as its stop notice names it (implemented in stop_signals.cpp, which
// records the sender of the first stop signal).
#include <string>

namespace train {

// The first stop signal by name ("SIGINT"); with under_launcher (a rank of a distributed
// run, whose parent is the MPI launcher), a SIGTERM that the launcher sent is named for
// what the user did: Ctrl-C or a SIGTERM to mpirun (Open MPI turns both into SIGTERM to
// the ranks, so a rank cannot tell them apart).
std::string stop_reason(bool under_launcher);

}  // namespace train
