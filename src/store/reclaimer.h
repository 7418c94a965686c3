// Deferred removal of the blocks a layout switch (overwrite, delete,
// completion) left unreferenced. Blocks are immutable, so a reader that
// resolved an object's layout must be able to read it to the end even when
// the key is overwritten or deleted meanwhile: readers hold a Pin on the
// layout, and a freed block is removed only when no pin holds it — or after
// max_hold, the bound on how long a slow or stalled reader can keep garbage.
// min_delay keeps every freed block at least that long, for readers this
// node cannot see (other nodes of a cluster, clients reading blocks
// directly from their holders).
//
// Removal is best effort: a block not removed (node stopped, holder down)
// is an orphan that garbage collection finds later; it is never referenced.
//
// Thread safety: all methods may be called from any thread; a background
// thread removes what is due.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "store/block_service.h"

namespace aq::store {

struct ReclaimerOptions {
  double min_delay_s = 0;   // every freed block waits at least this long
  double max_hold_s = 600;  // ... and at most this long, pinned or not
  double tick_s = 0.5;      // how often due blocks are looked for
  // When a write finds the disk full, FreeEarly removes unpinned blocks
  // before their min_delay ends. Only where every reader pins (one node):
  // a cluster's min_delay covers readers on other nodes.
  bool free_early_when_full = false;
  // The time delays and holds are counted on (null: the process's clock).
  Clock* clock = nullptr;
};

struct ReclaimerStats {
  uint64_t freed = 0;     // blocks handed to Release
  uint64_t removed = 0;   // ... removed
  uint64_t deferred = 0;  // ... that had to wait for a reader or the delay
  uint64_t forced = 0;    // ... removed at max_hold while still pinned
  uint64_t early = 0;     // ... removed before min_delay because the disk was full
  uint64_t pending = 0;   // waiting now
  uint64_t pins = 0;      // layouts held by readers now
};

class Reclaimer {
 public:
  Reclaimer(BlockService& blocks, ReclaimerOptions options = {});
  ~Reclaimer();  // stops; blocks still pending stay (orphans for garbage collection)
  Reclaimer(const Reclaimer&) = delete;
  Reclaimer& operator=(const Reclaimer&) = delete;

  // Holds an object's blocks for a reader until the Pin is destroyed.
  class Pin {
   public:
    Pin() = default;
    Pin(Pin&& o) noexcept : r_(o.r_), ids_(std::move(o.ids_)) { o.r_ = nullptr; }
    Pin& operator=(Pin&& o) noexcept;
    ~Pin();

   private:
    friend class Reclaimer;
    Reclaimer* r_ = nullptr;
    std::vector<std::string> ids_;
  };
  Pin Hold(const std::vector<BlockRef>& blocks);

  // The blocks are no longer referenced by any layout: remove them now if no
  // reader holds them and no delay applies, else when that ends.
  void Release(const std::vector<BlockRef>& blocks);

  // Removes everything pending now, pinned or not (tests, shutdown).
  void Drain();
  // Removes what is due now (the background thread does this every tick).
  void RemoveDueNow();
  // The disk is full: removes every pending block no reader holds, delay
  // or not, when free_early_when_full; returns how many.
  uint64_t FreeEarly();
  ReclaimerStats Stats() const;

 private:
  struct Pending {
    BlockRef ref;
    double due, deadline;  // clock_.Now() seconds
  };
  void Unpin(const std::vector<std::string>& ids);
  void Run();
  uint64_t RemoveDue(bool all, bool early = false);
  // Removes blocks marked in removing_ (under mu_, when they were chosen),
  // then unmarks them and wakes the Holds waiting for them.
  void RemoveMarked(const std::vector<BlockRef>& blocks);

  BlockService& blocks_;
  const ReclaimerOptions options_;
  Clock& clock_;
  mutable Mutex mu_;
  CondVar cv_{mu_};
  std::map<std::string, int> pins_ AQ_GUARDED_BY(mu_);      // block id -> readers holding it
  std::map<std::string, int> removing_ AQ_GUARDED_BY(mu_);  // block id -> removals chosen, not yet done
  CondVar removed_cv_{mu_};                                 // a removal finished
  std::vector<Pending> pending_ AQ_GUARDED_BY(mu_);
  bool stop_ AQ_GUARDED_BY(mu_) = false;
  uint64_t pin_count_ AQ_GUARDED_BY(mu_) = 0;
  ReclaimerStats stats_ AQ_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace aq::store
