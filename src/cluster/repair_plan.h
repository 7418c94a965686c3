// Repair decided apart from done (LevelDB's PickCompaction returns a
// description another part executes): PlanObjectRepair looks at one
// object's layout against the cluster map, its bucket's protection and its
// tiering policy, and returns what its blocks need, as data; the Repairer
// (repair.h) carries the actions out, commits the new layout and drops the
// old pieces. Pure functions: the same inputs give the same plan, tested
// case by case as a table.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cluster/membership.h"
#include "store/meta_store.h"
#include "store/tiering.h"

namespace aq::cluster {

// The node that coordinates the repair of `name` (an object's
// BUCKET/KEY, or "cluster" for cluster-wide steps): the highest placement
// weight among nodes that are up and not removed. Empty when none is.
std::string Coordinator(const std::string& name, const std::vector<NodeInfo>& nodes);

// What one block needs.
struct BlockAction {
  enum class Kind {
    // Written anew in `form` and `pool` beside the old pieces (a move to
    // another pool: tiering; another form: re-protection); every old piece
    // on a live holder is dropped once the layout names the new ones.
    kRewrite,
    // Erasure-coded fragments not where placement wants them: fragment i
    // copied (holder up) or rebuilt from K others onto the node given; the
    // old fragment dropped if its holder is up.
    kRebuildFragments,
    // Replicas: `keep` stay, a copy is made on each of `add`; when every
    // copy is made the holders are keep + add and `drop` (live holders
    // placement no longer wants) are dropped; else every old holder stays.
    kReplicate,
  };
  Kind kind = Kind::kReplicate;
  size_t block = 0;  // index in the object's blocks
  // kRewrite:
  Policy form;
  std::string pool;
  bool moves = false;       // to another pool (tiering)
  bool reprotects = false;  // to another form
  // kRebuildFragments: (fragment index, new holder)
  std::vector<std::pair<int, std::string>> fragments;
  // kReplicate:
  std::vector<std::string> keep, add, drop;
  bool operator==(const BlockAction&) const = default;
};

struct ObjectRepairPlan {
  // The object's blocks as placement sees them (every node counts these;
  // only the coordinator acts).
  uint64_t blocks = 0;                   // blocks with holders (a single node's have none)
  uint64_t under = 0;                    // fewer live pieces than the form's width
  uint64_t misplaced = 0;                // not in the form, pool or nodes placement wants
  uint64_t tier_misplaced = 0;           // not in their tiering policy's pool
  uint64_t tier_blocked = 0;             // of those, where too few nodes have the pool
  std::map<std::string, uint64_t> held;  // pieces per holder, by the layout
  bool coordinator = false;              // `self` coordinates this object
  std::vector<BlockAction> actions;      // empty unless coordinator
};

// `policy`: the bucket's protection; `tier`: the first tiering policy the
// object matches, its pool resolved (null: none).
ObjectRepairPlan PlanObjectRepair(const store::ObjectMeta& object, const std::vector<NodeInfo>& nodes,
                                  const std::string& self, const Policy& policy, const store::TierPolicy* tier);

// Drained (smartfailed) nodes no layout names any more, to mark removed:
// decided by the cluster's coordinator alone, and only when nothing is
// under-protected. `held`: pieces per node over the whole namespace.
std::vector<std::string> NodesToRemove(const std::vector<NodeInfo>& nodes, const std::map<std::string, uint64_t>& held,
                                       uint64_t under, const std::string& self);

}  // namespace aq::cluster
