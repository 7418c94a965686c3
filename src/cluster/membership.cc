#include "cluster/membership.h"

#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/log.h"
#include "common/mutex.h"
#include "store/block_store.h"

namespace aq::cluster {
namespace {

using nlohmann::json;

json MemberJson(const NodeInfo& n) {
  json media = json::array();
  for (const auto m : n.pool_media) media.push_back(store::MediaName(m));
  return {{"address", n.address},
          {"tls", n.tls},
          {"pools", n.pools},
          {"pool_media", media},
          {"capacity_bytes", n.capacity_bytes},
          {"state", NodeStateName(n.state)},
          {"joined_ns", n.joined_ns}};
}

}  // namespace

Result<ClusterConfig> EnsureClusterConfig(EtcdClient& etcd, const std::string& prefix, size_t replicas) {
  const std::string key = prefix + "config";
  for (int attempt = 0; attempt < 5; ++attempt) {
    // The node key signs node-to-node block writes; made once per cluster.
    json v = {{"replicas", replicas}, {"node_secret", store::NewBlockId() + store::NewBlockId()}};
    auto t = AQ_TRY(etcd.Txn({{key, "", Compare::Target::kCreateRevision, Compare::Op::kEqual, 0, ""}},
                             {{TxnOp::Kind::kPut, key, "", v.dump(), 0}}, {{TxnOp::Kind::kGet, key, "", "", 0}}));
    ClusterConfig c;
    if (t.succeeded) {
      c.replicas = replicas;
      c.node_secret = v["node_secret"].get<std::string>();
      return c;
    }
    if (t.ranges.empty() || t.ranges[0].empty()) continue;
    const KeyValue& kv = t.ranges[0][0];
    json have = json::parse(kv.value, nullptr, false);
    if (!have.is_object() || !have.contains("replicas")) return Corruption("etcd record 'config' is malformed");
    c.replicas = have["replicas"].get<size_t>();
    if (c.replicas != replicas) {
      return InvalidArgument(
          fmt::format("the cluster keeps {} replicas per block; this node asks for {}", c.replicas, replicas));
    }
    if (have.contains("node_secret") && have["node_secret"].is_string()) {
      c.node_secret = have["node_secret"].get<std::string>();
      return c;
    }
    // A cluster made before node keys existed: add one (once, whoever is first).
    have["node_secret"] = v["node_secret"];
    auto u = AQ_TRY(etcd.Txn({{key, "", Compare::Target::kModRevision, Compare::Op::kEqual, kv.mod_revision, ""}},
                             {{TxnOp::Kind::kPut, key, "", have.dump(), 0}}));
    if (u.succeeded) {
      c.node_secret = have["node_secret"].get<std::string>();
      return c;
    }
  }
  return Unavailable("the cluster's configuration in etcd keeps changing; retry");
}

Result<ClusterConfig> ReadClusterConfig(EtcdClient& etcd, const std::string& prefix) {
  auto kv = AQ_TRY(etcd.Get(prefix + "config"));
  if (!kv) return NotFound("no cluster here yet (no node has joined)");
  json v = json::parse(kv->value, nullptr, false);
  if (!v.is_object() || !v.contains("replicas")) return Corruption("etcd record 'config' is malformed");
  ClusterConfig c;
  c.replicas = v["replicas"].get<size_t>();
  c.node_secret = v.value("node_secret", "");
  return c;
}

Policy Policy::ForBlock(uint64_t bytes) const {
  if (!erasure_coded() || bytes >= kEcMinBlockBytes) return *this;
  Policy p;
  p.replicas = static_cast<size_t>(ec.m) + 1;
  return p;
}

double Policy::efficiency() const {
  if (erasure_coded()) return static_cast<double>(ec.k) / (ec.k + ec.m);
  return replicas > 0 ? 1.0 / static_cast<double>(replicas) : 0;
}

std::string Policy::ToString() const {
  if (erasure_coded()) return "ec:" + ec.ToString();
  return replicas > 0 ? fmt::format("replicas:{}", replicas) : "cluster default";
}

Result<Policy> ParsePolicy(std::string_view text) {
  Policy p;
  if (text.rfind("ec:", 0) == 0) {
    p.ec = AQ_TRY(ec::ParseScheme(text.substr(3)));
    return p;
  }
  std::string_view n = text.rfind("replicas:", 0) == 0 ? text.substr(9) : text;
  char* end = nullptr;
  const std::string digits(n);
  const unsigned long v = std::strtoul(digits.c_str(), &end, 10);
  if (digits.empty() || end != digits.c_str() + digits.size() || v < 1 || v > 16) {
    return InvalidArgument(fmt::format("protection '{}': expected replicas:N (1 to 16) or ec:K+M (e.g. ec:4+2)", text));
  }
  p.replicas = v;
  return p;
}

const Policy& Policies::For(const std::string& bucket) const {
  auto it = buckets.find(bucket);
  return it != buckets.end() ? it->second : cluster;
}

namespace {

// A policy as a record holds it ("replicas": N or "ec": "K+M"); unset if neither.
Policy PolicyOf(const json& v) {
  Policy p;
  if (!v.is_object()) return p;
  if (v.contains("ec") && v["ec"].is_string()) {
    if (auto s = ec::ParseScheme(v["ec"].get<std::string>()); s.ok()) p.ec = *s;
  }
  if (!p.erasure_coded() && v.contains("replicas") && v["replicas"].is_number_unsigned()) {
    p.replicas = v["replicas"].get<size_t>();
  }
  return p;
}

// Rewrites a JSON record with `edit` in a compare-and-swap loop.
Status EditRecord(EtcdClient& etcd, const std::string& key, const std::string& what,
                  const std::function<void(json&)>& edit) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto kv = AQ_TRY(etcd.Get(key));
    if (!kv) return NotFound(Subject::kBucket, fmt::format("no {}", what));
    json v = json::parse(kv->value, nullptr, false);
    if (!v.is_object()) return Corruption(fmt::format("etcd record '{}' is not a JSON object", key));
    edit(v);
    auto t = AQ_TRY(etcd.Txn({{key, "", Compare::Target::kModRevision, Compare::Op::kEqual, kv->mod_revision, ""}},
                             {{TxnOp::Kind::kPut, key, "", v.dump(), 0}}));
    if (t.succeeded) return Status::Ok();
  }
  return IoError(fmt::format("{}: its record kept changing", what));
}

}  // namespace

