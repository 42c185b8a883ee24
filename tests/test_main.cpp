// The suite runs its tests one thread each: ctest -j2 already runs two at a time, and
// OpenMP threads that spin-wait on a busy core slow a test a hundredfold. The threaded
// paths are covered by tests that set their own thread count.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "autograd/threading.h"

int main(int argc, char* argv[]) {
  ag::select_blas_kernel(argv);
  ag::set_num_threads(1);
  return Catch::Session().run(argc, argv);
}
