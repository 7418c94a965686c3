// Where a block's replicas live: rendezvous (highest random weight) hashing
// of the block id over the cluster map. Every node and client computes the
// same answer from the same map, and adding or removing a node moves only
// the blocks whose top choices change (about 1/N of them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/membership.h"
#include "s3/layout.h"
#include "store/meta_store.h"

namespace aq::cluster {

// The weight of a node for a block: a 64-bit hash of both ids.
uint64_t PlacementWeight(const std::string& block_id, const std::string& node_id);

// The `replicas` nodes a block belongs on, best first: the highest weights
// among nodes that are up and active (smartfailed and removed nodes receive
// nothing) and, when `pool` is given, have a pool of that name (a "node
// pool": blocks of a tier live on the nodes with its media). Fewer when
// fewer such nodes exist.
std::vector<std::string> Place(const std::string& block_id, const std::vector<NodeInfo>& nodes, size_t replicas,
                               const std::string& pool = {});
// Whether a node stores blocks of `pool` (a member record without pools,
// from a node that published none, takes any).
bool HasPool(const NodeInfo& node, const std::string& pool);
// The published pools of the nodes that are up and active, one list per
// node: what store::PoolForMedia (the one rule for a media's pool) weighs
// in a cluster.
std::vector<std::vector<store::PoolConfig>> MemberPools(const std::vector<NodeInfo>& nodes);

// An object's layout for clients: each block's holders' addresses, live
// ones first, then by placement weight (the block's owner, which caches it,
// first). Holders the map does not know are left out.
s3::Layout LayoutFor(const store::ObjectMeta& object, const std::vector<NodeInfo>& nodes);

}  // namespace aq::cluster
