// aquifer cluster status | smartfail NODE | add NODE: the cluster's members,
// their state and what they hold, and the protection of every block, read
// from etcd; draining and re-adding nodes.
#include <fmt/format.h>

#include "cli/cli.h"
#include "cluster/admin.h"
#include "cluster/etcd_client.h"
#include "cluster/membership.h"
#include "common/units.h"
#include "ec/erasure.h"

namespace aq::cli {
namespace {

struct ClusterFlags {
  std::string meta;
  std::string node;
  std::string bucket;
  int replicas = -1;  // -1: not given
  std::string ec;
};

const char* kPrefix = cluster::kClusterPrefix;

// The cluster's line and one line per node.
void PrintNodes(const std::string& meta, const cluster::ClusterAudit& a) {
  const auto& policies = a.policies;
  std::printf("cluster %s: %zu nodes (%zu up), %s\n", meta.c_str(), a.nodes.size(), a.nodes_up(),
              policies.cluster.erasure_coded()
                  ? fmt::format("erasure code {} (blocks under {} as {} replicas)", policies.cluster.ec.ToString(),
                                units::IecBytes(cluster::kEcMinBlockBytes), policies.cluster.ec.m + 1)
                        .c_str()
                  : fmt::format("{} replicas per block", a.replicas).c_str());
  std::printf("  %-16s %-22s %-10s %-5s %-10s %9s %11s %11s %9s %10s\n", "node", "address", "state", "", "pools",
              "pieces", "holds", "free", "GET/s", "cache hit");
  for (const auto& n : a.nodes) {
    std::string pools;
    for (const auto& p : n.pools) pools += (pools.empty() ? "" : ",") + p;
    const auto it = a.per_node.find(n.id);
    const cluster::ClusterAudit::PerNode held = it == a.per_node.end() ? cluster::ClusterAudit::PerNode{} : it->second;
    const auto h = static_cast<double>(held.status.cache_hits), m = static_cast<double>(held.status.cache_misses);
    std::printf("  %-16s %-22s %-10s %-5s %-10s %9llu %11s %11s %9.1f %9.1f%%\n", n.id.c_str(), n.address.c_str(),
                std::string(cluster::NodeStateName(n.state)).c_str(), n.up ? "up" : "DOWN", pools.c_str(),
                static_cast<unsigned long long>(held.pieces), units::Bytes(static_cast<double>(held.bytes)).c_str(),
                units::Bytes(static_cast<double>(n.capacity_bytes)).c_str(), held.status.get_per_second,
                h + m > 0 ? 100 * h / (h + m) : 0.0);
  }
}

// Per bucket and policy, then the whole cluster's protection and data reduction.
void PrintProtection(const cluster::ClusterAudit& a) {
  for (const auto& [bucket, p] : a.policies.buckets) {
    std::printf("  bucket %s: %s (its own setting)\n", bucket.c_str(), p.ToString().c_str());
  }
  for (const auto& [name, pp] : a.per_policy) {
    std::printf(
        "  %-14s %llu objects, %llu blocks (%llu fully protected, %llu under-protected), %s of data in %s "
        "stored: efficiency %.3f\n",
        (name + ":").c_str(), static_cast<unsigned long long>(pp.objects), static_cast<unsigned long long>(pp.blocks),
        static_cast<unsigned long long>(pp.protected_blocks), static_cast<unsigned long long>(pp.under_protected),
        units::Bytes(static_cast<double>(pp.logical_bytes)).c_str(),
        units::Bytes(static_cast<double>(pp.raw_bytes)).c_str(),
        pp.raw_bytes > 0 ? static_cast<double>(pp.logical_bytes) / static_cast<double>(pp.raw_bytes) : 0.0);
  }
  std::printf("  cache: %.1f%% hits across the cluster (each block cached once, by its owner)\n",
              100 * a.cache_hit_ratio);
  std::printf(
      "  protection: %s; %llu objects, %llu blocks: %llu in their policy's form where placement wants them with "
      "every piece live, %llu under-protected, %llu misplaced, %llu unreadable now; efficiency %.3f (%s of data, %s "
      "stored)\n",
      a.fully_protected() ? "FULL" : "repairing", static_cast<unsigned long long>(a.objects),
      static_cast<unsigned long long>(a.blocks), static_cast<unsigned long long>(a.protected_blocks),
      static_cast<unsigned long long>(a.under_protected), static_cast<unsigned long long>(a.misplaced),
      static_cast<unsigned long long>(a.unavailable), a.efficiency(),
      units::Bytes(static_cast<double>(a.logical_bytes)).c_str(),
      units::Bytes(static_cast<double>(a.raw_bytes)).c_str());
  {
    // Data reduction: the block files' bytes on the nodes' disks against
    // the blocks' own bytes (each node publishes its pools' sums).
    double physical = 0, logical = 0;
    for (const auto& [id, held] : a.per_node) {
      physical += static_cast<double>(held.status.pool_bytes);
      logical += static_cast<double>(held.status.pool_logical_bytes);
    }
    if (logical > 0) {
      std::printf("  data reduction: %s of blocks stored in %s on disk (%.2fx; pools' compress= policies)\n",
                  units::Bytes(logical).c_str(), units::Bytes(physical).c_str(), physical / logical);
    }
  }
}

// Damage, the scrubbers' findings and quarantined files.
void PrintProblems(const cluster::ClusterAudit& a) {
  if (a.missing > 0 || a.pieces_gone > 0) {
    std::printf("  DAMAGE: %llu blocks held by no node that a layout names, %llu replicas missing on live nodes\n",
                static_cast<unsigned long long>(a.missing), static_cast<unsigned long long>(a.pieces_gone));
    for (const auto& o : a.damaged) {
      if (!a.at_risk.count(o)) std::printf("    %s: a block is gone from every holder\n", o.c_str());
    }
  }
  std::printf(
      "  scrub: %llu passes, %llu pieces verified; %llu corrupt and %llu missing found, %llu rebuilt, %llu still "
      "bad\n",
      static_cast<unsigned long long>(a.scrub_passes), static_cast<unsigned long long>(a.scrub_verified),
      static_cast<unsigned long long>(a.scrub_corrupt), static_cast<unsigned long long>(a.scrub_missing),
      static_cast<unsigned long long>(a.scrub_repaired), static_cast<unsigned long long>(a.scrub_unrepaired));
  for (const auto& o : a.at_risk) std::printf("    AT RISK %s: a piece the scrubber could not rebuild\n", o.c_str());
  for (const auto& [node, held] : a.per_node) {
    if (!held.status_error.empty()) {
      std::printf("    STATUS %s: its published status cannot be read (%s); counted as empty\n", node.c_str(),
                  held.status_error.c_str());
    }
  }
  for (const auto& [node, q] : a.quarantined) {
    std::printf(
        "    QUARANTINE %s: %llu damaged piece file(s), %s, kept in DATA/POOL/quarantine/ for salvage (remove "
        "them there when no longer needed)\n",
        node.c_str(), static_cast<unsigned long long>(q.first), units::Bytes(static_cast<double>(q.second)).c_str());
  }
}

Status Status_(Globals& g, const ClusterFlags& f) {
  auto etcd = std::shared_ptr<cluster::EtcdClient>(AQ_TRY(cluster::EtcdClient::Connect(f.meta)));
  const auto a = AQ_TRY(cluster::Audit(etcd, kPrefix));
  if (g.json) {
    std::printf("%s\n", a.ToJson(f.meta).dump(1).c_str());
  } else {
    PrintNodes(f.meta, a);
    PrintProtection(a);
    PrintProblems(a);
  }
  return a.Verdict();  // below protection: exit non-zero (scripts and monitors see it)
}

Status SetState(const ClusterFlags& f, cluster::NodeState state) {
  auto etcd = AQ_TRY(cluster::EtcdClient::Connect(f.meta));
  const std::string id = AQ_TRY(cluster::SetMemberState(*etcd, kPrefix, f.node, state));
  std::printf("node %s: %s%s\n", id.c_str(), std::string(cluster::NodeStateName(state)).c_str(),
              state == cluster::NodeState::kSmartfail
                  ? " (its blocks are being re-protected elsewhere; `aquifer cluster status` shows "
                    "progress, and the node becomes removed when it holds nothing)"
                  : " (it receives its share of blocks again)");
  return Status::Ok();
}

Status Protect(const ClusterFlags& f) {
  if ((f.replicas >= 0) == !f.ec.empty()) {
    return InvalidArgument("cluster protect: give --replicas N or --ec K+M (one of them)");
  }
  cluster::Policy p;
  if (!f.ec.empty() && f.ec != "none") {
    p.ec = AQ_TRY(ec::ParseScheme(f.ec));
  } else if (f.replicas > 16) {
    return InvalidArgument("a bucket keeps 1 to 16 replicas per block (0 = the cluster's)");
  } else if (f.replicas > 0) {
    p.replicas = static_cast<size_t>(f.replicas);
  }
  if (f.bucket.empty() && f.replicas >= 0) {
    return InvalidArgument(
        "the cluster's replica count is set by its nodes (aquifer serve --replicas); protect sets a bucket's, or "
        "the cluster's erasure code (--ec K+M, --ec none)");
  }
  if (!f.bucket.empty() && f.ec == "none") {
    return InvalidArgument("--ec none is for the cluster; a bucket goes back with --replicas 0");
  }
  auto etcd = AQ_TRY(cluster::EtcdClient::Connect(f.meta));
  AQ_TRY(cluster::SetProtection(*etcd, kPrefix, f.bucket, p));
  if (f.bucket.empty()) {
    std::printf(
        "cluster: %s for every bucket without its own policy (new blocks within 2 s; existing ones as repair "
        "reaches them)\n",
        p.erasure_coded() ? ("erasure code " + p.ec.ToString()).c_str() : "the nodes' replica count");
  } else if (!p.set()) {
    std::printf("bucket %s: the cluster's policy again\n", f.bucket.c_str());
  } else {
    std::printf(
        "bucket %s: %s%s (new blocks within 2 s, when the nodes re-read their settings; existing ones as repair "
        "reaches them)\n",
        f.bucket.c_str(), p.ToString().c_str(),
        p.erasure_coded()
            ? fmt::format(", blocks under {} as {} replicas", units::IecBytes(cluster::kEcMinBlockBytes), p.ec.m + 1)
                  .c_str()
            : "");
  }
  return Status::Ok();
}

}  // namespace

void RegisterClusterCommands(CLI::App& app, Globals& g) {
  auto* group = app.add_subcommand("cluster", "A cluster of storage nodes in etcd: status, smartfail, add, protect");
  group->require_subcommand(1);
  auto* f = g.Own<ClusterFlags>();
  auto meta = [f](CLI::App* c) {
    c->add_option("--meta", f->meta, "The cluster's etcd: etcd://HOST:PORT[,HOST:PORT]")->required();
  };
  auto* status = group->add_subcommand(
      "status", "Nodes (address, state, up/down, replicas and bytes held, free space) and every block's protection");
  meta(status);
  AddOutputFlags(status, g, false);
  status->callback([f, &g] {
    if (Status s = Status_(g, *f); !s.ok()) Fail(g, s);
  });
  auto* smartfail = group->add_subcommand(
      "smartfail", "Drain a node: re-protect everything it holds on the others while reads go on, then remove it");
  smartfail->add_option("node", f->node, "Node id or HOST:PORT")->required();
  meta(smartfail);
  smartfail->callback([f, &g] {
    if (Status s = SetState(*f, cluster::NodeState::kSmartfail); !s.ok()) Fail(g, s);
  });
  auto* add = group->add_subcommand(
      "add", "Make a smartfailed or removed node active again (a new node joins by starting aquifer serve --meta)");
  add->add_option("node", f->node, "Node id or HOST:PORT")->required();
  meta(add);
  add->callback([f, &g] {
    if (Status s = SetState(*f, cluster::NodeState::kActive); !s.ok()) Fail(g, s);
  });
  auto* protect = group->add_subcommand(
      "protect",
      "Set how a bucket's blocks (or, without a bucket, the cluster's) are protected: N replicas or erasure code "
      "K+M; existing blocks are re-protected in the background");
  protect->add_option("bucket", f->bucket, "Bucket (none: the cluster's erasure code)");
  auto* rep = protect->add_option("--replicas", f->replicas, "Replicas per block for this bucket (0 = the cluster's)");
  protect
      ->add_option("--ec", f->ec,
                   "Erasure code K data + M parity fragments, e.g. 4+2, 8+2 (blocks under 256 KiB keep M+1 "
                   "replicas); 'none' for the cluster: back to replicas")
      ->excludes(rep);
  meta(protect);
  protect->callback([f, &g] {
    if (Status s = Protect(*f); !s.ok()) Fail(g, s);
  });
}

}  // namespace aq::cli