Result<Policies> ReadPolicies(EtcdClient& etcd, const std::string& prefix) {
  Policies out;
  auto kv = AQ_TRY(etcd.Get(prefix + "config"));
  if (!kv) return NotFound("no cluster here yet (no node has joined)");
  out.cluster = PolicyOf(json::parse(kv->value, nullptr, false));
  if (!out.cluster.set()) return Corruption("etcd record 'config' is malformed");
  const std::string p = prefix + "buckets/";
  for (const auto& b : AQ_TRY(etcd.Prefix(p))) {
    Policy policy = PolicyOf(json::parse(b.value, nullptr, false));
    if (policy.set()) out.buckets[b.key.substr(p.size())] = policy;
  }
  return out;
}

Status SetBucketPolicy(EtcdClient& etcd, const std::string& prefix, const std::string& bucket, const Policy& policy) {
  return EditRecord(etcd, prefix + "buckets/" + bucket, fmt::format("bucket '{}'", bucket), [&](json& v) {
    v.erase("replicas");
    v.erase("ec");
    if (policy.erasure_coded()) {
      v["ec"] = policy.ec.ToString();
    } else if (policy.replicas > 0) {
      v["replicas"] = policy.replicas;
    }
  });
}

Status SetClusterErasureCode(EtcdClient& etcd, const std::string& prefix, const ec::Scheme& scheme) {
  return EditRecord(etcd, prefix + "config", "cluster (no node has joined)", [&](json& v) {
    if (scheme.k > 0) {
      v["ec"] = scheme.ToString();
    } else {
      v.erase("ec");
    }
  });
}

