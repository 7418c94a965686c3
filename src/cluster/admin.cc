#include "cluster/admin.h"

#include <fmt/format.h>

#include <algorithm>

#include "cluster/cluster_blocks.h"
#include "cluster/etcd_meta_store.h"
#include "cluster/repair.h"
#include "common/units.h"
#include "http/tls.h"

namespace aq::cluster {
namespace {

// What each live node holds, taken once before the walk; a holder is asked
// once more for a piece newer than its first inventory.
class Inventories {
 public:
  Inventories(BlockClient& client, const std::vector<NodeInfo>& nodes) : client_(client) {
    for (const auto& n : nodes) {
      address_[n.id] = n.address;
      if (!n.up) continue;
      auto ids = client_.Inventory(n.address);
      if (ids.ok()) held_[n.id] = std::set<std::string>(ids->begin(), ids->end());
    }
  }
  enum class Answer { kHeld, kGone, kUnknown };
  Answer Has(const std::string& holder, const std::string& piece) {
    auto inv = held_.find(holder);
    if (inv == held_.end()) return Answer::kUnknown;  // down, or it did not answer: cannot tell
    if (inv->second.count(piece)) return Answer::kHeld;
    if (!asked_again_.insert(holder).second) return Answer::kGone;
    auto again = client_.Inventory(address_[holder]);
    if (!again.ok()) return Answer::kUnknown;
    inv->second = std::set<std::string>(again->begin(), again->end());
    return inv->second.count(piece) ? Answer::kHeld : Answer::kGone;
  }

