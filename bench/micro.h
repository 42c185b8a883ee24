#pragma once
// Microbenchmarks of the kernels a training step spends its time in, each at the shapes of
// the base config, next to the cblas_sgemm peak measured in the same run.
namespace bench {

int run_micro(int threads, bool json);

}  // namespace bench
