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
// nothing). Fewer when fewer such nodes exist.
std::vector<std::string> Place(const std::string& block_id, const std::vector<NodeInfo>& nodes, size_t replicas);

// An object's layout for clients: each block's holders' addresses, live
// ones first, then by placement weight (the block's owner, which caches it,
// first). Holders the map does not know are left out.
s3::Layout LayoutFor(const store::ObjectMeta& object, const std::vector<NodeInfo>& nodes);

}  // namespace aq::cluster
