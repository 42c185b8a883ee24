#pragma once
// Microbenchmarks of the kernels a training step spends its time in, each at the shapes of
// the base config, next to the cblas_sgemm peak measured in the same run.
#include <functional>

namespace bench {

int run_micro(int threads, bool json);

// Median milliseconds of `reps` calls of fn after two untimed ones.
double median_ms(const std::function<void()>& fn, int reps = 15);

}  // namespace bench
