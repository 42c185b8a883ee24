// The suite runs its tests one thread each: ctest -j2 already runs two at a time, and
// OpenMP threads that spin-wait on a busy core slow a test a hundredfold. The threaded
// paths are covered by tests that set their own thread count.
//
// The bf16 tests check bfloat16's numbers, so the suite keeps bf16 wherever it is asked for
// (ATTOGRAD_BF16_FALLBACK=off) unless the environment says otherwise: on a CPU whose float32
// kernels beat its bfloat16 ones, --precision bf16 would run those shapes in float32. The
// fallback has its own tests (test_bf16_fallback.cpp), which turn it on.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdlib>

#include "autograd/threading.h"

int main(int argc, char* argv[]) {
  ::setenv("ATTOGRAD_BF16_FALLBACK", "off", 0);
  ag::select_blas_kernel(argv);
  ag::set_num_threads(1);
  return Catch::Session().run(argc, argv);
}
