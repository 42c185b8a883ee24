#pragma once
// One threading policy: attograd's OpenMP loops and the BLAS library share the same
// thread count, so GEMM and the fused kernels never oversubscribe the cores. A library
// user need not set it: work too small to pay for a team of threads runs on the calling
// thread whatever the count (parallel.h), so a small program is no slower for the
// default (every core) than for one thread, even when another program holds a core.
namespace ag {

// The thread count a run uses unless told otherwise: the CLI's --threads, the trainer's
// config and bench default to it (the figures in docs/ are measured with it).
constexpr int kDefaultThreads = 2;

void set_num_threads(int n);  // n >= 1; sets OpenMP and BLAS threads together
int num_threads();

// Sets the calling thread's OpenMP thread count for its scope and restores it after: the
// teams its kernels would call up (OpenMP loops, oneDNN's, OpenBLAS's) have n threads.
// oneDNN plans a primitive's work split for the threads it sees when the primitive is
// made; small products (LoRA's rank-wide ones) run on the calling thread alone.
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope(int n);
  ~OmpThreadsScope();
  OmpThreadsScope(const OmpThreadsScope&) = delete;
  OmpThreadsScope& operator=(const OmpThreadsScope&) = delete;

 private:
  int saved_;
};

// The threads OpenBLAS's GEMM may use for one call: OpenMP's, where its kernel's sums do
// not depend on how it splits the GEMM (openblas_split_keeps_bits) and OpenMP is GCC's
// libgomp (the runtime OpenBLAS was built for); else the calling thread alone. Its AVX2
// kernels round a sixth of a threaded GEMM's elements differently from one thread's, so
// there a caller shares the work out itself, in pieces that do not depend on the thread
// count (gemm.cpp's output blocks). Under clang's libomp, which serves OpenBLAS's libgomp
// calls, its threaded GEMM waited forever for a partner thread once other teams (the
// decoder's) had run between training steps (the sanitizer build's
// rerun.what_a_run_records hung so).
class [[maybe_unused]] OpenBlasCallThreads {
 public:
  OpenBlasCallThreads();
  ~OpenBlasCallThreads();
  OpenBlasCallThreads(const OpenBlasCallThreads&) = delete;
  OpenBlasCallThreads& operator=(const OpenBlasCallThreads&) = delete;

 private:
  int saved_ = 0;  // the OpenMP thread count to restore, 0 where none was changed
};

}  // namespace ag

namespace ag {

// OpenBLAS picks its GEMM kernel from the CPU model when it loads; on CPUs it does not
// know it falls back to slower kernels than the CPU supports: SSE3 "Prescott" for VMs
// that report a generic model, AVX2 "Haswell" for AMD Zen 4/5, which have AVX-512.
// When the kernel in use (whether OpenBLAS chose it or OPENBLAS_CORETYPE named it) is
// weaker than the CPU supports, this sets OPENBLAS_CORETYPE from the CPU's features and
// re-executes the program (argv) so the library loads again with the right kernel; set
// ATTOGRAD_KEEP_BLAS_KERNEL=1 to keep the kernel as it is. The same re-execution also
// shortens how long OpenMP's idle threads spin before they sleep (GOMP_SPINCOUNT
// kOmpSpinCount for GCC's libgomp, KMP_BLOCKTIME kOmpBlockTimeMs for LLVM's libomp, which
// a clang build links; unless OMP_WAIT_POLICY, GOMP_SPINCOUNT or KMP_BLOCKTIME is set):
// their defaults spin about 7 ms (libgomp) and 200 ms (libomp) after every parallel region,
// a core's worth of time taken from any other program (or a thread of ours) that shares
// the core; each runtime reads its setting only as it loads.
// Call it first thing in main(); it returns normally when nothing needs doing or
// re-executing fails.
void select_blas_kernel(char** argv);

// libgomp's spins before a waiting thread sleeps: about 250 us on an AMD Zen 5 (each spin
// a `pause`), time enough for the next region of a step to start on a quiet machine
// (measured no slower than the default on tiny/small/base), short enough that a thread
// waiting on a descheduled one gives its core back (docs/performance.md, "Under load").
constexpr const char* kOmpSpinCount = "10000";
// libomp's spin before a waiting thread sleeps, in milliseconds (its unit in every
// version; the shortest that still spins): under the sanitizers' ctest -j2, the default
// 200 ms made a test's idle threads take about a fifth of the CPU (user time of
// cli.sample_eval_inspect 12.2 s against 9.0 s with 1 ms, AMD EPYC Zen 3, 2026-12-07).
constexpr const char* kOmpBlockTimeMs = "1";

// The kernel OpenBLAS is using, e.g. "SkylakeX".
const char* blas_kernel_name();

// Whether that kernel's sgemm gives the same bits however a GEMM is split, among its
// threads or into calls on parts of the output. Measured on OpenBLAS 0.3.21: yes for the
// AVX-512 kernels (SkylakeX and the kernels that reuse its sgemm); no for Haswell and Zen,
// whose sums depend on the shape of each call (a 129 x 768 x 768 product cut into two calls
// at any of 9 columns tried, 1 to 512, rounded 1,200-5,800 elements differently). attograd's
// results do not depend on the thread count either way: where it is false, OpenBLAS runs on one
// thread a call (OpenBlasCallThreads) over pieces cut from the problem's size alone (gemm.cpp), and
// the decoder's shares of a matrix go to oneDNN's sgemm, whose sums do not depend on the split
// (nn/inference_kernels.cpp).
bool openblas_split_keeps_bits();

}  // namespace ag
