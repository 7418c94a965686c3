// aquifer cluster status | smartfail NODE | add NODE: the cluster's members,
// their state and what they hold, and the protection of every block, read
// from etcd; draining and re-adding nodes.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "cli/cli.h"
#include "cluster/cluster_blocks.h"
#include "cluster/etcd_client.h"
#include "cluster/etcd_meta_store.h"
#include "cluster/membership.h"
#include "cluster/repair.h"
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

const char* kPrefix = "/aquifer/";

Status Status_(Globals& g, const ClusterFlags& f) {
  auto etcd = std::shared_ptr<cluster::EtcdClient>(AQ_TRY(cluster::EtcdClient::Connect(f.meta)));
  const auto nodes = AQ_TRY(cluster::ReadClusterMap(*etcd, kPrefix));
  const auto config = AQ_TRY(cluster::ReadClusterConfig(*etcd, kPrefix));
  const size_t replicas = config.replicas;
  auto meta = cluster::NewEtcdMetaStore(etcd, kPrefix);
  const auto policies = AQ_TRY(cluster::ReadPolicies(*etcd, kPrefix));
  // What each live node really holds: a layout can name a replica that is
  // gone (a disk replaced, a write whose outcome was lost).
  // A TLS cluster's nodes are asked over HTTPS, verified with --ca (or
  // AQUIFER_CA, AWS_CA_BUNDLE, the system's CAs).
  std::shared_ptr<http::TlsClient> tls;
  if (std::any_of(nodes.begin(), nodes.end(), [](const cluster::NodeInfo& n) { return n.tls; })) {
    tls = AQ_TRY(http::TlsClient::Create(http::DefaultCaBundle()));
  }
  cluster::BlockClient client({cluster::kNodeAccessKey, config.node_secret}, 10, tls);
  std::map<std::string, std::set<std::string>> inventory;
  std::map<std::string, bool> up_by_id;
  std::map<std::string, std::string> node_address;
  std::set<std::string> refreshed;  // holders whose inventory was taken again during the walk
  for (const auto& n : nodes) {
    up_by_id[n.id] = n.up;
    node_address[n.id] = n.address;
    if (!n.up) continue;
    auto ids = client.Inventory(n.address);
    if (ids.ok()) inventory[n.id] = std::set<std::string>(ids->begin(), ids->end());
  }
  std::map<std::string, uint64_t> held, bytes;
  uint64_t objects = 0, blocks = 0, protected_ = 0, under = 0, misplaced = 0, lost = 0;
  uint64_t missing = 0, replicas_gone = 0;
  uint64_t logical = 0, raw = 0;  // bytes of data, and bytes stored for them on all nodes
  struct PerPolicy {
    uint64_t objects = 0, blocks = 0, protected_ = 0, under = 0, logical = 0, raw = 0;
  };
  std::map<std::string, PerPolicy> per_policy;  // by the policy the bucket asks for
  std::vector<std::string> damaged;             // objects with a block that no node holds
  for (const auto& b : AQ_TRY(meta->ListBuckets())) {
    const cluster::Policy& policy = policies.For(b.name);
    PerPolicy& pp = per_policy[policy.ToString()];
    std::string after;
    while (true) {
      auto page = AQ_TRY(meta->ListObjects({b.name, "", after, 1000}));
      for (const auto& listed : page.objects) {
        after = listed.key;
        auto o = meta->GetObject(b.name, listed.key);
        if (!o.ok()) continue;
        ++objects;
        ++pp.objects;
        bool object_damaged = false;
        for (const auto& blk : o->blocks) {
          ++blocks;
          ++pp.blocks;
          logical += blk.size;
          pp.logical += blk.size;
          // Checked against the inventories of the live holders.
          size_t found = 0, unknown = 0;
          for (const auto& [h, piece] : store::StoredPieces(blk)) {
            auto inv = inventory.find(h);
            if (inv == inventory.end()) {
              ++unknown;  // down, or it did not answer: cannot tell
            } else if (inv->second.count(piece.id)) {
              ++found;
            } else {
              // Not in the inventory taken before the walk: a piece written
              // since (the object is newer than the inventory) is asked for
              // again before it counts as gone.
              Result<std::vector<std::string>> again = Unavailable("asked already");
              if (refreshed.insert(h).second) again = client.Inventory(node_address[h]);
              if (again.ok()) inv->second = std::set<std::string>(again->begin(), again->end());
              if (!again.ok() && again.status().message() == "asked already") again = std::vector<std::string>();
              if (again.ok() && inv->second.count(piece.id)) {
                ++found;
              } else if (again.ok()) {
                ++replicas_gone;
              } else {
                ++unknown;
              }
            }
            held[h]++;
            bytes[h] += piece.size;
            raw += piece.size;
            pp.raw += piece.size;
          }
          auto p = cluster::Protection(blk, nodes, policy);
          if (found + unknown < p.needed) {
            ++missing;
            object_damaged = true;
          }
          if (p.live < p.needed) ++lost;
          if (p.live < p.width) {
            ++under;
            ++pp.under;
          }
          if (!p.placed) ++misplaced;
          if (p.live >= p.width && p.placed) {
            ++protected_;
            ++pp.protected_;
          }
        }
        if (object_damaged && damaged.size() < 20) damaged.push_back(b.name + "/" + listed.key);
      }
      if (!page.truncated) break;
    }
  }
  const double efficiency = raw > 0 ? static_cast<double>(logical) / static_cast<double>(raw) : 0;
  size_t up = 0;
  double hits = 0, misses = 0;
  std::map<std::string, nlohmann::json> load;
  for (const auto& n : nodes) {
    up += n.up;
    auto j = nlohmann::json::parse(n.status_json.empty() ? "{}" : n.status_json, nullptr, false);
    if (!j.is_object()) j = nlohmann::json::object();
    hits += j.value("cache_hits", 0.0);
    misses += j.value("cache_misses", 0.0);
    load[n.id] = j;
  }
  const double hit_ratio = hits + misses > 0 ? hits / (hits + misses) : 0;
  // What the nodes' scrubbers found on disk (store/scrubber.h): pieces
  // verified, corrupt, missing, rebuilt, and those still bad with their objects.
  uint64_t scrub_passes = 0, scrub_verified = 0, scrub_corrupt = 0, scrub_missing = 0, scrub_repaired = 0,
           scrub_bad = 0;
  std::set<std::string> at_risk;
  for (const auto& n : nodes) {
    const auto& sc = load[n.id].value("scrub", nlohmann::json::object());
    if (!sc.is_object()) continue;
    scrub_passes += sc.value("passes", uint64_t{0});
    scrub_verified += sc.value("pieces_verified", uint64_t{0});
    scrub_corrupt += sc.value("corrupt", uint64_t{0});
    scrub_missing += sc.value("missing", uint64_t{0});
    scrub_repaired += sc.value("repaired", uint64_t{0});
    scrub_bad += sc.value("unrepaired", uint64_t{0});
    for (const auto& o : sc.value("objects_at_risk", nlohmann::json::array())) {
      if (o.is_string()) at_risk.insert(o.get<std::string>());
    }
  }
  for (const auto& o : at_risk) {
    if (std::find(damaged.begin(), damaged.end(), o) == damaged.end() && damaged.size() < 100) damaged.push_back(o);
  }
  const bool full = under == 0 && misplaced == 0 && missing == 0 && replicas_gone == 0 && scrub_bad == 0;
  // Below protection: exit non-zero (scripts and monitors see it).
  auto verdict = [&]() -> Status {
    if (missing > 0) {
      return Status(StatusCode::kCorruption, fmt::format("{} objects have blocks no node holds", damaged.size()));
    }
    if (scrub_bad > 0) {
      return Status(StatusCode::kCorruption,
                    fmt::format("the scrubbers hold {} bad pieces they could not rebuild ({} objects at risk)",
                                scrub_bad, at_risk.size()));
    }
    if (under > 0 || replicas_gone > 0) {  // misplaced alone is still fully protected
      return Unavailable(
          fmt::format("below protection: {} blocks under-protected, {} pieces missing on live nodes "
                      "(repair is working on it)",
                      under, replicas_gone));
    }
    return Status::Ok();
  };
  if (g.json) {
    nlohmann::json j = {{"meta", f.meta},
                        {"replicas", replicas},
                        {"objects", objects},
                        {"blocks", blocks},
                        {"fully_protected", full},
                        {"protected_blocks", protected_},
                        {"under_protected_blocks", under},
                        {"misplaced_blocks", misplaced},
                        {"unavailable_blocks", lost},
                        {"missing_blocks", missing},
                        {"missing_replicas", replicas_gone},
                        {"damaged_objects", damaged},
                        {"scrub",
                         {{"passes", scrub_passes},
                          {"pieces_verified", scrub_verified},
                          {"corrupt", scrub_corrupt},
                          {"missing", scrub_missing},
                          {"repaired", scrub_repaired},
                          {"unrepaired", scrub_bad},
                          {"objects_at_risk", std::vector<std::string>(at_risk.begin(), at_risk.end())}}},
                        {"cache_hit_ratio", hit_ratio},
                        {"policy", policies.cluster.ToString()},
                        {"logical_bytes", logical},
                        {"raw_bytes", raw},
                        {"efficiency", efficiency},
                        {"bucket_policies", nlohmann::json::object()},
                        {"policies", nlohmann::json::object()},
                        {"nodes", nlohmann::json::array()}};
    for (const auto& [bucket, p] : policies.buckets) j["bucket_policies"][bucket] = p.ToString();
    for (const auto& [name, pp] : per_policy) {
      j["policies"][name] = {{"objects", pp.objects},
                             {"blocks", pp.blocks},
                             {"protected_blocks", pp.protected_},
                             {"under_protected_blocks", pp.under},
                             {"logical_bytes", pp.logical},
                             {"raw_bytes", pp.raw},
                             {"efficiency", pp.raw > 0 ? static_cast<double>(pp.logical) / pp.raw : 0.0}};
    }
    for (const auto& n : nodes) {
      j["nodes"].push_back({{"id", n.id},
                            {"address", n.address},
                            {"state", n.state},
                            {"up", n.up},
                            {"pools", n.pools},
                            {"capacity_bytes", n.capacity_bytes},
                            {"replicas_held", held[n.id]},
                            {"pieces_held", held[n.id]},
                            {"bytes_held", bytes[n.id]},
                            {"status", load[n.id]}});
    }
    std::printf("%s\n", j.dump(1).c_str());
    return verdict();
  }
  std::printf("cluster %s: %zu nodes (%zu up), %s\n", f.meta.c_str(), nodes.size(), up,
              policies.cluster.erasure_coded()
                  ? fmt::format("erasure code {} (blocks under {} as {} replicas)", policies.cluster.ec.ToString(),
                                units::IecBytes(cluster::kEcMinBlockBytes), policies.cluster.ec.m + 1)
                        .c_str()
                  : fmt::format("{} replicas per block", replicas).c_str());
  std::printf("  %-16s %-22s %-10s %-5s %-10s %9s %11s %11s %9s %10s\n", "node", "address", "state", "", "pools",
              "pieces", "holds", "free", "GET/s", "cache hit");
  for (const auto& n : nodes) {
    std::string pools;
    for (const auto& p : n.pools) pools += (pools.empty() ? "" : ",") + p;
    const auto& l = load[n.id];
    const double h = l.value("cache_hits", 0.0), m = l.value("cache_misses", 0.0);
    std::printf("  %-16s %-22s %-10s %-5s %-10s %9llu %11s %11s %9.1f %9.1f%%\n", n.id.c_str(), n.address.c_str(),
                n.state.c_str(), n.up ? "up" : "DOWN", pools.c_str(), static_cast<unsigned long long>(held[n.id]),
                units::Bytes(static_cast<double>(bytes[n.id])).c_str(),
                units::Bytes(static_cast<double>(n.capacity_bytes)).c_str(), l.value("get_per_second", 0.0),
                h + m > 0 ? 100 * h / (h + m) : 0.0);
  }
  for (const auto& [bucket, p] : policies.buckets) {
    std::printf("  bucket %s: %s (its own setting)\n", bucket.c_str(), p.ToString().c_str());
  }
  for (const auto& [name, pp] : per_policy) {
    std::printf(
        "  %-14s %llu objects, %llu blocks (%llu fully protected, %llu under-protected), %s of data in %s "
        "stored: efficiency %.3f\n",
        (name + ":").c_str(), static_cast<unsigned long long>(pp.objects), static_cast<unsigned long long>(pp.blocks),
        static_cast<unsigned long long>(pp.protected_), static_cast<unsigned long long>(pp.under),
        units::Bytes(static_cast<double>(pp.logical)).c_str(), units::Bytes(static_cast<double>(pp.raw)).c_str(),
        pp.raw > 0 ? static_cast<double>(pp.logical) / static_cast<double>(pp.raw) : 0.0);
  }
  std::printf("  cache: %.1f%% hits across the cluster (each block cached once, by its owner)\n", 100 * hit_ratio);
  std::printf(
      "  protection: %s; %llu objects, %llu blocks: %llu in their policy's form where placement wants them with "
      "every piece live, %llu under-protected, %llu misplaced, %llu unreadable now; efficiency %.3f (%s of data, %s "
      "stored)\n",
      full ? "FULL" : "repairing", static_cast<unsigned long long>(objects), static_cast<unsigned long long>(blocks),
      static_cast<unsigned long long>(protected_), static_cast<unsigned long long>(under),
      static_cast<unsigned long long>(misplaced), static_cast<unsigned long long>(lost), efficiency,
      units::Bytes(static_cast<double>(logical)).c_str(), units::Bytes(static_cast<double>(raw)).c_str());
  if (missing > 0 || replicas_gone > 0) {
    std::printf("  DAMAGE: %llu blocks held by no node that a layout names, %llu replicas missing on live nodes\n",
                static_cast<unsigned long long>(missing), static_cast<unsigned long long>(replicas_gone));
    for (const auto& o : damaged) {
      if (!at_risk.count(o)) std::printf("    %s: a block is gone from every holder\n", o.c_str());
    }
  }
  std::printf(
      "  scrub: %llu passes, %llu pieces verified; %llu corrupt and %llu missing found, %llu rebuilt, %llu still "
      "bad\n",
      static_cast<unsigned long long>(scrub_passes), static_cast<unsigned long long>(scrub_verified),
      static_cast<unsigned long long>(scrub_corrupt), static_cast<unsigned long long>(scrub_missing),
      static_cast<unsigned long long>(scrub_repaired), static_cast<unsigned long long>(scrub_bad));
  for (const auto& o : at_risk) std::printf("    AT RISK %s: a piece the scrubber could not rebuild\n", o.c_str());
  return verdict();
}

