#include "autograd/threading.h"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include <unistd.h>

extern "C" char* openblas_get_corename();
extern "C" int openblas_get_parallel();

namespace ag {

void set_num_threads(int n) {
  if (n < 1)
    throw std::invalid_argument(fmt::format("set_num_threads: need at least 1, got {}", n));
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
  // 0 sequential, 1 its own pthreads pool, 2 OpenMP
  static bool warned = false;
  if (n > 1 && openblas_get_parallel() == 1 && !warned) {
    warned = true;
    fmt::print(stderr,
               "attograd: warning: the OpenBLAS in use keeps its own pthread pool, which competes "
               "with OpenMP's threads for the cores; install libopenblas-openmp-dev and rebuild\n");
  }
}

int num_threads() {
  return omp_get_max_threads();
}



const char* blas_kernel_name() { return openblas_get_corename(); }

bool blas_bits_independent_of_threads() {
  const std::string core = openblas_get_corename();
  return core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
}

void select_blas_kernel(char** argv) {
  if (std::getenv("ATTOGRAD_KEEP_BLAS_KERNEL") != nullptr) return;  // the user's explicit wish
  if (std::getenv("ATTOGRAD_BLAS_REEXECUTED") != nullptr) return;    // once is enough
  const std::string current = openblas_get_corename();
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  // OpenBLAS 0.3.21 maps AMD Zen 4/5 to its Haswell (AVX2) kernels and unknown CPUs to
  // Prescott (SSE3), and environments often pin OPENBLAS_CORETYPE=Haswell for safety; on
  // an AVX-512 machine the SkylakeX kernel's sgemm is 1.8x Haswell's.
  const char* core = nullptr;
  if (avx512 && current != "SkylakeX" && current != "Cooperlake" && current != "SapphireRapids")
    core = "SkylakeX";
  else if (!avx512 && avx2 && current == "Prescott")
    core = "Haswell";
  if (core == nullptr) return;
  setenv("OPENBLAS_CORETYPE", core, 1);
  setenv("ATTOGRAD_BLAS_REEXECUTED", "1", 1);
  execv("/proc/self/exe", argv);  // only returns on failure: carry on with the current kernel
}

}  // namespace ag
