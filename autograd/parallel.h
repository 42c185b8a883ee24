#pragma once
// Internal: the two ways attograd's kernels use the cores, both deterministic. Work is cut
// into chunks whose boundaries depend only on the problem size, never on the thread
// count, and partial sums are combined in chunk order, so 1 and 2 threads give the same
// bits. Small problems run inline: a parallel region costs a few microseconds.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ag::detail {

// fn(begin, end) over [0, n) in chunks of at most `grain` items.
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& fn) {
  if (n <= 0) return;
  const int64_t chunks = (n + grain - 1) / grain;
  if (chunks == 1 || omp_in_parallel() || omp_get_max_threads() == 1) {
    for (int64_t c = 0; c < chunks; ++c) fn(c * grain, std::min(n, (c + 1) * grain));
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) fn(c * grain, std::min(n, (c + 1) * grain));
}

// sum over chunks of partial(begin, end), added in chunk order.
template <typename F>
double parallel_sum(int64_t n, int64_t grain, F&& partial) {
  if (n <= 0) return 0.0;
  const int64_t chunks = (n + grain - 1) / grain;
  std::vector<double> parts(chunks);
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) parts[c] = partial(c * grain, std::min(n, (c + 1) * grain));
  });
  double total = 0;
  for (double p : parts) total += p;
  return total;
}

// Elements per chunk for memory-bound elementwise loops: large enough that a chunk
// outweighs the cost of handing it to a thread.
constexpr int64_t kElementwiseGrain = 1 << 14;

}  // namespace ag::detail