Status SetState(const ClusterFlags& f, const std::string& state) {
  auto etcd = AQ_TRY(cluster::EtcdClient::Connect(f.meta));
  const auto nodes = AQ_TRY(cluster::ReadClusterMap(*etcd, kPrefix));
  const std::string* found = nullptr;
  for (const auto& n : nodes) {
    if (n.id == f.node || n.address == f.node) found = &n.id;
  }
  if (found == nullptr)
    return NotFound(fmt::format("no node '{}' in the cluster (aquifer cluster status lists them)", f.node));
  if (state == "smartfail") {
    size_t active = 0;
    for (const auto& n : nodes) active += n.state == "active" && n.id != *found;
    const auto policies = AQ_TRY(cluster::ReadPolicies(*etcd, kPrefix));
    cluster::Policy widest = policies.cluster;
    for (const auto& [bucket, p] : policies.buckets) {
      if (p.width() > widest.width()) widest = p;
    }
    if (active < widest.width()) {
      return InvalidArgument(fmt::format("smartfail {} would leave {} active nodes for {} ({} nodes per block)", f.node,
                                         active, widest.ToString(), widest.width()));
    }
  }
  AQ_TRY(cluster::SetNodeState(*etcd, kPrefix, *found, state));
  std::printf("node %s: %s%s\n", found->c_str(), state.c_str(),
              state == "smartfail" ? " (its blocks are being re-protected elsewhere; `aquifer cluster status` shows "
                                     "progress, and the node becomes removed when it holds nothing)"
                                   : " (it receives its share of blocks again)");
  return Status::Ok();
}

