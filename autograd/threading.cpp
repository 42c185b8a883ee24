#include "autograd/threading.h"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "autograd/kernel_libraries.h"

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

OmpThreadsScope::OmpThreadsScope(int n) : saved_(omp_get_max_threads()) {
  omp_set_num_threads(n);
}
OmpThreadsScope::~OmpThreadsScope() {
  omp_set_num_threads(saved_);
}

int num_threads() {
  return omp_get_max_threads();
}

const char* blas_kernel_name() {
  return openblas_get_corename();
}

std::string blas_library() {
  return openblas_get_config();
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
}

bool openblas_split_keeps_bits() {
  static const bool keeps = [] {
    const std::string core = openblas_get_corename();
    return core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
  }();
  return keeps;
}

OpenBlasCallThreads::OpenBlasCallThreads() {
#if defined(__clang__)  // clang's OpenMP is libomp (the sanitizer build)
  const bool one_thread = true;
#else
  const bool one_thread = !openblas_split_keeps_bits();
#endif
  if (!one_thread || omp_get_max_threads() == 1) return;
  saved_ = omp_get_max_threads();
  omp_set_num_threads(1);
}

OpenBlasCallThreads::~OpenBlasCallThreads() {
  if (saved_ > 0) omp_set_num_threads(saved_);
}

namespace {

// The process name (what ps, top and pgrep show) of the program as the user started it:
// executing /proc/self/exe would otherwise name it "exe".
void keep_process_name(const char* argv0) {
  if (argv0 == nullptr) return;
  const char* slash = std::strrchr(argv0, '/');
  ::prctl(PR_SET_NAME, slash ? slash + 1 : argv0, 0, 0, 0);
}

// This executable's path, so that the re-executed process keeps its name; /proc/self/exe
// when the file was replaced or removed since it started.
std::string own_executable() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return "/proc/self/exe";
  const std::string s(path, static_cast<size_t>(n));
  const std::string deleted = " (deleted)";
  if (s.size() >= deleted.size() &&
      s.compare(s.size() - deleted.size(), deleted.size(), deleted) == 0)
    return "/proc/self/exe";
  return s;
}

}  // namespace

namespace {

// The OPENBLAS_CORETYPE to load instead of the kernel in use, or null to keep it.
const char* better_blas_kernel() {
  if (std::getenv("ATTOGRAD_KEEP_BLAS_KERNEL") != nullptr) return nullptr;  // the user's wish
  const std::string current = openblas_get_corename();
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  // OpenBLAS 0.3.21 maps AMD Zen 4/5 to its Haswell (AVX2) kernels and unknown CPUs to
  // Prescott (SSE3), and environments often pin OPENBLAS_CORETYPE=Haswell for safety; on
  // an AVX-512 machine the SkylakeX kernel's sgemm is 1.8x Haswell's.
  if (avx512 && current != "SkylakeX" && current != "Cooperlake" && current != "SapphireRapids")
    return "SkylakeX";
  if (!avx512 && avx2 && current == "Prescott") return "Haswell";
  return nullptr;
}

// Whether the user left OpenMP's waiting to its default (which spins for milliseconds).
bool default_omp_spinning() {
  return std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr &&
         std::getenv("KMP_BLOCKTIME") == nullptr;
}

}  // namespace

void select_blas_kernel(char** argv) {
  if (std::getenv("ATTOGRAD_BLAS_REEXECUTED") != nullptr) {  // once is enough
    keep_process_name(argv[0]);
    return;
  }
  const char* core = better_blas_kernel();
  const bool spin = default_omp_spinning();
  if (core == nullptr && !spin) return;
  if (core != nullptr) setenv("OPENBLAS_CORETYPE", core, 1);
  if (spin) {  // each runtime reads its own; setting both is harmless
    setenv("GOMP_SPINCOUNT", kOmpSpinCount, 1);
    setenv("KMP_BLOCKTIME", kOmpBlockTimeMs, 1);
  }
  setenv("ATTOGRAD_BLAS_REEXECUTED", "1", 1);
  execv(own_executable().c_str(), argv);  // only returns on failure: carry on as we are
}

}  // namespace ag
