#include "autograd/allocator.h"

#include <cstdint>
#include <cstdlib>
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
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.live_bytes += size;
      if (stats_.live_bytes > stats_.peak_live_bytes) stats_.peak_live_bytes = stats_.live_bytes;
      used_[size] = epoch_;
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        stats_.cached_bytes -= size;
        ++stats_.hits;
        return p;
      }
      ++stats_.misses;
    }
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
      used_[size] = epoch_;
      if (stats_.cached_bytes + size <= kMaxCachedBytes) {
        free_[size].push_back(p);
        stats_.cached_bytes += size;
        return;
      }
    }
    std::free(p);
  }

  void release() {
    std::unordered_map<size_t, std::vector<void*>> blocks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks.swap(free_);
      stats_.cached_bytes = 0;
    }
    for (auto& [size, list] : blocks)
      for (void* p : list) std::free(p);
  }

  // the blocks of sizes untouched since the previous call
  void release_unused() {
    std::vector<void*> unused;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = used_.begin(); it != used_.end();) {
        if (it->second == epoch_) {
          ++it;
          continue;
        }
        if (auto blocks = free_.find(it->first); blocks != free_.end()) {
          stats_.cached_bytes -= it->first * blocks->second.size();
          unused.insert(unused.end(), blocks->second.begin(), blocks->second.end());
          free_.erase(blocks);
        }
        it = used_.erase(it);
      }
      ++epoch_;
    }
    for (void* p : unused) std::free(p);
  }

  AllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  std::unordered_map<size_t, uint64_t> used_;  // each size's last epoch of a take or give
  uint64_t epoch_ = 0;                         // release_unused calls so far
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

}  // namespace ag
