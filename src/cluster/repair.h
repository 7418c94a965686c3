// Keeping every block where placement says it belongs, with its full
// replica count: after a node is lost (lease expired), while a node is
// smartfailed (drained), and when a node joins (its share moves to it).
//
// Every node runs a Repairer. Each pass reads every object's layout; the
// node that coordinates an object (placement of the object's name over the
// nodes that are up) fixes its blocks: it copies each block missing from a
// node it belongs on from a live replica (rate-limited; an erasure-coded
// block's lost fragment is rebuilt from K others; a block whose form differs
// from its bucket's policy is rewritten in the new form), commits the new
// layout in one metadata transaction if the object did not change
// meanwhile, and only then removes replicas from nodes the block no longer
// belongs on. A smartfailed node that no layout names any more is marked
// removed. Progress and the cluster's protection are in Stats().
//
// Tiering in a cluster is the same machinery: an object that a file pool
// policy (store/tiering.h) sends to pool P has its blocks placed among the
// nodes that have a pool P, stored in it; a block elsewhere is rewritten
// there (read once, verified, written to every new holder), the layout
// switched, the old pieces dropped after the delay. Policies on last access
// use the times the nodes record. When fewer nodes have P than a block
// needs, it stays where it is (counted in tier_blocked).
//
// Thread safety: Stats() may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "cluster/cluster_blocks.h"
#include "cluster/membership.h"
#include "cluster/repair_plan.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "store/meta_store.h"

namespace aq::cluster {

struct RepairOptions {
  double interval_seconds = 2;      // between passes
  double bytes_per_second = 200e6;  // copy budget
  // How long a piece (replica, fragment) a new layout no longer names is
  // kept before it is removed: reads that resolved the old layout, here or
  // on other nodes, finish meanwhile (the node's freed-block delay).
  double drop_delay_seconds = 60;
  double tier_bytes_per_second = 100e6;  // copy budget of moves between pools (tiering)
  // True while foreground reads need the disks (readers' plans being
  // staged): copies then charge store::kYieldFactor times their bytes.
  std::function<bool()> busy;
};

struct RepairStats {
  uint64_t passes = 0;
  // The last full pass, over the whole namespace:
  uint64_t objects = 0, blocks = 0;
  uint64_t under_protected = 0;  // fewer live replicas than the replica count
  uint64_t misplaced = 0;        // replicas not where placement puts them (includes the above)
  bool fully_protected = false;  // a pass found nothing to do
  double last_pass_seconds = 0;
  // Work this node did, since it started:
  uint64_t copied = 0, bytes_copied = 0, dropped = 0, layouts_committed = 0, conflicts = 0, errors = 0;
  uint64_t reprotected = 0;               // blocks rewritten in another form (replicas <-> erasure-coded)
  uint64_t tiered = 0, bytes_tiered = 0;  // blocks moved to their tiering policy's pool
  // The last full pass: blocks not in their tiering policy's pool, and of
  // those, blocks whose pool has too few nodes to take them.
  uint64_t tier_misplaced = 0, tier_blocked = 0;
  uint64_t drops_pending = 0;  // pieces waiting for drop_delay_seconds
  std::string last_error;
};

// Placement's view of a layout under a bucket's policy: how many of the
// block's pieces (replicas or fragments) are on nodes that are up, of how
// many (`width`), how many it needs to be readable, and whether it has the
// policy's form and sits exactly where placement puts it.
struct BlockProtection {
  size_t live = 0, width = 0, needed = 1;
  bool placed = false;
};
// `pool`: where the block belongs (a tiering policy's pool; empty: its own).
BlockProtection Protection(const store::BlockRef& block, const std::vector<NodeInfo>& nodes, const Policy& policy,
                           const std::string& pool = {});
// Whether a block already has the form `form` (Policy::ForBlock) asks for.
bool SameForm(const store::BlockRef& block, const Policy& form);

// The blocks a node should hold by the layouts (objects and uploaded parts
// naming it, and blocks that name no node): what its garbage collection
// keeps. A replica moved away while the node was down is not among them.
Result<std::vector<std::string>> BlocksHeldBy(store::MetaStore& meta, const std::string& node);

class Repairer {
 public:
  Repairer(Membership& membership, store::MetaStore& meta, ClusterBlockService& blocks, RepairOptions options,
           Clock& clock = Clock::Real());
  ~Repairer();  // stops after the current block; pieces not yet dropped stay (garbage collection finds them)
  RepairStats Stats() const;
  // One pass now, on the caller's thread (tests drive repair this way with
  // a long interval); passes never overlap.
  Status RunPass();

 private:
  void Loop();
  // Walks every object: PlanObjectRepair (repair_plan.h) decides, Execute acts.
  Status Pass();
  // Carries out one object's actions, commits its new layout if the object
  // did not change meanwhile, and schedules the old pieces' drops.
  void Execute(store::ObjectMeta object, const std::vector<BlockAction>& actions, const std::vector<NodeInfo>& nodes);
  // A piece to remove once the new layout is committed: (node, piece).
  using PendingDrop = std::pair<std::string, store::BlockRef>;
  bool ApplyRewrite(const BlockAction& a, store::BlockRef& b, const std::set<std::string>& up,
                    std::vector<PendingDrop>* drops);
  bool ApplyFragments(const BlockAction& a, store::BlockRef& b, const std::set<std::string>& up,
                      std::vector<PendingDrop>* drops);
  bool ApplyReplicas(const BlockAction& a, store::BlockRef& b, std::vector<PendingDrop>* drops);
  void Failed(const Status& s);
  // Waits until `bytes` are within `budget` (or the repairer stops).
  void Throttle(uint64_t bytes, RateLimiter& budget);
  // A piece to remove once due, unless the object's layout names it again.
  struct Drop {
    double due = 0;
    std::string bucket, key, node;
    store::BlockRef piece;
  };
  void DropDue(bool all);

  Membership& membership_;
  store::MetaStore& meta_;
  ClusterBlockService& blocks_;
  const RepairOptions options_;
  Clock& clock_;
  Mutex pass_mu_;  // one pass at a time
  mutable Mutex mu_;
  CondVar cv_{mu_};
  bool stop_ AQ_GUARDED_BY(mu_) = false;
  RepairStats stats_ AQ_GUARDED_BY(mu_);
  std::vector<Drop> drops_ AQ_GUARDED_BY(mu_);
  RateLimiter repair_budget_, tier_budget_;
  std::atomic<bool> stopping_{false};  // a pass's walk ends early
  std::thread thread_;
};

}  // namespace aq::cluster