Result<std::vector<NodeInfo>> ReadClusterMap(EtcdClient& etcd, const std::string& prefix) {
  auto t =
      AQ_TRY(etcd.Txn({}, {{TxnOp::Kind::kGet, prefix + "members/", EtcdClient::PrefixEnd(prefix + "members/"), "", 0},
                           {TxnOp::Kind::kGet, prefix + "alive/", EtcdClient::PrefixEnd(prefix + "alive/"), "", 0}}));
  if (t.ranges.size() != 2) return IoError("etcd: unexpected transaction answer");
  std::vector<NodeInfo> out;
  for (const auto& kv : t.ranges[0]) {
    json v = json::parse(kv.value, nullptr, false);
    if (!v.is_object()) return Corruption(fmt::format("etcd record '{}' is not a JSON object", kv.key));
    NodeInfo n;
    n.id = kv.key.substr(prefix.size() + 8);
    n.address = v.value("address", "");
    n.tls = v.value("tls", false);
    for (const char* field : {"pools", "pool_media"}) {
      if (!v.contains(field) || !v[field].is_array()) continue;
      for (const auto& e : v[field]) {
        if (!e.is_string()) return Corruption(fmt::format("etcd record '{}': {} holds a non-string", kv.key, field));
        if (std::string_view(field) == "pools") {
          n.pools.push_back(e.get<std::string>());
          continue;
        }
        const auto media = store::ParseMedia(e.get<std::string>());
        if (!media) {
          return Corruption(fmt::format("etcd record '{}': unknown pool media '{}'", kv.key, e.get<std::string>()));
        }
        n.pool_media.push_back(*media);
      }
    }
    n.capacity_bytes = v.value("capacity_bytes", uint64_t{0});
    const std::string state = v.value("state", "active");
    auto parsed = ParseNodeState(state);
    if (!parsed) return Corruption(fmt::format("etcd record '{}': unknown node state '{}'", kv.key, state));
    n.state = *parsed;
    n.joined_ns = v.value("joined_ns", int64_t{0});
    for (const auto& alive : t.ranges[1]) {
      if (alive.key.substr(prefix.size() + 6) != n.id) continue;
      n.up = true;
      json a = json::parse(alive.value, nullptr, false);
      if (a.is_object() && a.contains("status")) n.status_json = a["status"].dump();
    }
    out.push_back(std::move(n));
  }
  return out;
}

std::string_view NodeStateName(NodeState state) {
  switch (state) {
    case NodeState::kActive: return "active";
    case NodeState::kSmartfail: return "smartfail";
    case NodeState::kRemoved: return "removed";
  }
  return "unknown";
}

std::optional<NodeState> ParseNodeState(std::string_view name) {
  for (NodeState s : {NodeState::kActive, NodeState::kSmartfail, NodeState::kRemoved}) {
    if (NodeStateName(s) == name) return s;
  }
  return std::nullopt;
}

Status SetNodeState(EtcdClient& etcd, const std::string& prefix, const std::string& id, NodeState state) {
  const std::string key = prefix + "members/" + id;
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto kv = AQ_TRY(etcd.Get(key));
    if (!kv) return NotFound(fmt::format("no node '{}' in the cluster", id));
    json v = json::parse(kv->value, nullptr, false);
    if (!v.is_object()) return Corruption(fmt::format("etcd record '{}' is not a JSON object", key));
    v["state"] = NodeStateName(state);
    auto t = AQ_TRY(etcd.Txn({{key, "", Compare::Target::kModRevision, Compare::Op::kEqual, kv->mod_revision, ""}},
                             {{TxnOp::Kind::kPut, key, "", v.dump(), 0}}));
    if (t.succeeded) return Status::Ok();
  }
  return IoError(fmt::format("node '{}': its record kept changing", id));
}

