#include "autograd/threading.h"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <unistd.h>

extern "C" char* openblas_get_corename();

namespace ag {

void set_num_threads(int n) {
  if (n < 1)
    throw std::invalid_argument(fmt::format("set_num_threads: need at least 1, got {}", n));
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int num_threads() {
  return omp_get_max_threads();
}



const char* blas_kernel_name() { return openblas_get_corename(); }

void select_blas_kernel(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user chose, or we did
  if (std::strcmp(openblas_get_corename(), "Prescott") != 0) return;
  const char* core = nullptr;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    core = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    core = "Haswell";
  if (core == nullptr) return;
  setenv("OPENBLAS_CORETYPE", core, 1);
  execv("/proc/self/exe", argv);  // only returns on failure: carry on with Prescott
}

}  // namespace ag
