// Blocks across a cluster: every block written to the `replicas` nodes that
// placement names (this node's copy into its own pools, the others through
// their block API), acknowledged only when every replica is durable; read
// from the block's owner (its live holder of highest placement weight),
// then from the other replicas by fewest requests outstanding, failing over
// on any error or timeout. A replica found corrupt or missing on this node is
// rewritten from a good one on the spot.
//
// A bucket whose policy is erasure-coded (ec:K+M) has its blocks of at
// least kEcMinBlockBytes cut into K data + M parity fragments on the first
// K+M nodes of the block's placement, acknowledged when all K+M are
// durable. A healthy read fetches the K data fragments in parallel (no
// parity, no decoding); a fragment that cannot be read (holder down,
// damaged, missing) makes the read degraded: parity fragments are fetched
// and the block is reconstructed from any K (ISA-L), cached on this node,
// and damaged or missing fragments on live holders are rewritten.
//
// Only a block's owner caches it (reads on the owner and the block API go
// through its cache; blocks fetched from others, and a stand-in replica's
// reads, are not cached), so the nodes' RAM adds up to one cache without
// duplicates.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/membership.h"
#include "common/mutex.h"
#include "ec/stripe_read.h"
#include "http/client.h"
#include "s3/auth.h"
#include "store/block_service.h"

namespace aq::cluster {

// Node-to-node block transfer over the nodes' HTTP port:
//   PUT|GET|DELETE /_aquifer/blocks/<id>?crc=<crc32c>&pool=<pool>&size=<bytes>
//   GET /_aquifer/inventory (the ids a node holds)
// signed with the cluster's node key (never a user's: only that key may
// store or remove replicas).
class BlockClient {
 public:
  // `tls`: the cluster's nodes serve HTTPS, verified with this client.
  explicit BlockClient(s3::Credential node_key, int timeout_seconds = 10,
                       std::shared_ptr<http::TlsClient> tls = nullptr);
  ~BlockClient();
  Status Put(const std::string& address, const store::BlockRef& ref, std::string_view data);
  Result<std::string> Get(const std::string& address, const store::BlockRef& ref);
  Status Delete(const std::string& address, const store::BlockRef& ref);
  Result<std::vector<std::string>> Inventory(const std::string& address);
  // Asks `address` to stage `pieces` it holds, in this order, as plan
  // `stream` (POST /_aquifer/plan?pieces=1); returns how many it queued.
  Result<size_t> Plan(const std::string& address, const std::string& stream,
                      const std::vector<store::BlockRef>& pieces);
  // Forgets what waits of plan `stream` on `address`.
  Status CancelPlan(const std::string& address, const std::string& stream);

 private:
  Result<http::ClientResponse> Signed(const std::string& address, const std::string& method, const std::string& path,
                                      const std::string& query, std::string_view body, uint64_t max_body);
  Result<http::ClientResponse> Send(const std::string& address, const std::string& method, const store::BlockRef& ref,
                                    std::string_view body, char* into);
  const s3::Credential key_;
  std::unique_ptr<http::Pool> pool_;
};

struct ClusterBlockStats {
  uint64_t local_reads = 0, remote_reads = 0, failovers = 0, repaired_on_read = 0;
  uint64_t stray_reads = 0;  // from a copy the layout no longer names, its holders down
  uint64_t replicas_written = 0, remote_writes = 0;
  // Erasure-coded blocks: reads, reads that had to reconstruct, fragments written.
  uint64_t stripe_reads = 0, degraded_reads = 0, fragments_written = 0;
};

class ClusterBlockService final : public store::BlockService {
 public:
  // `self` is this node's id; until Attach gives the membership (after the
  // node's server is listening and it has joined), writes fail and reads
  // are served from this node's pools only.
  ClusterBlockService(std::string self, store::LocalBlockService& local, BlockClient& client, size_t replicas);
  void Attach(Membership* membership) { membership_.store(membership); }

  Result<store::BlockRef> Write(const std::string& pool, std::string_view data, const std::string& bucket) override;
  // The protection of a bucket's blocks: its own (aquifer cluster protect)
  // or the cluster's. Settings are re-read from etcd every 2 s.
  Policy PolicyFor(const std::string& bucket);
  // The settings as last read: the cluster's policy and the buckets' own.
  Policies CurrentPolicies();
  Result<std::shared_ptr<const std::string>> Read(const store::BlockRef& ref) override;
  Status Remove(const store::BlockRef& ref) override;
  // A replica is here, or a holder is up.
  bool Available(const store::BlockRef& ref) override;

