// `attograd --version` (or `attograd version`): what a bug report needs to name the build:
// the version, the git commit it was built from (cmake/build_info.cmake; "unknown" for a
// tree without git), the compiler, the libraries that compute and whether MPI is in.
#include <fmt/format.h>

#include "autograd/autocast.h"
#include "autograd/kernel_libraries.h"
#include "autograd/threading.h"
#include "base/utf8.h"
#include "build_info.h"
#include "cli/cli.h"
#include "cli/command_support.h"
#include "train/mpi_library.h"
#include "train/world.h"

namespace cli {

namespace {

std::string compiler() {
#if defined(__clang__)
  return fmt::format("Clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  return fmt::format("GCC {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
  return "an unknown compiler";
#endif
}

std::string mpi() {
  if (!train::World::available())
    return "not compiled in (one process; rebuild with libopenmpi-dev for mpirun)";
  return "compiled in, " + train::mpi_library_version();
}

}  // namespace

std::string version_text() {
  return fmt::format(
      "attograd {}\n"
      "commit:   {}\n"
      "compiler: {}, C++{}\n"
      "BLAS:     {} (kernel in use: {})\n"
      "threads:  {}\n"
      "oneDNN:   {}; bfloat16 matmuls: {}\n"
      "MPI:      {}\n",
      ATTOGRAD_VERSION, ATTOGRAD_COMMIT, compiler(), __cplusplus / 100 % 100, ag::blas_library(),
      ag::blas_kernel_name(),
      // docs/library.md: OpenBLAS's AVX2 kernels round a GEMM differently on two threads
      ag::openblas_split_keeps_bits()
          ? "the same bits on any thread count"
          : "the same bits on any thread count (this OpenBLAS kernel: one thread a block)",
      ag::onednn_version(), ag::bf16_matmul_implementation(), mpi());
}

int version_command(const Args& args) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    fmt::print("usage: attograd version (or attograd --version)\n\n{}", version_text());
    return 0;
  }
  if (!args.empty())
    return usage_error("version",
                       fmt::format("takes no arguments, got '{}'", base::printable(args.front())));
  fmt::print("{}", version_text());
  return 0;
}

}  // namespace cli