Status Protect(const ClusterFlags& f) {
  if ((f.replicas >= 0) == !f.ec.empty()) {
    return InvalidArgument("cluster protect: give --replicas N or --ec K+M (one of them)");
  }
  auto etcd = AQ_TRY(cluster::EtcdClient::Connect(f.meta));
  const auto nodes = AQ_TRY(cluster::ReadClusterMap(*etcd, kPrefix));
  size_t active = 0;
  for (const auto& n : nodes) active += n.state == "active";
  cluster::Policy p;
  if (!f.ec.empty() && f.ec != "none") {
    p.ec = AQ_TRY(ec::ParseScheme(f.ec));
  } else if (f.replicas > 16) {
    return InvalidArgument("a bucket keeps 1 to 16 replicas per block (0 = the cluster's)");
  } else if (f.replicas > 0) {
    p.replicas = static_cast<size_t>(f.replicas);
  }
  if (p.width() > active) {
    return InvalidArgument(
        fmt::format("{} needs {} active nodes; the cluster has {}", p.ToString(), p.width(), active));
  }
  if (f.bucket.empty()) {
    if (f.replicas >= 0) {
      return InvalidArgument(
          "the cluster's replica count is set by its nodes (aquifer serve --replicas); protect sets a bucket's, or "
          "the cluster's erasure code (--ec K+M, --ec none)");
    }
    AQ_TRY(cluster::SetClusterErasureCode(*etcd, kPrefix, p.ec));
    std::printf(
        "cluster: %s for every bucket without its own policy (new blocks within 2 s; existing ones as repair "
        "reaches them)\n",
        p.erasure_coded() ? ("erasure code " + p.ec.ToString()).c_str() : "the nodes' replica count");
    return Status::Ok();
  }
  if (f.ec == "none") return InvalidArgument("--ec none is for the cluster; a bucket goes back with --replicas 0");
  if (Status set = cluster::SetBucketPolicy(*etcd, kPrefix, f.bucket, p); !set.ok()) {
    if (set.code() != StatusCode::kNotFound) return set;
    return NotFound(Subject::kBucket,
                    fmt::format("cluster protect {}: there is no bucket '{}' yet: create it first (aquifer mb "
                                "aquifer://NODE:PORT/{}, or any S3 client's create-bucket), then protect it",
                                f.bucket, f.bucket, f.bucket));
  }
  if (!p.set()) {
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
    if (Status s = SetState(*f, "smartfail"); !s.ok()) Fail(g, s);
  });
  auto* add = group->add_subcommand(
      "add", "Make a smartfailed or removed node active again (a new node joins by starting aquifer serve --meta)");
  add->add_option("node", f->node, "Node id or HOST:PORT")->required();
  meta(add);
  add->callback([f, &g] {
    if (Status s = SetState(*f, "active"); !s.ok()) Fail(g, s);
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
