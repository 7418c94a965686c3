// A storage node, assembled from its parts: metadata (SQLite on a single
// node, etcd in a cluster), block pools, the RAM block cache, stream
// prefetch, deferred block reclamation, the S3 endpoint, statistics and the
// metrics endpoint, and in a cluster the replicated block service,
// membership and repair. `aquifer serve` is flag parsing around a Node;
// tests and benchmarks build one in-process.
//
// Start order: options checked; metadata and pools opened; garbage
// collected; S3 endpoint listening; (cluster) membership joined and repair
// started; metrics. Stop is the reverse, one order: leave the cluster first
// (it stops sending this node work), then stop serving, then the parts the
// server used.
//
// Thread safety: Start/Stop from one thread; accessors are safe while the
// node runs.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "http/tls.h"
#include "io/file_system.h"
#include "s3/auth.h"
#include "server/internal_api.h"
#include "server/same_host.h"
#include "store/access_clock.h"
#include "store/block_cache.h"
#include "store/block_store.h"
#include "store/l3_cache.h"
#include "store/scrubber.h"
#include "store/tiering.h"
#include "store/uploads.h"

namespace aq::cluster {
class BlockClient;
class ClusterBlockService;
class EtcdClient;
class Membership;
class Repairer;
}  // namespace aq::cluster
namespace aq::store {
class MetaStore;
class ObjectStore;
class Prefetcher;
class Stager;
class LocalBlockService;
}  // namespace aq::store

namespace aq::server {
class MetricsServer;
class NodeStats;
class S3Server;
}  // namespace aq::server

namespace aq::node {

struct NodeOptions {
  std::string data_dir = "aquifer-data";
  // HTTPS on the S3 and metrics ports when set (serve --tls-cert/--tls-key);
  // Reload() on it takes a renewed certificate without dropping connections.
  std::shared_ptr<http::TlsServer> tls;
  // In a TLS cluster: the CA bundle that signed the other nodes'
  // certificates ("": the system's CAs).
  std::string tls_ca;
  std::vector<store::PoolConfig> pools;  // none: one SSD pool under data_dir
  uint64_t block_size = 4 << 20;
  uint64_t cache_bytes = 1ull << 30;  // 0 = no RAM cache
  store::CachePolicy cache_policy = store::CachePolicy::kTinyLfu;
  // The L3 cache: an SSD directory for copies of blocks of hdd pools
  // (empty: none), and its size.
  std::string l3_dir;
  uint64_t l3_bytes = 0;
  // Tiering (a single node with several pools): a pass of the mover every
  // tier_interval_s seconds (0: only when asked, `aquifer tier run`), moving
  // at most tier_bytes_per_second.
  double tier_interval_s = 3600;
  double tier_bytes_per_second = 100e6;
  // Last access times (tiering policies on reads) are recorded at most once
  // per object per this many seconds.
  double atime_granularity_s = 3600;
  uint32_t prefetch_window = 8;  // blocks ahead per stream; 0 = off
  uint64_t prefetch_memory = 256ull << 20;
  // Plan-driven staging (store/stager.h): memory for blocks read ahead of
  // readers' plans (0 = off) and how many are read at once.
  uint64_t stage_memory = 512ull << 20;
  size_t stage_threads = 16;
  // Same-host reads (server/same_host.h): memory for the sealed copies of
  // RAM-cached blocks that clients on this machine read directly (0 = off;
  // needs the RAM cache).
  uint64_t same_host_memory = 1ull << 30;

  // The S3 endpoint.
  std::string host = "127.0.0.1";
  int port = 9000;  // 0 = any free port
  std::vector<s3::Credential> credentials;
  bool anonymous = false;
  size_t threads = 64;
  size_t max_connections = 2048;
  double header_timeout_s = 10;
  double idle_timeout_s = 60;
  double io_timeout_s = 30;
  double send_bytes_per_second = 0;  // 0 = unlimited; else an emulated link

  // Metrics (/metrics, /stats): port -1 = none.
  std::string metrics_host = "127.0.0.1";
  int metrics_port = -1;

  // How long blocks freed by an overwrite or delete outlive their layout
  // for readers (negative: 2 s on a single node, 60 s in a cluster, where
  // this node cannot see other nodes' and clients' readers), and the bound
  // on how long a reader can hold them.
  double reclaim_delay_s = -1;
  double reclaim_max_s = 600;

  // Multipart uploads older than this are aborted (<= 0: only by bucket
  // lifecycle rules), and how long a lifecycle rule's day is (tests only).
  double upload_expiry_s = 7 * 86400.0;
  double lifecycle_day_s = 86400;

  // A cluster: etcd endpoints ("etcd://HOST:PORT[,...]"); empty = single node.
  std::string etcd;
  double etcd_timeout_s = 10;  // each etcd request; a commit it leaves unanswered is read back
  size_t replicas = 2;
  std::string advertise;  // HOST:PORT others reach this node at (default: the listen address)
  int lease_ttl_s = 5;
  double repair_bytes_per_second = 200e6;
  double repair_interval_s = 2;  // between repair passes

  // The scrubber (store/scrubber.h): every piece this node holds read back
  // and checked at this rate (0: off), a pass every scrub_interval_s.
  double scrub_bytes_per_second = 50e6;
  double scrub_interval_s = 86400;
  // The time the node's own timers run on: upload expiry, the scrubber's
  // passes, tiering passes and access-time flushes (null: the process's
  // clock). Tests pass a ManualClock and move through days at once.
  Clock* clock = nullptr;
  std::string node_id;  // default: generated once, kept in data_dir/node-id

