// The scrubber: corruption found before a reader trips on it. Every node
// runs one in the background (OneFS's MediaScan and IntegrityScan in one
// pass): each pass takes the list of pieces (replicas, erasure-code
// fragments) this node should hold from the metadata, reads each one back
// from its pool at a bounded rate and checks its CRC32C, so a flipped,
// truncated or deleted piece is found. A bad piece is removed and rebuilt
// from good ones elsewhere (a cluster's other replicas or K other fragments)
// through the repair callback; where there is nothing to rebuild from (one
// node, every copy damaged) it stays reported, with the object it belongs
// to, until a later pass finds it whole or its object gone.
//
// A piece named by several objects (a shared block of a dedup pool) is
// read once per pass, and a finding names all of them.
//
// A finding is kept only if the piece is still named by the metadata at the
// end of the pass (an object deleted or rewritten while it was being
// checked is no damage).
//
// Thread safety: Stats() from any thread; one pass runs at a time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "store/block_store.h"
#include "store/meta_store.h"

namespace aq::store {

struct ScrubOptions {
  double bytes_per_second = 50e6;  // read budget; 0 = the scrubber is off
  double interval_s = 86400;       // from the start of one pass to the next
  // True while foreground reads need the disks (readers' plans being
  // staged): the pass then charges kYieldFactor times its bytes.
  std::function<bool()> busy;
  // The time passes are due by and paced on (null: the process's clock).
  // With a ManualClock a test moves a pass closer; the pass's pacing then
  // advances that clock instead of waiting.
  Clock* clock = nullptr;
};

// A piece this node should hold, with what it belongs to.
struct ExpectedPiece {
  BlockRef piece;      // as stored here (a fragment's own id, size, CRC)
  BlockRef block;      // the whole block (the same as piece for a replica)
  int fragment = -1;   // erasure-coded: its index in the stripe; -1: a replica
  std::string object;  // "bucket/key"
};

struct ScrubFinding {
  std::string object, piece, problem;  // problem: "corrupt: ..." or "missing"
  bool repaired = false;
  std::string repair_error;
  // A corrupt piece that was not rebuilt: where its bytes are kept (the
  // pool's quarantine/ folder), never deleted by the scrubber.
  std::string quarantined;
  // The other objects naming the same piece (a shared block of a dedup
  // pool): checked and rebuilt once for all of them.
  std::vector<std::string> also;
};

struct ScrubStats {
  bool enabled = false, running = false;
  uint64_t passes = 0;
  double last_pass_seconds = 0, last_pass_ended_s_ago = -1;
  uint64_t pieces_in_pass = 0, pieces_done_in_pass = 0;  // progress of the running pass
  // Since the node started:
  uint64_t pieces_verified = 0, bytes_verified = 0, corrupt = 0, missing = 0, repaired = 0, repair_errors = 0;
  // The last finished pass: pieces still bad after it, and their objects.
  uint64_t unrepaired = 0;
  std::vector<std::string> objects_at_risk;  // at most 100
  std::vector<ScrubFinding> last_findings;   // at most 100
  // Damaged pieces set aside in the pools' quarantine/ folders, kept for
  // salvage until an operator removes them: (path, bytes), at most 100.
  uint64_t quarantined = 0, quarantined_bytes = 0;
  std::vector<std::pair<std::string, uint64_t>> quarantine;
};

class Scrubber {
 public:
  using ListExpected = std::function<Result<std::vector<ExpectedPiece>>()>;
  // Rebuilds one bad piece here (the damaged file was set aside). Null: nothing to rebuild from.
  using Repair = std::function<Status(const ExpectedPiece&)>;

  Scrubber(BlockStore& store, ListExpected expected, Repair repair, ScrubOptions options);
  ~Scrubber();
  void Start();  // the background thread (nothing when bytes_per_second is 0)
  void Stop();

  // One whole pass now (tests, `aquifer scrub`); `stop` ends it early.
  Result<std::vector<ScrubFinding>> RunPass(const std::atomic<bool>* stop = nullptr);
  ScrubStats Stats() const;
  const ScrubOptions& options() const { return o_; }

 private:
  std::optional<ScrubFinding> Rebuild(const ExpectedPiece& e, const std::string& problem);
  // id@pool of every piece the metadata names here now.
  Result<std::set<std::string>> Named();
  void Record(const std::vector<ScrubFinding>& findings, double t0);
  void Loop();
  // Waits `seconds` on the clock, or until stop; false if stopped.
  bool WaitFor(double seconds, const std::atomic<bool>* stop);
  BlockStore& store_;
  Clock& clock_;
  ListExpected expected_;
  Repair repair_;
  const ScrubOptions o_;
  std::mutex pass_mu_;  // one pass at a time
  mutable Mutex mu_;
  ScrubStats stats_ AQ_GUARDED_BY(mu_);
  double last_end_ AQ_GUARDED_BY(mu_) = -1;
  std::atomic<bool> stop_{false};
  std::mutex wake_mu_;
  std::condition_variable wake_;
  std::thread thread_;
};

// The pieces of `o` that node `self` holds (every block when self is empty
// or the block names no nodes: a single node's).
void PiecesHeldBy(const ObjectMeta& o, const std::string& self, std::vector<ExpectedPiece>* out);

}  // namespace aq::store
