#pragma once
// Where tensor storage comes from. A training step allocates the same sizes in the same
// order every time, so freed blocks are kept by size and handed out again: after the
// first step no storage goes back to malloc/mmap, and the kernel's page faults on fresh
// memory (the cost of glibc returning large blocks to the OS and mapping them again) are
// gone. Blocks are 64-byte aligned so inner loops vectorise on aligned data.
#include <cstddef>

namespace ag {

void* allocate_block(size_t nbytes);  // never null: throws std::bad_alloc
void free_block(void* p, size_t nbytes);

struct AllocatorStats {
  size_t cached_bytes = 0;  // held for reuse
  size_t live_bytes = 0;    // handed out and not yet freed
  size_t peak_live_bytes = 0;
  size_t hits = 0, misses = 0;
};
AllocatorStats allocator_stats();
// Gives every cached block back to the system (e.g. after a phase whose sizes will not
// recur, such as generation with growing contexts, or before an evaluation), and under
// glibc trims its heap, so that the resident memory falls.
void release_cached_blocks();
// Gives back the cached blocks of every size that was neither taken nor given since the
// previous call. Called once a training step: a step of fixed shapes takes and gives the
// same sizes every time and keeps them all, but batches padded to their longest example
// come in many sizes, whose blocks would otherwise stay (up to the cache's 4 GB) after
// the step that needed them. Between calls, a size the cache has no block of takes the
// place of blocks of sizes not used since the last call (freed first, up to its bytes), so
// that a step of new sizes does not hold the previous step's blocks beside its own.
void release_unused_blocks();
// The tensor memory a run planned for (train/memory_plan.h: its weights, gradients,
// optimiser state and activations); 0, the default: none. With one, a block taken fresh
// first gives back cached blocks of other sizes, until the live and cached bytes fit under
// the larger of the budget and the live peak so far (plus 1/32): the cache then never holds
// more beside a step's peak than the plan leaves, and the resident memory follows the
// plan. Under glibc it also has blocks of 1 MiB or more mapped on their own, so that what
// is given back leaves the resident memory at once.
void set_cache_budget(size_t bytes);

}  // namespace ag