 private:
  BlockClient& client_;
  std::map<std::string, std::string> address_;
  std::map<std::string, std::set<std::string>> held_;
  std::set<std::string> asked_again_;
};

void AddScrub(const std::string& node, const s3::MemberStatusDoc& status, ClusterAudit& a) {
  if (!status.scrub) return;
  const s3::ScrubStatsDoc& sc = *status.scrub;
  if (sc.quarantined > 0) a.quarantined[node] = {sc.quarantined, sc.quarantined_bytes};
  a.scrub_passes += sc.passes;
  a.scrub_verified += sc.pieces_verified;
  a.scrub_corrupt += sc.corrupt;
  a.scrub_missing += sc.missing;
  a.scrub_repaired += sc.repaired;
  a.scrub_unrepaired += sc.unrepaired;
  a.at_risk.insert(sc.objects_at_risk.begin(), sc.objects_at_risk.end());
}

}  // namespace

size_t ClusterAudit::nodes_up() const {
  return static_cast<size_t>(std::count_if(nodes.begin(), nodes.end(), [](const NodeInfo& n) { return n.up; }));
}

Result<ClusterAudit> Audit(std::shared_ptr<EtcdClient> etcd, const std::string& prefix) {
  ClusterAudit a;
  a.nodes = AQ_TRY(ReadClusterMap(*etcd, prefix));
  const auto config = AQ_TRY(ReadClusterConfig(*etcd, prefix));
  a.replicas = config.replicas;
  a.policies = AQ_TRY(ReadPolicies(*etcd, prefix));
  auto meta = NewEtcdMetaStore(etcd, prefix);
  // What each live node really holds: a layout can name a piece that is
  // gone (a disk replaced, a write whose outcome was lost). A TLS cluster's
  // nodes are asked over HTTPS (AQUIFER_CA, AWS_CA_BUNDLE, the system's CAs).
  std::shared_ptr<http::TlsClient> tls;
  if (std::any_of(a.nodes.begin(), a.nodes.end(), [](const NodeInfo& n) { return n.tls; })) {
    tls = AQ_TRY(http::TlsClient::Create(http::DefaultCaBundle()));
  }
  BlockClient client({kNodeAccessKey, config.node_secret}, 10, tls);
  Inventories inventories(client, a.nodes);
  AQ_TRY(store::ForEachObject(*meta, [&](const store::ObjectMeta& o) -> Status {
    const Policy& policy = a.policies.For(o.bucket);
    auto& pp = a.per_policy[policy.ToString()];
    ++a.objects;
    ++pp.objects;
    bool damaged = false;
    for (const auto& blk : o.blocks) {
      ++a.blocks;
      ++pp.blocks;
      a.logical_bytes += blk.size;
      pp.logical_bytes += blk.size;
      size_t found = 0, unknown = 0;
      for (const auto& [holder, piece] : store::StoredPieces(blk)) {
        switch (inventories.Has(holder, piece.id)) {
          case Inventories::Answer::kHeld: ++found; break;
          case Inventories::Answer::kGone: ++a.pieces_gone; break;
          case Inventories::Answer::kUnknown: ++unknown; break;
        }
        a.per_node[holder].pieces++;
        a.per_node[holder].bytes += piece.size;
        a.raw_bytes += piece.size;
        pp.raw_bytes += piece.size;
      }
      const auto p = Protection(blk, a.nodes, policy);
      if (found + unknown < p.needed) {
        ++a.missing;
        damaged = true;
      }
      if (p.live < p.needed) ++a.unavailable;
      if (p.live < p.width) {
        ++a.under_protected;
        ++pp.under_protected;
      }
      if (!p.placed) ++a.misplaced;
      if (p.live >= p.width && p.placed) {
        ++a.protected_blocks;
        ++pp.protected_blocks;
      }
    }
    if (damaged && a.damaged.size() < 20) a.damaged.push_back(o.bucket + "/" + o.key);
    return Status::Ok();
  }));
  double hits = 0, misses = 0;
  for (const auto& n : a.nodes) {
    auto status = s3::ParseMemberStatusDoc(n.status_json);
    ClusterAudit::PerNode& held = a.per_node[n.id];
    if (!status.ok()) {  // counted as nothing, and said
      held.status_error = std::string(status.status().message());
      continue;
    }
    hits += static_cast<double>(status->cache_hits);
    misses += static_cast<double>(status->cache_misses);
    AddScrub(n.id, *status, a);
    held.status = std::move(*status);
  }
  a.cache_hit_ratio = hits + misses > 0 ? hits / (hits + misses) : 0;
  for (const auto& o : a.at_risk) {
    if (std::find(a.damaged.begin(), a.damaged.end(), o) == a.damaged.end() && a.damaged.size() < 100) {
      a.damaged.push_back(o);
    }
  }
  return a;
}

Status ClusterAudit::Verdict() const {
  if (missing > 0) {
    return Status(StatusCode::kCorruption, fmt::format("{} objects have blocks no node holds", damaged.size()));
  }
  if (scrub_unrepaired > 0) {
    return Status(StatusCode::kCorruption,
                  fmt::format("the scrubbers hold {} bad pieces they could not rebuild ({} objects at risk)",
                              scrub_unrepaired, at_risk.size()));
  }
  if (under_protected > 0 || pieces_gone > 0) {  // misplaced alone is still fully protected
    return Unavailable(
        fmt::format("below protection: {} blocks under-protected, {} pieces missing on live nodes "
                    "(repair is working on it)",
                    under_protected, pieces_gone));
  }
  return Status::Ok();
}

nlohmann::json ClusterAudit::ToJson(const std::string& etcd_url) const {
  nlohmann::json quarantined_json = nlohmann::json::object();
  for (const auto& [node, q] : quarantined) quarantined_json[node] = {{"files", q.first}, {"bytes", q.second}};
  nlohmann::json j = {{"meta", etcd_url},
                      {"replicas", replicas},
                      {"objects", objects},
                      {"blocks", blocks},
                      {"fully_protected", fully_protected()},
                      {"protected_blocks", protected_blocks},
                      {"under_protected_blocks", under_protected},
                      {"misplaced_blocks", misplaced},
                      {"unavailable_blocks", unavailable},
                      {"missing_blocks", missing},
                      {"missing_replicas", pieces_gone},
                      {"damaged_objects", damaged},
                      {"scrub",
                       {{"passes", scrub_passes},
                        {"pieces_verified", scrub_verified},
                        {"corrupt", scrub_corrupt},
                        {"missing", scrub_missing},
                        {"repaired", scrub_repaired},
                        {"unrepaired", scrub_unrepaired},
                        {"objects_at_risk", std::vector<std::string>(at_risk.begin(), at_risk.end())},
                        {"quarantined", quarantined_json}}},
                      {"cache_hit_ratio", cache_hit_ratio},
                      {"policy", policies.cluster.ToString()},
                      {"logical_bytes", logical_bytes},
                      {"raw_bytes", raw_bytes},
                      {"efficiency", efficiency()},
                      {"bucket_policies", nlohmann::json::object()},
                      {"policies", nlohmann::json::object()},
                      {"nodes", nlohmann::json::array()}};
  for (const auto& [bucket, p] : policies.buckets) j["bucket_policies"][bucket] = p.ToString();
  for (const auto& [name, pp] : per_policy) {
    j["policies"][name] = {
        {"objects", pp.objects},
        {"blocks", pp.blocks},
        {"protected_blocks", pp.protected_blocks},
        {"under_protected_blocks", pp.under_protected},
        {"logical_bytes", pp.logical_bytes},
        {"raw_bytes", pp.raw_bytes},
        {"efficiency", pp.raw_bytes > 0 ? static_cast<double>(pp.logical_bytes) / pp.raw_bytes : 0.0}};
  }
  for (const auto& n : nodes) {
    auto it = per_node.find(n.id);
    const PerNode none;
    const PerNode& held = it == per_node.end() ? none : it->second;
    j["nodes"].push_back({{"id", n.id},
                          {"address", n.address},
                          {"state", NodeStateName(n.state)},
                          {"up", n.up},
                          {"pools", n.pools},
                          {"capacity_bytes", n.capacity_bytes},
                          {"replicas_held", held.pieces},
                          {"pieces_held", held.pieces},
                          {"bytes_held", held.bytes},
                          {"status", s3::ToJson(held.status)}});
    if (!held.status_error.empty()) j["nodes"].back()["status_error"] = held.status_error;
  }
  return j;
}

Result<std::string> SetMemberState(EtcdClient& etcd, const std::string& prefix, const std::string& node,
                                   NodeState state) {
  const auto nodes = AQ_TRY(ReadClusterMap(etcd, prefix));
  const std::string* found = nullptr;
  for (const auto& n : nodes) {
    if (n.id == node || n.address == node) found = &n.id;
  }
  if (found == nullptr)
    return NotFound(fmt::format("no node '{}' in the cluster (aquifer cluster status lists them)", node));
  if (state == NodeState::kSmartfail) {
    size_t active = 0;
    for (const auto& n : nodes) active += n.state == NodeState::kActive && n.id != *found;
    const auto policies = AQ_TRY(ReadPolicies(etcd, prefix));
    Policy widest = policies.cluster;
    for (const auto& [bucket, p] : policies.buckets) {
      if (p.width() > widest.width()) widest = p;
    }
    if (active < widest.width()) {
      return InvalidArgument(fmt::format("smartfail {} would leave {} active nodes for {} ({} nodes per block)", node,
                                         active, widest.ToString(), widest.width()));
    }
  }
  AQ_TRY(SetNodeState(etcd, prefix, *found, state));
  return *found;
}

Status SetProtection(EtcdClient& etcd, const std::string& prefix, const std::string& bucket, const Policy& policy) {
  size_t active = 0;
  for (const auto& n : AQ_TRY(ReadClusterMap(etcd, prefix))) active += n.state == NodeState::kActive;
  if (policy.width() > active) {
    return InvalidArgument(
        fmt::format("{} needs {} active nodes; the cluster has {}", policy.ToString(), policy.width(), active));
  }
  if (bucket.empty()) {
    if (policy.replicas > 0) {
      return InvalidArgument(
          "the cluster's replica count is set by its nodes (aquifer serve --replicas); protect sets a bucket's, or "
          "the cluster's erasure code (--ec K+M, --ec none)");
    }
    return SetClusterErasureCode(etcd, prefix, policy.ec);
  }
  if (Status set = SetBucketPolicy(etcd, prefix, bucket, policy); !set.ok()) {
    if (set.code() != StatusCode::kNotFound) return set;
    return NotFound(Subject::kBucket,
                    fmt::format("cluster protect {}: there is no bucket '{}' yet: create it first (aquifer mb "
                                "aquifer://NODE:PORT/{}, or any S3 client's create-bucket), then protect it",
                                bucket, bucket, bucket));
  }
  return Status::Ok();
}

}  // namespace aq::cluster
