// Blocks across a cluster: every block written to the `replicas` nodes that
// placement names (this node's copy into its own pools, the others through
// their block API), acknowledged only when every replica is durable; read
// from the block's owner (its live holder of highest placement weight),
// then from the other replicas by fewest requests outstanding, failing over
// on any error or timeout. A replica found corrupt or missing on this node is
// rewritten from a good one on the spot.
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
  explicit BlockClient(s3::Credential node_key, int timeout_seconds = 10);
  ~BlockClient();
  Status Put(const std::string& address, const store::BlockRef& ref, std::string_view data);
  Result<std::string> Get(const std::string& address, const store::BlockRef& ref);
  Status Delete(const std::string& address, const store::BlockRef& ref);
  Result<std::vector<std::string>> Inventory(const std::string& address);

 private:
  Result<http::ClientResponse> Send(const std::string& address, const std::string& method, const store::BlockRef& ref,
                                    std::string_view body, char* into);
  const s3::Credential key_;
  std::unique_ptr<http::Pool> pool_;
};

struct ClusterBlockStats {
  uint64_t local_reads = 0, remote_reads = 0, failovers = 0, repaired_on_read = 0;
  uint64_t replicas_written = 0, remote_writes = 0;
};

class ClusterBlockService final : public store::BlockService {
 public:
  // `self` is this node's id; until Attach gives the membership (after the
  // node's server is listening and it has joined), writes fail and reads
  // are served from this node's pools only.
  ClusterBlockService(std::string self, store::LocalBlockService& local, BlockClient& client, size_t replicas);
  void Attach(Membership* membership) { membership_.store(membership); }

  Result<store::BlockRef> Write(const std::string& pool, std::string_view data, const std::string& bucket) override;
  // The replica count of a bucket's blocks: its own (aquifer cluster protect)
  // or the cluster's. Bucket settings are re-read from etcd every 2 s.
  size_t ReplicasFor(const std::string& bucket);
  Result<std::shared_ptr<const std::string>> Read(const store::BlockRef& ref) override;
  Status Remove(const store::BlockRef& ref) override;
  // A replica is here, or a holder is up.
  bool Available(const store::BlockRef& ref) override;

  // Copies a block to `node` from one of its holders (repair, rebalance).
  Status Replicate(const store::BlockRef& ref, const std::string& node);

  ClusterBlockStats Stats() const;
  // The node that caches a block: its live holder of highest placement weight.
  static std::string Owner(const store::BlockRef& ref, const std::map<std::string, NodeInfo>& map);
  size_t replicas() const { return replicas_; }
  const std::string& self() const { return self_; }

 private:
  std::map<std::string, NodeInfo> Map() const;

  std::vector<NodeInfo> Nodes() const;

  const std::string self_;
  Mutex refresh_mu_;  // one read of the bucket settings at a time
  std::map<std::string, size_t> bucket_replicas_ AQ_GUARDED_BY(mu_);
  double buckets_read_at_ = -1;  // GUARDED_BY(refresh_mu_, written under mu_ too)
  std::atomic<Membership*> membership_{nullptr};
  store::LocalBlockService& local_;
  BlockClient& client_;
  const size_t replicas_;
  mutable Mutex mu_;
  std::map<std::string, int> outstanding_ AQ_GUARDED_BY(mu_);  // requests in flight per node
  uint64_t round_robin_ AQ_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> local_reads_{0}, remote_reads_{0}, failovers_{0}, repaired_{0}, written_{0}, remote_writes_{0};
};

}  // namespace aq::cluster
