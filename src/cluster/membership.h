// Cluster membership in etcd. Each node has a persistent member record
// (address, pools, capacity, state) and, while it runs, an "alive" key under
// an etcd lease that it keeps renewing: a node whose lease expires (killed,
// partitioned, stopped) is down for everyone within the lease's TTL.
//
//   PREFIX members/<node id>   {"address","pools","capacity_bytes","state","joined_ns"}
//   PREFIX alive/<node id>     {"address","started_ns"}      (under the node's lease)
//
// States: "active" (holds data, receives new replicas), "smartfail" (being
// drained: holds data until it is re-protected elsewhere, receives none),
// "removed" (drained; holds nothing).
//
// Thread safety: Membership's methods may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cluster/etcd_client.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "ec/erasure.h"
#include "store/block_store.h"

namespace aq::cluster {

// A member's state: taking blocks, being drained (its blocks re-protected
// elsewhere, then removed), or gone from placement for good.
enum class NodeState { kActive, kSmartfail, kRemoved };
std::string_view NodeStateName(NodeState state);  // "active", "smartfail", "removed"
std::optional<NodeState> ParseNodeState(std::string_view name);

struct NodeInfo {
  std::string id;
  std::string address;  // host:port of its S3 / block API
  bool tls = false;     // it serves HTTPS there (and so must every member)
  std::vector<std::string> pools;
  std::vector<store::Media> pool_media;  // one per pool (empty: not published)
  uint64_t capacity_bytes = 0;
  NodeState state = NodeState::kActive;
  int64_t joined_ns = 0;
  bool up = false;  // its alive key exists
  // What the node last published with its alive key (load, cache), if anything.
  std::string status_json;
};

// The cluster-wide settings every node reads at start (PREFIX config:
// {"replicas", "node_secret"}): written by the first node; a node started
// with a different replica count is refused.
struct ClusterConfig {
  size_t replicas = 0;
  std::string node_secret;  // the secret of the node key (kNodeAccessKey) that signs node-to-node writes
};
inline constexpr const char* kNodeAccessKey = "aquifer-node";
// Creates the configuration on the first node's start (generating the node
// secret), or reads it and checks that `replicas` agrees. etcd holds the
// secret: it must be reachable by the cluster's nodes only.
Result<ClusterConfig> EnsureClusterConfig(EtcdClient& etcd, const std::string& prefix, size_t replicas);
// The configuration as it is (NotFound before any node joined).
Result<ClusterConfig> ReadClusterConfig(EtcdClient& etcd, const std::string& prefix);

// How blocks are protected: `replicas` whole copies, or erasure-coded as
// K data + M parity fragments on K+M distinct nodes. An erasure-coded
// policy keeps blocks under kEcMinBlockBytes as M+1 replicas: they survive
// the same M lost nodes, and a small block cut into K fragments would cost
// K requests per read for little capacity saved.
struct Policy {
  size_t replicas = 0;  // with ec.k == 0; 0 and no ec: not set (the cluster's applies)
  ec::Scheme ec;        // k > 0: erasure-coded
  bool erasure_coded() const { return ec.k > 0; }
  bool set() const { return replicas > 0 || erasure_coded(); }
  // The form a block of `bytes` bytes takes: erasure-coded, or replicas.
  Policy ForBlock(uint64_t bytes) const;
  // Nodes a block in this form occupies (K+M fragments or its replicas).
  size_t width() const { return erasure_coded() ? static_cast<size_t>(ec.k + ec.m) : replicas; }
  // The fraction of raw capacity that holds data (K/(K+M), 1/replicas).
  double efficiency() const;
  std::string ToString() const;  // "replicas:2", "ec:4+2"
  bool operator==(const Policy&) const = default;
};
inline constexpr uint64_t kEcMinBlockBytes = 256 << 10;
// "replicas:N" (1-16), "ec:K+M" (see ec::ParseScheme), or "N".
Result<Policy> ParsePolicy(std::string_view text);
// The protection of every bucket: the cluster's (PREFIX config "replicas",
// "ec") unless a bucket has its own (PREFIX buckets/<name> "replicas" or "ec").
struct Policies {
  Policy cluster;
  std::map<std::string, Policy> buckets;
  const Policy& For(const std::string& bucket) const;
};
Result<Policies> ReadPolicies(EtcdClient& etcd, const std::string& prefix);
// Sets a bucket's policy (an unset Policy: the cluster's again). NotFound if no bucket.
Status SetBucketPolicy(EtcdClient& etcd, const std::string& prefix, const std::string& bucket, const Policy& policy);
// Erasure-codes the cluster's buckets (those without their own policy);
// a scheme with k == 0 goes back to the nodes' replica count.
Status SetClusterErasureCode(EtcdClient& etcd, const std::string& prefix, const ec::Scheme& scheme);

// Every member, sorted by id, with `up` from the alive keys.
Result<std::vector<NodeInfo>> ReadClusterMap(EtcdClient& etcd, const std::string& prefix);
// Sets a member's state (smartfail, removed, active). NotFound if no such member.
Status SetNodeState(EtcdClient& etcd, const std::string& prefix, const std::string& id, NodeState state);

class Membership {
 public:
  // Records this node as a member (keeping the state of an earlier record:
  // a smartfailed node that restarts stays smartfailed) and marks it alive
  // under a lease of `ttl_seconds`, renewed by a thread; the cluster map is
  // re-read by the same thread every second. Renewals are due on `clock`
  // (a test's ManualClock moves a node through its lease's life; the loop
  // still looks once a second of real time).
  static Result<std::unique_ptr<Membership>> Join(std::shared_ptr<EtcdClient> etcd, NodeInfo self,
                                                  std::string prefix = kClusterPrefix, int ttl_seconds = 5,
                                                  Clock& clock = Clock::Real());
  ~Membership();  // leaves: revokes the lease, so the node is down at once

  // A JSON object the node publishes with its alive key every few seconds
  // (its load and cache), for `aquifer cluster status`.
  void SetStatusProvider(std::function<std::string()> provider);

  const NodeInfo& self() const { return self_; }
  // The cluster map as last read (at most about a second old).
  std::vector<NodeInfo> Nodes() const;
  // Reads the map now (after a change this node made).
  Status Refresh();
  EtcdClient& etcd() { return *etcd_; }
  const std::string& prefix() const { return prefix_; }
  // Times the lease was lost (etcd restarted or unreachable past the TTL)
  // and the node marked itself alive again.
  uint64_t rejoins() const { return rejoins_.load(); }

 private:
  Membership(std::shared_ptr<EtcdClient> etcd, NodeInfo self, std::string prefix, int ttl, Clock& clock)
      : etcd_(std::move(etcd)), self_(std::move(self)), prefix_(std::move(prefix)), ttl_(ttl), clock_(clock) {}
  Status MarkAlive();
  Status PublishAlive();
  void Loop();

  std::shared_ptr<EtcdClient> etcd_;
  NodeInfo self_;
  const std::string prefix_;
  const int ttl_;
  Clock& clock_;
  int64_t lease_ = 0;  // used by the loop thread only (and the destructor after it stops)
  int64_t started_ns_ = 0;
  std::atomic<uint64_t> rejoins_{0};
  std::function<std::string()> status_ AQ_GUARDED_BY(mu_);
  mutable Mutex mu_;
  CondVar cv_{mu_};
  bool stop_ AQ_GUARDED_BY(mu_) = false;
  std::vector<NodeInfo> nodes_ AQ_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace aq::cluster
