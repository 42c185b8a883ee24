#pragma once
// Internal: the two ways attograd's kernels use the cores, both deterministic. Work is cut
// into chunks whose boundaries depend only on the problem size, never on the thread
// count, and partial sums are combined in chunk order, so 1 and 2 threads give the same
// bits. Small problems run inline, on the calling thread: whether a team of threads runs
// the chunks changes the time only, never the bits.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ag::detail {

// Elements per chunk for memory-bound elementwise loops: large enough that a chunk
// outweighs the cost of handing it to a thread.
constexpr int64_t kElementwiseGrain = 1 << 14;

// The least work a team of threads is called up for, in elements a memory-bound loop
// touches; compute-bound kernels count multiply-adds, kMacsPerElement to an element (a
// core does about that many in the time it streams an element). A parallel region costs
// a few microseconds on an idle machine, and up to a scheduler time slice (milliseconds)
// when another program holds a core: the team then waits at its barrier for a thread that
// is not running. Below this, one thread is faster on any machine, so a small program
// (tensors of a few hundred elements) never opens a region whatever the thread count.
constexpr double kTeamWork = kElementwiseGrain;
constexpr double kMacsPerElement = 16;

// Whether `work` elements' worth is for a team: enough of it, more than one thread
// allowed, and not inside a team already.
inline bool team_pays(double work) {
  return work >= kTeamWork && !omp_in_parallel() && omp_get_max_threads() > 1;
}

// fn(begin, end) over [0, n) in chunks of at most `grain` items, each item_work elements'
// worth (a row's length, for loops over rows); on a team of threads when team_pays.
template <typename F>
void parallel_for_items(int64_t n, int64_t grain, double item_work, F&& fn) {
  if (n <= 0) return;
  const int64_t chunks = (n + grain - 1) / grain;
  if (chunks == 1 || !team_pays(static_cast<double>(n) * item_work)) {
    for (int64_t c = 0; c < chunks; ++c) fn(c * grain, std::min(n, (c + 1) * grain));
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) fn(c * grain, std::min(n, (c + 1) * grain));
}

// The same over elements.
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& fn) {
  parallel_for_items(n, grain, 1.0, fn);
}

// sum over chunks of partial(begin, end), added in chunk order (items as parallel_for_items).
template <typename F>
double parallel_sum(int64_t n, int64_t grain, double item_work, F&& partial) {
  if (n <= 0) return 0.0;
  const int64_t chunks = (n + grain - 1) / grain;
  std::vector<double> parts(chunks);
  parallel_for_items(chunks, 1, static_cast<double>(grain) * item_work,
                     [&](int64_t c0, int64_t c1) {
                       for (int64_t c = c0; c < c1; ++c)
                         parts[c] = partial(c * grain, std::min(n, (c + 1) * grain));
                     });
  double total = 0;
  for (double p : parts) total += p;
  return total;
}

// Each chunk's partial sums of `size` values (chunk c's at parts[c * size]), added in chunk
// order: store(e, parts[e] + parts[size + e] + ...) for every e, the same bits whichever
// thread made a chunk's partials or adds them up. A run of elements is summed side by side,
// a chunk's row at a time (vectorised; one element's 32-64 adds one after another had run
// at the adds' latency, scalar, 1.5% of a LoRA step's samples on an AMD EPYC Zen 3).
template <typename P, typename Store>
void add_chunk_partials(const P* parts, int64_t chunks, int64_t size, Store&& store) {
  parallel_for(size, kElementwiseGrain, [&](int64_t e0, int64_t e1) {
    constexpr int64_t kRun = 256;
    P s[kRun];
    for (int64_t r0 = e0; r0 < e1; r0 += kRun) {
      const int64_t n = std::min(kRun, e1 - r0);
      std::fill_n(s, n, P(0));
      for (int64_t c = 0; c < chunks; ++c) {
        const P* row = parts + c * size + r0;
        for (int64_t i = 0; i < n; ++i) s[i] += row[i];
      }
      for (int64_t i = 0; i < n; ++i) store(r0 + i, s[i]);
    }
  });
}

}  // namespace ag::detail