  // What is wrong with the options, in words that name no command-line flag.
  Status Validate() const;
};

// In a cluster the node is also what its internal API asks of the cluster
// (server::ClusterSide: plans routed to the nodes holding their blocks, the
// map, layouts).
class Node final : private server::ClusterSide {
 public:
  // The node's files go through `fs` (default: the local POSIX file system).
  static Result<std::unique_ptr<Node>> Start(NodeOptions options, std::unique_ptr<io::FileSystem> fs = nullptr);
  ~Node() override;
  void Stop();

  int port() const;
  int metrics_port() const;  // -1 without metrics
  const NodeOptions& options() const { return o_; }
  const std::string& node_id() const { return node_id_; }  // "" on a single node
  std::string address() const;

  store::ObjectStore& objects() { return *objects_; }
  store::BlockStore& blocks() { return *blocks_; }
  store::MetaStore& meta() { return *meta_; }
  store::BlockCache* cache() { return cache_.get(); }
  server::SameHostReads* same_host() { return same_host_.get(); }  // null: off
  store::L3Cache* l3() { return l3_.get(); }
  store::Prefetcher* prefetcher() { return prefetch_.get(); }
  server::NodeStats& stats() { return *stats_; }
  server::S3Server& s3() { return *s3_; }
  cluster::Membership* membership() { return membership_.get(); }
  cluster::Repairer* repairer() { return repairer_.get(); }
  store::Scrubber* scrubber() { return scrubber_.get(); }

  // The lines `aquifer serve` prints once the node is up, and at stop.
  std::string Describe() const;
  std::string Summary() const;

 private:
  Clock& clock() const { return o_.clock != nullptr ? *o_.clock : Clock::Real(); }
  Node();
  Status StartImpl();
  Status JoinCluster();
  // The block service reads go through: `inner` behind the stager when
  // staging is on (the stager is made here).
  store::BlockService& Staged(store::BlockService& inner);
  // ---- server::ClusterSide, in a cluster ----
  // A plan's blocks staged on the nodes that store them
  // (ClusterBlockService::RoutePlan), this node's share here; how many
  // were queued in all. CancelPlan forgets the stream everywhere.
  size_t RoutePlan(const std::string& stream, const std::vector<store::BlockRef>& blocks,
                   const std::vector<store::BlockSpan>& spans) override;
  void CancelPlan(const std::string& stream) override;
  s3::internal::ClusterMapDoc ClusterMap() override;
  s3::Layout LayoutOf(const store::ObjectMeta& object) override;
  // Whether readers' plans are being staged: background work yields (null
  // without staging).
  std::function<bool()> Busy() const;

  NodeOptions o_;
  std::unique_ptr<io::FileSystem> fs_;
  // DIR/LOCK, held while the node runs: two nodes on one data directory
  // would collect each other's blocks as garbage. Released after all else.
  std::unique_ptr<io::FileSystem::Lock> data_lock_;
  std::string node_id_;
  store::GcReport gc_;
  bool stopped_ = false;
  std::shared_ptr<cluster::EtcdClient> etcd_;
  std::unique_ptr<store::MetaStore> meta_;
  std::unique_ptr<store::BlockStore> blocks_;
  std::unique_ptr<store::BlockCache> cache_;
  std::unique_ptr<server::SameHostReads> same_host_;  // before s3_, which grants through it
  std::unique_ptr<store::L3Cache> l3_;
  std::unique_ptr<store::LocalBlockService> local_;
  std::unique_ptr<cluster::BlockClient> block_client_;
  std::unique_ptr<cluster::ClusterBlockService> cluster_blocks_;
  std::unique_ptr<store::Stager> stager_;      // before objects_, which reads through it
  std::unique_ptr<store::TierPlacer> placer_;  // before objects_, which calls it
  std::unique_ptr<store::ObjectStore> objects_;
  std::unique_ptr<store::Prefetcher> prefetch_;
  std::unique_ptr<server::NodeStats> stats_;
  std::unique_ptr<server::S3Server> s3_;
  std::unique_ptr<cluster::Membership> membership_;
  // The dashboard's view of the members (server/node_stats.h): each one's
  // record, and whether it answers (probed at most once a second).
  nlohmann::json DashboardMembers();
  Mutex dashboard_mu_;
  double dashboard_probed_ AQ_GUARDED_BY(dashboard_mu_) = -1;
  std::map<std::string, bool> dashboard_answers_ AQ_GUARDED_BY(dashboard_mu_);
  std::unique_ptr<cluster::Repairer> repairer_;
  std::unique_ptr<store::Scrubber> scrubber_;
  Status StartScrubber();
  // Tiering: the thread that records access times and (single node) runs
  // the mover; in a cluster the repairer moves blocks between pools.
  void TierLoop();
  std::unique_ptr<store::AccessClock> access_;
  std::unique_ptr<store::Mover> mover_;
  // Abandoned multipart uploads: swept by the same thread.
  void SweepUploads();
  double uploads_swept_at_ = 0;
  mutable Mutex uploads_mu_;
  store::UploadSweep uploads_ AQ_GUARDED_BY(uploads_mu_);
  uint64_t uploads_expired_ AQ_GUARDED_BY(uploads_mu_) = 0;
  uint64_t uploads_expired_bytes_ AQ_GUARDED_BY(uploads_mu_) = 0;
  std::thread tier_thread_;
  std::atomic<bool> tier_stop_{false};
  std::unique_ptr<server::MetricsServer> metrics_;
};

// This node's id in a cluster: `given` (checked), or generated once and
// kept in DIR/node-id.
Result<std::string> NodeId(io::FileSystem& fs, const std::string& data_dir, const std::string& given);

}  // namespace aq::node
