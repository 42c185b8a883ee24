#pragma once
// Which MPI this build runs on, for `attograd --version` (implemented in world.cpp, the
// one file that includes mpi.h).
#include <string>

namespace train {

// The MPI library's own first line ("Open MPI v4.1.4, package: Debian OpenMPI, ..."), or
// "" in a build without MPI (World::available()). Needs no MPI_Init.
std::string mpi_library_version();

}  // namespace train
