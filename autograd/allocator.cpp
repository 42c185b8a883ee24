#include "autograd/allocator.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace ag {

namespace {

// Above this much idle cache a freed block goes back to the system instead.
constexpr size_t kMaxCachedBytes = size_t{4} << 30;

size_t rounded(size_t nbytes) {
  return nbytes == 0 ? 64 : (nbytes + 63) / 64 * 64;
}

class BlockCache {
 public:
  void* take(size_t size) {
    std::vector<void*> stale;  // what a new size takes the place of
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.live_bytes += size;
      if (stats_.live_bytes > stats_.peak_live_bytes) stats_.peak_live_bytes = stats_.live_bytes;
      budget_peak_ = std::max(budget_peak_, stats_.live_bytes);
      SizeClass& cached = free_[size];
      cached.used = epoch_;
      if (!cached.blocks.empty()) {
        void* p = cached.blocks.back();
        cached.blocks.pop_back();
        stats_.cached_bytes -= size;
        ++stats_.hits;
        return p;
      }
      ++stats_.misses;
      stale = take_stale(size);
      take_over_budget(stale);
    }
    for (void* b : stale) std::free(b);
    void* p = std::aligned_alloc(64, size);
    if (!p) {
      release();  // one retry with the cache emptied
      p = std::aligned_alloc(64, size);
    }
    if (!p) {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.live_bytes -= size;
      throw std::bad_alloc();
    }
    return p;
  }

  void give(void* p, size_t size) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.live_bytes -= size;
      SizeClass& cached = free_[size];
      cached.used = epoch_;
      if (stats_.cached_bytes + size <= kMaxCachedBytes) {
        cached.blocks.push_back(p);
        stats_.cached_bytes += size;
        return;
      }
    }
    std::free(p);
  }

  void release() {
    std::unordered_map<size_t, SizeClass> classes;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      classes.swap(free_);
      stats_.cached_bytes = 0;
    }
    for (auto& [size, cached] : classes)
      for (void* p : cached.blocks) std::free(p);
#if defined(__GLIBC__)
    // glibc keeps freed blocks below its mmap threshold (which grows to 32 MB as large
    // blocks are freed) in its heap: without a trim, "given back" would not lower the RSS
    malloc_trim(0);
#endif
  }

  // the blocks of sizes untouched since the previous call
  void release_unused() {
    std::vector<void*> unused;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = free_.begin(); it != free_.end();) {
        if (it->second.used == epoch_) {
          ++it;
          continue;
        }
        const std::vector<void*>& blocks = it->second.blocks;
        stats_.cached_bytes -= it->first * blocks.size();
        unused.insert(unused.end(), blocks.begin(), blocks.end());
        it = free_.erase(it);
      }
      ++epoch_;
    }
    for (void* p : unused) std::free(p);
  }

  // Cached blocks of sizes untouched since the last release_unused (the previous step's),
  // out of the cache, until they hold `size` bytes: batches padded to their longest example
  // come in new sizes each step, and a new size's block takes the place of old ones instead
  // of being added to the previous step's blocks (up to twice the activations).
  std::vector<void*> take_stale(size_t size) {
    std::vector<void*> stale;
    size_t freed = 0;
    for (auto it = free_.begin(); it != free_.end() && freed < size; ++it) {
      if (it->second.used == epoch_) continue;
      std::vector<void*>& blocks = it->second.blocks;
      while (!blocks.empty() && freed < size) {
        stale.push_back(blocks.back());
        blocks.pop_back();
        freed += it->first;
        stats_.cached_bytes -= it->first;
      }
    }
    return stale;
  }

  void set_budget(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    budget_ = bytes;
    budget_peak_ = stats_.live_bytes;
  }

  // With a budget, cached blocks (of any size) out of the cache until the live and cached
  // bytes fit under the larger of the budget and the live peak since it was set, plus a 1/32
  // slack (a plan a little short of the peak must not empty the cache at every miss):
  // blocks of sizes a step takes again later are then taken fresh (page faults on their
  // memory) rather than held beside the step's peak.
  void take_over_budget(std::vector<void*>& out) {
    if (budget_ == 0) return;
    const size_t cap = std::max(budget_, budget_peak_) + budget_ / 32;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      std::vector<void*>& blocks = it->second.blocks;
      while (!blocks.empty() && stats_.live_bytes + stats_.cached_bytes > cap) {
        out.push_back(blocks.back());
        blocks.pop_back();
        stats_.cached_bytes -= it->first;
      }
    }
  }

  AllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  std::mutex mutex_;
  struct SizeClass {
    std::vector<void*> blocks;  // freed, for the next take of this size
    uint64_t used = 0;          // the last epoch a block of this size was taken or given
  };
  std::unordered_map<size_t, SizeClass> free_;
  uint64_t epoch_ = 0;      // release_unused calls so far
  size_t budget_ = 0;       // set_cache_budget's; 0: none
  size_t budget_peak_ = 0;  // the live bytes' peak since it was set
  AllocatorStats stats_;
};

// Never destroyed: tensors in static storage may be freed after other statics are gone.
BlockCache& cache() {
  static BlockCache* c = new BlockCache;
  return *c;
}

}  // namespace

void* allocate_block(size_t nbytes) {
  return cache().take(rounded(nbytes));
}
void free_block(void* p, size_t nbytes) {
  cache().give(p, rounded(nbytes));
}
AllocatorStats allocator_stats() {
  return cache().stats();
}
void release_cached_blocks() {
  cache().release();
}
void release_unused_blocks() {
  cache().release_unused();
}
void set_cache_budget(size_t bytes) {
#if defined(__GLIBC__)
  // Blocks of a megabyte or more mapped on their own, so that freeing one returns its pages
  // at once. (glibc's own threshold grows with the blocks freed, to 32 MB, and keeps what
  // is freed below it in its heap, resident.)
  static const bool fixed = [] { return mallopt(M_MMAP_THRESHOLD, 1 << 20) == 1; }();
  (void)fixed;
#endif
  cache().set_budget(bytes);
}

}  // namespace ag
