// The node-to-node API under /_aquifer/ (a cluster's nodes and the aquifer://
// client use it; S3 clients never see it), its paths and documents typed in
// s3/internal_routes.h:
//   GET    /_aquifer/cluster                   the cluster map (no nodes on a single node)
//   GET    /_aquifer/layout/<bucket>/<key>     an object's blocks and their holders (s3::Layout)
//   GET    /_aquifer/blocks/<id>?crc=&pool=&size=[&offset=&length=]   a replica (or a slice)
//   PUT    /_aquifer/blocks/<id>?crc=&pool=&size=                      store a replica
//   DELETE /_aquifer/blocks/<id>?crc=&pool=&size=                      drop a replica
//   GET    /_aquifer/inventory                 the ids of every block this node holds
//   POST   /_aquifer/plan?stream=ID            what a reader will read next, in order (JSON): staged ahead
//   DELETE /_aquifer/plan?stream=ID            the reader changed its mind: forget what waits
//   POST|DELETE /_aquifer/plan?pieces=1&stream=ID   a node's share of a plan (s3/plan.h), node key only
//
// Who may do what (Authorize): the cluster map is no secret; a layout is
// its object's to read; block ids are capabilities learned from layouts
// (random 128-bit), so reading one takes a key that may read something; a
// plan stages only objects the key may read (the others are counted as
// denied), and a stream is the key's own; the inventory and changing
// replicas take the cluster's node key, not even an administrator's (a
// replica planted or removed by hand is damage the layouts do not know of).
//
// S3Handler authenticates the request, asks Authorize, and passes it here.
// What the API needs of the cluster the node is in (plans routed to the
// nodes holding their blocks, the map, layouts) it asks through
// ClusterSide; a single node has none.
//
// Thread safety: Handle and Authorize are called from many worker threads
// at once; the state is the store's, the stager's and the ClusterSide's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "s3/auth.h"
#include "s3/internal_routes.h"
#include "s3/layout.h"
#include "store/object_store.h"

namespace aq::server {

struct S3Request;

// What the internal API asks of the cluster its node is a member of.
class ClusterSide {
 public:
  virtual ~ClusterSide() = default;
  // A plan's blocks staged where they are stored: this node's share staged
  // here, each other node passed its own (on the node key). `spans`: of
  // each block, the bytes that will be read. Returns how many were queued
  // in all.
  virtual size_t RoutePlan(const std::string& stream, const std::vector<store::BlockRef>& blocks,
                           const std::vector<store::BlockSpan>& spans) = 0;
  // Forgets a stream's waiting entries on every node.
  virtual void CancelPlan(const std::string& stream) = 0;
  virtual s3::internal::ClusterMapDoc ClusterMap() = 0;
  // An object's blocks with their holders' addresses, for clients that
  // read blocks from the nodes holding them.
  virtual s3::Layout LayoutOf(const store::ObjectMeta& object) = 0;
};

struct InternalApiOptions {
  // In a cluster: this node's own blocks, served to other nodes at
  // /_aquifer/blocks/<id>. Null: the block routes answer 404.
  store::LocalBlockService* node_blocks = nullptr;
  // Block reads go through this (the plan stager over node_blocks, so a
  // piece staged here is served staged); null: node_blocks.
  store::BlockService* block_reads = nullptr;
  s3::Credential node_credential;  // the cluster's node key
  ClusterSide* cluster = nullptr;  // null: a single node
  uint64_t max_block_bytes = 1ull << 30;
};

class InternalApi {
 public:
  // `link` paces the block bytes sent (the node's emulated link).
  InternalApi(store::ObjectStore& objects, InternalApiOptions options, RateLimiter& link)
      : objects_(objects), o_(std::move(options)), link_(link) {}
  const InternalApiOptions& options() const { return o_; }

  // Whether the request's key may do what it asks: nullopt, or why not.
  std::optional<std::string> Authorize(const S3Request& r) const;
  // Answers an authenticated, authorized request for the bucket _aquifer.
  void Handle(S3Request& r);

 private:
  void Plan(S3Request& r);                                   // POST|DELETE /_aquifer/plan
  void PlanPieces(S3Request& r, const std::string& stream);  // ... ?pieces=1: another node's share
  void Block(S3Request& r);                                  // /_aquifer/blocks/<id>
  bool FromNode(const S3Request& r) const;                   // signed with the cluster's node key

  store::ObjectStore& objects_;
  InternalApiOptions o_;
  RateLimiter& link_;
};

}  // namespace aq::server
