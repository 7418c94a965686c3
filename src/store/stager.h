// Plan-driven staging: readers tell the node what they will read next, in
// order (a training loader's epoch plan is a pure function of seed, epoch
// and rank, so it knows), and the node reads those blocks from their pools
// into RAM ahead of need, many at once, so a shuffled epoch over slow media
// finds each block already read instead of paying a seek per file with one
// read in flight.
//
// A plan is a stream of block references, appended to window by window
// (Plan). Workers take the head of each stream in turn (round robin across
// streams, strictly in order within one) and read the block through the
// service below (RAM cache, L3, pool: exactly the read the reader would
// have made, only earlier, so the RAM cache sees the same reads in the same
// order as without staging). A staged block is handed to the first planned
// read of it and dropped when every planned read of it has happened.
//
// Bounded three ways: staged bytes (memory_bytes; staging waits for room
// and never evicts anything, so a block needed later never displaces one
// needed sooner: the queue is filled in plan order), time (a staged block
// no one reads for ttl_s is dropped, as is a plan entry that waited that
// long: a reader that died or changed its mind costs no memory for long),
// and queued entries (max_queued). Blocks already in the RAM cache when
// their turn comes are not staged (they are read from RAM anyway).
//
// Several readers planning the same block (ranks of one job reading one
// dataset) share one staged copy: a block is wanted once per planned read
// and read from its pool once.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "store/block_service.h"

namespace aq::store {

// How much more of its budget background work charges per byte while
// staging is busy (Stager::Busy): it runs at a tenth of its rate.
inline constexpr double kYieldFactor = 10;

struct StagerOptions {
  uint64_t memory_bytes = 512ull << 20;  // staged blocks held, all plans together
  size_t threads = 16;                   // blocks read at once (an hdd pool's spindles)
  double ttl_s = 30;                     // an unread staged block, or a waiting entry, is dropped after this
  size_t max_queued = 1 << 20;           // plan entries waiting, all plans together
};

struct StagerStats {
  uint64_t planned = 0;    // block reads named by plans
  uint64_t staged = 0;     // blocks read ahead of their reader
  uint64_t shared = 0;     // planned reads of a block staged (or being staged) for an earlier one
  uint64_t resident = 0;   // planned blocks already in the RAM cache when their turn came (not staged)
  uint64_t hits = 0;       // reads served by a staged block
  uint64_t late_hits = 0;  // ... that waited for the staging read to finish
  uint64_t expired = 0;    // staged blocks dropped unread after ttl_s
  uint64_t skipped = 0;    // entries not staged: read before their turn, waited too long, or refused (queue full)
  uint64_t failed = 0;     // staging reads that failed (the reader then reads for itself)
  uint64_t bytes_held = 0;
  uint64_t queued = 0;
  uint64_t reading = 0;  // staging reads under way
  uint64_t streams = 0;
};

class Stager final : public BlockService {
 public:
  // Reads through `inner`; `resident(id)`, when given, tells whether a
  // block is in RAM already (the node's cache).
  Stager(BlockService& inner, StagerOptions options, std::function<bool(const std::string&)> resident = nullptr);
  ~Stager() override;
  Stager(const Stager&) = delete;
  Stager& operator=(const Stager&) = delete;

  // Appends `blocks`, in the order they will be read, to plan `stream`.
  // Returns how many were queued (none past max_queued).
  size_t Plan(const std::string& stream, const std::vector<BlockRef>& blocks);
  // Forgets the stream: its waiting entries are dropped, and the blocks
  // staged for it and not read yet are freed unless another stream wants
  // them (reads do not name their stream: a read of a block pays any one
  // stream's planned read of it).
  void Cancel(const std::string& stream);
  StagerStats Stats() const;
  // Whether readers' plans are being staged now (entries waiting or reads
  // under way): background work (scrubbing, tiering, repair) yields to it.
  bool Busy() const;
  // Waits until `done(Stats())` holds (checked whenever staging's state
  // changes) or `timeout` passes; false on timeout. For tests and benches.
  bool WaitUntil(const std::function<bool(const StagerStats&)>& done, std::chrono::milliseconds timeout) const;
  const StagerOptions& options() const { return options_; }

  // BlockService: reads are served by a staged copy when there is one.
  Result<BlockRef> Write(const std::string& pool, std::string_view data, const std::string& bucket) override {
    return inner_.Write(pool, data, bucket);
  }
  Result<std::shared_ptr<const std::string>> Read(const BlockRef& ref) override;
  Status Remove(const BlockRef& ref) override;
  bool Available(const BlockRef& ref) override;

 private:
  struct Slot;
  struct Entry {
    BlockRef ref;
    double queued_at = 0;
  };
  void Worker();
  // The next entry to stage (round robin across streams), or false when
  // none waits. REQUIRES: mu_ held.
  bool Next(Entry* out, std::string* stream) AQ_REQUIRES(mu_);
  // Drops staged blocks and entries older than ttl_s. REQUIRES: mu_ held.
  void Sweep(double now) AQ_REQUIRES(mu_);
  // One planned read of `id` happened (or will not): the staged copy goes
  // when none is left. REQUIRES: mu_ held.
  void Unwant(const std::string& id) AQ_REQUIRES(mu_);
  // A planned read of `id` by `stream` was taken off its queue (staged or
  // shared with a staged copy) and is owed until a read of `id` comes.
  void Owe(const std::string& stream, const std::string& id) AQ_REQUIRES(mu_);
  // A read of `id` came: one stream's debt of it is paid (reads do not say
  // whose plan they follow; any owing stream's will do).
  void Repaid(const std::string& id) AQ_REQUIRES(mu_);
  // `id` left staging: nobody owes a read of it any more.
  void Forget(const std::string& id) AQ_REQUIRES(mu_);
  StagerStats StatsLocked() const AQ_REQUIRES(mu_);
  static double Now();

  BlockService& inner_;
  const StagerOptions options_;
  const std::function<bool(const std::string&)> resident_;

  mutable Mutex mu_;
  CondVar work_cv_{mu_};                           // workers: an entry was queued, room was freed, or stopping
  mutable CondVar done_cv_{mu_};                   // readers and stats waiters: a staging read ended, entries settled
  mutable size_t waiters_ AQ_GUARDED_BY(mu_) = 0;  // threads waiting on done_cv_
  bool stopping_ AQ_GUARDED_BY(mu_) = false;
  std::map<std::string, std::deque<Entry>> streams_ AQ_GUARDED_BY(mu_);
  std::string cursor_ AQ_GUARDED_BY(mu_);  // the stream served last
  // Planned reads outstanding per block id, and the staged (or staging) copies.
  std::unordered_map<std::string, uint32_t> wanted_ AQ_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::shared_ptr<Slot>> slots_ AQ_GUARDED_BY(mu_);
  // Reads owed per stream (block id -> count) and the streams owing each
  // block: what Cancel gives back of a stream already staged.
  std::unordered_map<std::string, std::unordered_map<std::string, uint32_t>> owed_ AQ_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::vector<std::string>> owers_ AQ_GUARDED_BY(mu_);
  uint64_t held_ AQ_GUARDED_BY(mu_) = 0;
  size_t queued_ AQ_GUARDED_BY(mu_) = 0;
  size_t reading_ AQ_GUARDED_BY(mu_) = 0;
  double last_sweep_ AQ_GUARDED_BY(mu_) = 0;
  StagerStats stats_ AQ_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace aq::store
