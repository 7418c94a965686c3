// Administration of a node's or a cluster's tiering (what `aquifer tier`
// does), kept with the metadata so every tool and node sees it: policies
// checked against the pools that exist, the placement of every block
// against them, and a mover pass asked of a single node.
//
// A single node's metadata is its data directory's SQLite file; a
// cluster's is in etcd, with its members' pools in the cluster map.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cluster/etcd_client.h"
#include "common/clock.h"
#include "common/status.h"
#include "io/file_system.h"
#include "node/metadata.h"
#include "store/meta_store.h"
#include "store/tiering.h"

namespace aq::node {

class TierAdmin {
 public:
  // `etcd_url` empty: the single node whose metadata `meta` is.
  static Result<TierAdmin> Open(io::FileSystem& fs, const std::string& data, const std::string& etcd_url,
                                Clock& clock = Clock::Real());

  bool cluster() const { return etcd_ != nullptr; }
  store::MetaStore& meta() { return *meta_; }

  // A pool policies may name: a node's (published at its start) or the
  // cluster members' (with how many nodes have it). Empty: unknown (a
  // node that never started), and any pool is accepted.
  struct Pool {
    std::string name;
    std::optional<store::Media> media;  // none: not published (a member record of an older version)
    int nodes = 1;
  };
  Result<std::vector<Pool>> Pools();

  // Checks the policy (store::ValidateTierPolicy, and its pool or media
  // against Pools()) and inserts it at `at` (<0 or past the end: last).
  // AlreadyExists for a name in use. Returns its position (0-based).
  Result<size_t> AddPolicy(const store::TierPolicy& policy, int at);
  // NotFound for an unknown name.
  Status RemovePolicy(const std::string& name);
  Result<std::vector<store::TierPolicy>> Policies() { return store::LoadTierPolicies(*meta_); }
  // The policies with a media resolved to a pool, as the node (its first
  // pool of that media) or the cluster's repair (the one most nodes have)
  // resolves it.
  Result<std::vector<store::TierPolicy>> ResolvedPolicies();
  // Where every block is against the resolved policies now (`resolved`:
  // ResolvedPolicies() already read; null reads them).
  Result<store::TierPlacement> Placement(const std::vector<store::TierPolicy>* resolved = nullptr);

  // A single node: asks its mover for a pass and waits for its report
  // (JSON, store::TierReportToJson plus "error"), calling `tick` about
  // every 200 ms meanwhile. TimedOut when no node answers within
  // `timeout_s`.
  Result<std::string> RunNodePass(bool dry_run, double timeout_s, const std::function<void()>& tick = {});
  // A cluster (whose nodes move continuously): waits until nothing is left
  // to move, calling `progress` with each new measurement. Returns the
  // last measurement; TimedOut, with what is left, after `timeout_s`.
  Result<store::TierPlacement> WaitUntilPlaced(double timeout_s,
                                               const std::function<void(const store::TierPlacement&)>& progress = {});
  // The last pass's report on a single node (null JSON text "null" when none).
  std::string LastReport();

 private:
  TierAdmin(std::unique_ptr<store::MetaStore> meta, std::shared_ptr<cluster::EtcdClient> etcd, Clock& clock)
      : meta_(std::move(meta)), etcd_(std::move(etcd)), clock_(&clock) {}
  std::unique_ptr<store::MetaStore> meta_;
  std::shared_ptr<cluster::EtcdClient> etcd_;  // a cluster's
  Clock* clock_;
};

}  // namespace aq::node
