// A cluster examined and changed from outside its nodes (what `aquifer
// cluster` does), from its etcd: the audit of every block's protection
// against what the live nodes really hold, a member's state changed, a
// bucket's or the cluster's protection set.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cluster/etcd_client.h"
#include "cluster/membership.h"
#include "common/status.h"
#include "s3/node_stats_doc.h"

namespace aq::cluster {

struct ClusterAudit {
  std::vector<NodeInfo> nodes;
  size_t replicas = 0;  // the nodes' replica count
  Policies policies;
  uint64_t objects = 0, blocks = 0;
  uint64_t protected_blocks = 0;  // in their policy's form, placed, every piece live
  uint64_t under_protected = 0;   // fewer live pieces than the form's width
  uint64_t misplaced = 0;         // not where placement puts them (still protected if not under)
  uint64_t unavailable = 0;       // fewer live pieces than needed to read: unreadable now
  uint64_t missing = 0;           // blocks no holder has (by the live nodes' inventories)
  uint64_t pieces_gone = 0;       // pieces a live holder does not have
  uint64_t logical_bytes = 0, raw_bytes = 0;
  struct PerPolicy {
    uint64_t objects = 0, blocks = 0, protected_blocks = 0, under_protected = 0, logical_bytes = 0, raw_bytes = 0;
  };
  std::map<std::string, PerPolicy> per_policy;  // by Policy::ToString of the policy each bucket asks for
  struct PerNode {
    uint64_t pieces = 0, bytes = 0;
    s3::MemberStatusDoc status;  // what it published with its alive key
    std::string status_error;    // why that could not be read, if it could not
  };
  std::map<std::string, PerNode> per_node;
  std::vector<std::string> damaged;  // BUCKET/KEY of objects with a block no node holds (up to 20), then at risk
  // What the nodes' scrubbers found (store/scrubber.h), summed.
  uint64_t scrub_passes = 0, scrub_verified = 0, scrub_corrupt = 0, scrub_missing = 0, scrub_repaired = 0,
           scrub_unrepaired = 0;
  std::set<std::string> at_risk;  // objects with a piece a scrubber could not rebuild
  // Damaged pieces the scrubbers set aside (DATA/POOL/quarantine/ on their
  // nodes), kept for salvage until an operator removes them: files and
  // bytes by node.
  std::map<std::string, std::pair<uint64_t, uint64_t>> quarantined;
  double cache_hit_ratio = 0;

  double efficiency() const {
    return raw_bytes > 0 ? static_cast<double>(logical_bytes) / static_cast<double>(raw_bytes) : 0;
  }
  bool fully_protected() const {
    return under_protected == 0 && misplaced == 0 && missing == 0 && pieces_gone == 0 && scrub_unrepaired == 0;
  }
  size_t nodes_up() const;
  // Ok when every block is readable and whole; Corruption when data is
  // gone (a block no node holds, a piece no scrubber could rebuild);
  // Unavailable while below protection (repair is working on it).
  Status Verdict() const;
  // `aquifer cluster status --json` (`etcd_url` is echoed as "meta").
  nlohmann::json ToJson(const std::string& etcd_url) const;
};

// Walks every object's layout once and checks each piece against the
// inventory of its holder (asked again once, for pieces newer than the
// first inventory). Nodes of a TLS cluster are asked over HTTPS with the
// default CA bundle.
Result<ClusterAudit> Audit(std::shared_ptr<EtcdClient> etcd, const std::string& prefix);

// Sets a member's state; `node` is its id or address. Smartfailing a node
// is refused when fewer active nodes would remain than the widest policy
// needs. Returns the member's id.
Result<std::string> SetMemberState(EtcdClient& etcd, const std::string& prefix, const std::string& node,
                                   NodeState state);

// Sets a bucket's protection (`bucket` empty: the cluster's erasure code,
// where a policy of replicas is refused: the nodes set that). Refused when
// the cluster has fewer active nodes than the policy's width; NotFound
// (kBucket) for a bucket that does not exist.
Status SetProtection(EtcdClient& etcd, const std::string& prefix, const std::string& bucket, const Policy& policy);

}  // namespace aq::cluster