  // This node's cached reads of the pieces it holds (as owner, for itself
  // and for the block API) go through `reads` (the node's plan stager over
  // its LocalBlockService) instead of straight to the local service.
  void set_local_reads(store::BlockService* reads) { reads_ = reads; }
  // Where a plan's blocks are staged: each piece on the node that will be
  // asked for it, so a staged copy is found by every read path (this node
  // reading for its clients, aquifer:// clients reading from holders, the
  // ranks of one job opening files at different nodes). A replicated block
  // on its owner (the holder reads ask first); an erasure-coded one as the
  // data fragments that hold its span (spans[i] of blocks[i]; without
  // spans, all K) on their holders, which is what a healthy read fetches; a
  // block written before the node joined on this node. Pieces whose holder
  // is down are left out. Plan order is kept within each node.
  struct PlanShare {
    std::string node, address;  // address empty: this node
    std::vector<store::BlockRef> pieces;
  };
  std::vector<PlanShare> RoutePlan(const std::vector<store::BlockRef>& blocks,
                                   const std::vector<store::BlockSpan>& spans = {}) const;
  // Copies a block to `node` from one of its holders (repair, rebalance).
  Status Replicate(const store::BlockRef& ref, const std::string& node);
  // Stores fragment `i` of an erasure-coded block on `node`: copied from its
  // holder, or reconstructed from K others when that fails.
  Status RebuildFragment(const store::BlockRef& ref, int i, const std::string& node);
  // The same bytes in another form (replicas <-> erasure-coded, `form` from
  // Policy::ForBlock) and/or another pool (tiering: on nodes that have
  // `pool`; empty: the block's), same id, on the nodes placement names;
  // the old pieces are left for the caller to remove once the layout is
  // committed.
  Result<store::BlockRef> Rewrite(const store::BlockRef& ref, const Policy& form, const std::string& pool = {});
  // Removes what `node` stores of a block (a replica or one fragment).
  Status RemovePiece(const std::string& node, const store::BlockRef& piece);

  ClusterBlockStats Stats() const;
  // The cluster map as the membership last read it (none before Attach).
  std::vector<NodeInfo> Nodes() const;
  // The node that caches a block: its live holder of highest placement weight.
  static std::string Owner(const store::BlockRef& ref, const std::map<std::string, NodeInfo>& map);
  size_t replicas() const { return replicas_; }
  const std::string& self() const { return self_; }

 private:
  std::map<std::string, NodeInfo> Map() const;
  // Writes `data` as block `ref` (id, pool set) in `form` on the nodes
  // placement ranks first, stand-ins taking the places of nodes that fail.
  Result<store::BlockRef> WriteAs(store::BlockRef ref, std::string_view data, const Policy& form);
  Result<store::BlockRef> WriteStripe(store::BlockRef ref, std::string_view data, const ec::Scheme& scheme,
                                      const std::vector<NodeInfo>& nodes);
  Result<std::shared_ptr<const std::string>> ReadStripe(const store::BlockRef& ref);
  // Writes back the whole fragments a read found damaged or missing and
  // rebuilt, on holders that are up.
  void RewriteLostFragments(const store::BlockRef& ref, const std::map<std::string, NodeInfo>& map,
                            const ec::StripeReadReport& report);
  // One stored piece (replica or fragment) from `node`, verified.
  Result<std::string> GetPiece(const std::string& node, const store::BlockRef& piece,
                               const std::map<std::string, NodeInfo>& map);
  Status PutPiece(const std::string& node, const store::BlockRef& piece, std::string_view data,
                  const std::map<std::string, NodeInfo>& map);

  const std::string self_;
  Mutex refresh_mu_;  // one read of the bucket settings at a time
  Policies policies_ AQ_GUARDED_BY(mu_);
  bool policies_read_ AQ_GUARDED_BY(mu_) = false;
  double buckets_read_at_ = -1;  // GUARDED_BY(refresh_mu_, written under mu_ too)
  std::atomic<Membership*> membership_{nullptr};
  store::LocalBlockService& local_;
  store::BlockService* reads_ = nullptr;  // set before reads start
  store::BlockService& reads() { return reads_ != nullptr ? *reads_ : local_; }
  BlockClient& client_;
  const size_t replicas_;
  mutable Mutex mu_;
  std::map<std::string, int> outstanding_ AQ_GUARDED_BY(mu_);  // requests in flight per node
  uint64_t round_robin_ AQ_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> local_reads_{0}, remote_reads_{0}, failovers_{0}, repaired_{0}, written_{0}, remote_writes_{0};
  std::atomic<uint64_t> stray_reads_{0};
  std::atomic<uint64_t> stripe_reads_{0}, degraded_reads_{0}, fragments_written_{0};
};

}  // namespace aq::cluster