Result<std::unique_ptr<Membership>> Membership::Join(std::shared_ptr<EtcdClient> etcd, NodeInfo self,
                                                     std::string prefix, int ttl_seconds, Clock& clock) {
  if (ttl_seconds < 2) return InvalidArgument("the membership lease needs at least 2 s");
  // Keep an earlier record's state and join time: a restart is not a new member.
  const std::string key = prefix + "members/" + self.id;
  if (auto kv = AQ_TRY(etcd->Get(key))) {
    json v = json::parse(kv->value, nullptr, false);
    if (v.is_object()) {
      self.state = ParseNodeState(v.value("state", std::string())).value_or(self.state);
      self.joined_ns = v.value("joined_ns", self.joined_ns);
    }
  }
  if (self.joined_ns == 0) self.joined_ns = Clock::Real().WallNanos();
  AQ_TRY(etcd->Put(key, MemberJson(self).dump()));
  std::unique_ptr<Membership> m(
      new Membership(std::move(etcd), std::move(self), std::move(prefix), ttl_seconds, clock));
  AQ_TRY(m->MarkAlive());
  AQ_TRY(m->Refresh());
  m->thread_ = std::thread([p = m.get()] { p->Loop(); });
  return m;
}

Status Membership::MarkAlive() {
  lease_ = AQ_TRY(etcd_->LeaseGrant(ttl_));
  started_ns_ = clock_.WallNanos();
  return PublishAlive();
}

Status Membership::PublishAlive() {
  json v = {{"address", self_.address}, {"started_ns", started_ns_}};
  std::function<std::string()> status;
  {
    MutexLock lock(mu_);
    status = status_;
  }
  if (status) {
    json st = json::parse(status(), nullptr, false);
    if (!st.is_discarded()) v["status"] = std::move(st);
  }
  return etcd_->Put(prefix_ + "alive/" + self_.id, v.dump(), lease_);
}

void Membership::SetStatusProvider(std::function<std::string()> provider) {
  MutexLock lock(mu_);
  status_ = std::move(provider);
}

Status Membership::Refresh() {
  auto nodes = AQ_TRY(ReadClusterMap(*etcd_, prefix_));
  MutexLock lock(mu_);
  nodes_ = std::move(nodes);
  for (const auto& n : nodes_) {
    if (n.id == self_.id) self_.state = n.state;  // smartfail is set from outside
  }
  return Status::Ok();
}

std::vector<NodeInfo> Membership::Nodes() const {
  MutexLock lock(mu_);
  return nodes_;
}

void Membership::Loop() {
  double last_renew = clock_.Now(), last_publish = clock_.Now();
  const double renew_every = ttl_ / 3.0;
  while (true) {
    {
      MutexLock lock(mu_);
      if (cv_.WaitFor(std::chrono::seconds(1), [&]() AQ_REQUIRES(mu_) { return stop_; })) return;
    }
    if (clock_.Now() - last_renew >= renew_every) {
      auto ttl = etcd_->LeaseKeepAlive(lease_);
      if (ttl.ok() && *ttl > 0) {
        last_renew = clock_.Now();
      } else if (ttl.ok()) {
        // The lease is gone (etcd restarted from an older state, or we were
        // unreachable past the TTL): mark this node alive again.
        if (MarkAlive().ok()) {
          rejoins_++;
          last_renew = clock_.Now();
          log::warn("cluster: lease lost; node {} is alive again", self_.id);
        }
      }
    }
    if (clock_.Now() - last_publish >= 2) {
      last_publish = clock_.Now();
      (void)PublishAlive();  // the load and cache figures (same lease)
    }
    (void)Refresh();
  }
}

Membership::~Membership() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
  (void)etcd_->LeaseRevoke(lease_);
}

}  // namespace aq::cluster
