// The L3 cache: an SSD directory holding copies of blocks whose home is a
// slow (HDD) pool, between the RAM cache (L2) and the disks, as hybrid
// storage nodes put an SSD in front of their HDDs. Reads check RAM, then
// L3, then the block's pool.
//
// A victim cache: blocks read from a slow pool that RAM does not keep
// (refused at admission, or evicted later) are offered to it. Admission
// follows the RAM cache's frequency sketch, as RAM's does: when L3 is full
// a newcomer must have been asked for more often than every block it would
// push out, so shuffled epochs over a dataset larger than RAM + L3 leave the
// cached set in place instead of cycling it. Writes happen on a background
// thread (the read that offered the block does not wait); offers beyond a
// bounded queue are dropped.
//
// Never authoritative: a copy is checked against the block's checksum on
// every read (a damaged one is dropped and read from its pool), blocks are
// immutable and their ids never reused, so a copy never goes stale, and the
// directory may be wiped at any time. Its contents survive a restart: the
// index is rebuilt from the directory listing (no block is read).
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>

#include "common/mutex.h"
#include "common/status.h"
#include "io/file_system.h"
#include "store/block_cache.h"
#include "store/block_store.h"

namespace aq::store {

struct L3Options {
  std::string path;                     // a directory on an SSD
  uint64_t capacity_bytes = 0;          // most bytes of blocks kept
  uint64_t queue_bytes = 256ull << 20;  // offers waiting to be written, at most
};

struct L3Stats {
  uint64_t hits = 0, misses = 0, admitted = 0, rejected = 0, evicted = 0, dropped = 0, damaged = 0, write_errors = 0;
  uint64_t bytes = 0, capacity = 0, entries = 0, restored = 0;  // restored: entries found at start
  // Copies offered but not yet on the SSD (waiting or being written); a
  // steady backlog means the SSD is slower than the misses it absorbs.
  uint64_t queued = 0, queued_bytes = 0;
  double hit_ratio() const {
    return hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0;
  }
};

class L3Cache {
 public:
  // Opens (creating) the directory and indexes what it holds. `popularity`
  // is the RAM cache whose frequency sketch decides admission (null: LRU,
  // every offer admitted).
  static Result<std::unique_ptr<L3Cache>> Open(io::FileSystem& fs, L3Options options, const BlockCache* popularity);
  ~L3Cache();  // writes still queued are dropped

  // The block if this level holds a good copy (checked against ref's size
  // and checksum); counts a hit or a miss.
  std::shared_ptr<const std::string> Get(const BlockRef& ref);
  // A block read from a slow pool that RAM does not keep.
  void Offer(const std::string& id, std::shared_ptr<const std::string> data);
  void Erase(const std::string& id);
  // Erases every copy whose block is not in `referenced` (at start, beside
  // the pools' garbage collection: blocks freed while the node was down).
  void Retain(const std::vector<std::string>& referenced);
  bool Contains(const std::string& id) const;
  // Waits until every queued offer is written or dropped (tests, benchmarks).
  void Flush();
  L3Stats Stats() const;
  const std::string& path() const { return options_.path; }

 private:
  L3Cache(L3Options options, std::unique_ptr<BlockStore> store, const BlockCache* popularity);
  void Run();
  // Admission: room, or more popular than what it would push out. Returns
  // the ids to evict (made room for) or false.
  bool Admit(const std::string& id, uint64_t size, std::vector<std::string>* evict) AQ_REQUIRES(mu_);

  const L3Options options_;
  std::unique_ptr<BlockStore> store_;
  const BlockCache* popularity_;
  mutable Mutex mu_;
  CondVar cv_{mu_};
  struct Entry {
    std::string id;
    uint64_t size;
  };
  std::list<Entry> lru_ AQ_GUARDED_BY(mu_);  // front: most recent
  std::unordered_map<std::string, std::list<Entry>::iterator> index_ AQ_GUARDED_BY(mu_);
  uint64_t reserved_ AQ_GUARDED_BY(mu_) = 0;  // bytes of admitted offers not yet written
  std::deque<std::pair<std::string, std::shared_ptr<const std::string>>> queue_ AQ_GUARDED_BY(mu_);
  uint64_t queued_bytes_ AQ_GUARDED_BY(mu_) = 0;
  bool writing_ AQ_GUARDED_BY(mu_) = false;
  bool stop_ AQ_GUARDED_BY(mu_) = false;
  L3Stats stats_ AQ_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace aq::store
