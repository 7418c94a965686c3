#include "common/mutex.h"
// The node's RAM block cache (the reference architecture's L2): verified
// blocks by id, under a byte budget. Blocks are immutable and never reused
// under another id, so an entry never goes stale.
//
// Training reads every file once per epoch in a shuffled order. For that
// pattern no cache can serve more than cache / dataset of the reads, and
// plain LRU serves far less once the dataset outgrows the cache: a block
// comes back after about a dataset's worth of other reads and has long been
// evicted (with the dataset 4x the cache, LRU serves ~3% against a bound of
// 25%). kTinyLfu keeps LRU order but admits a new block only when it has
// been asked for more often than the block it would evict (frequencies in a
// count-min sketch that halves periodically, so it adapts when what is hot
// changes). Under shuffled epochs the cached set then stays put and serves
// the bound; a one-off scan cannot flush it either.
//
// Thread safety: all methods may be called concurrently (one mutex).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace aq::store {

enum class CachePolicy { kLru, kTinyLfu };

struct CacheStats {
  uint64_t hits = 0, misses = 0, admitted = 0, rejected = 0, evicted = 0;
  uint64_t bytes = 0, capacity = 0, entries = 0;
  double hit_ratio() const {
    return hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0;
  }
};

class BlockCache {
 public:
  // expected_block_bytes sizes the frequency sketch (32 counters per block
  // the cache can hold, so a dataset several times the cache still counts
  // without many collisions).
  BlockCache(uint64_t capacity_bytes, CachePolicy policy, uint64_t expected_block_bytes = 4 << 20);

  // The block's bytes if cached (counts a hit or a miss and, for TinyLFU,
  // the access frequency).
  std::shared_ptr<const std::string> Get(const std::string& id);
  // Offers a block just read from disk; the policy decides whether it
  // stays (true: cached). `spill`: when this block is evicted later, it is
  // handed to `evicted` of the Put that pushes it out (for a lower level:
  // the L3 cache).
  using Evicted = std::vector<std::pair<std::string, std::shared_ptr<const std::string>>>;
  bool Put(const std::string& id, std::shared_ptr<const std::string> data, bool spill = false,
           Evicted* evicted = nullptr);
  void Erase(const std::string& id);
  // Whether the block is cached (no hit, miss or frequency counted).
  bool Contains(const std::string& id) const;
  // How often the block has been asked for recently (the sketch's count;
  // 0 with LRU): what admission compares.
  uint32_t Popularity(const std::string& id) const;
  CacheStats Stats() const;
  CachePolicy policy() const { return policy_; }

 private:
  struct Entry {
    std::string id;
    std::shared_ptr<const std::string> data;
    bool spill = false;
  };
  uint32_t Frequency(const std::string& id) const;  // REQUIRES: mu_ held
  void Touch(const std::string& id);                // REQUIRES: mu_ held

  const uint64_t capacity_;
  const CachePolicy policy_;
  mutable Mutex mu_;
  std::list<Entry> lru_;  // front = most recent; GUARDED_BY(mu_)
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  // Count-min sketch: 4 rows of 4-bit-like counters (uint8 capped at 15).
  std::vector<uint8_t> sketch_;
  uint64_t sketch_mask_ = 0;
  uint64_t accesses_ = 0, sample_ = 0;
  CacheStats stats_;
};

}  // namespace aq::store
