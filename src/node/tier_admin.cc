#include "node/tier_admin.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "cluster/etcd_meta_store.h"
#include "cluster/membership.h"
#include "cluster/placement.h"
#include "common/units.h"
#include "store/block_store.h"

namespace aq::node {
Result<TierAdmin> TierAdmin::Open(io::FileSystem& fs, const std::string& data, const std::string& etcd_url,
                                  Clock& clock) {
  std::shared_ptr<cluster::EtcdClient> etcd;
  std::unique_ptr<store::MetaStore> meta;
  if (!etcd_url.empty()) {
    etcd = std::shared_ptr<cluster::EtcdClient>(AQ_TRY(cluster::EtcdClient::Connect(etcd_url)));
    meta = cluster::NewEtcdMetaStore(etcd, kClusterPrefix);
  } else {
    meta = AQ_TRY(OpenMetaStore(fs, data, ""));
  }
  return TierAdmin(std::move(meta), std::move(etcd), clock);
}

Result<std::vector<TierAdmin::Pool>> TierAdmin::Pools() {
  std::vector<Pool> out;
  if (etcd_) {
    std::map<std::string, Pool> by_name;
    for (const auto& n : AQ_TRY(cluster::ReadClusterMap(*etcd_, kClusterPrefix))) {
      if (n.state == cluster::NodeState::kRemoved) continue;
      for (size_t i = 0; i < n.pools.size(); ++i) {
        auto [it, fresh] = by_name.try_emplace(
            n.pools[i], Pool{n.pools[i], i < n.pool_media.size() ? std::optional(n.pool_media[i]) : std::nullopt, 1});
        if (!fresh) it->second.nodes++;
      }
    }
    for (auto& [name, p] : by_name) out.push_back(std::move(p));
    return out;
  }
  for (const auto& p : AQ_TRY(store::PublishedPools(*meta_))) out.push_back({p.name, p.media, 1});
  std::sort(out.begin(), out.end(), [](const Pool& a, const Pool& b) { return a.name < b.name; });
  return out;
}

Result<size_t> TierAdmin::AddPolicy(const store::TierPolicy& p, int at) {
  AQ_TRY(store::ValidateTierPolicy(p));
  // Pools the node (or the cluster's nodes) published: a policy naming another is refused now.
  const auto pools = AQ_TRY(Pools());
  bool pool_known = false, media_known = false;
  std::string names;
  for (const auto& k : pools) {
    pool_known |= k.name == p.pool;
    media_known |= p.media && k.media == p.media;
    std::string about(k.media ? store::MediaName(*k.media) : "");
    if (cluster()) about += fmt::format("{}on {} node{}", about.empty() ? "" : ", ", k.nodes, k.nodes == 1 ? "" : "s");
    names += fmt::format("{}{} ({})", names.empty() ? "" : ", ", k.name, about);
  }
  const char* who = cluster() ? "the cluster" : "the node";
  if (!pools.empty() && !p.pool.empty() && !pool_known) {
    return InvalidArgument(fmt::format("{} has no pool '{}' (its pools: {})", who, p.pool, names));
  }
  if (!pools.empty() && p.media && !media_known) {
    return InvalidArgument(fmt::format("{} has no {} pool (its pools: {})", who, store::MediaName(*p.media), names));
  }
  auto policies = AQ_TRY(store::LoadTierPolicies(*meta_));
  for (const auto& q : policies) {
    if (q.name == p.name) {
      return Status(StatusCode::kAlreadyExists, fmt::format("a policy '{}' exists (tier policy rm it first)", p.name));
    }
  }
  const size_t pos = at < 0 ? policies.size() : std::min<size_t>(static_cast<size_t>(at), policies.size());
  policies.insert(policies.begin() + static_cast<std::ptrdiff_t>(pos), p);
  AQ_TRY(store::SaveTierPolicies(*meta_, policies));
  return pos;
}

Status TierAdmin::RemovePolicy(const std::string& name) {
  auto policies = AQ_TRY(store::LoadTierPolicies(*meta_));
  const size_t before = policies.size();
  std::erase_if(policies, [&](const store::TierPolicy& p) { return p.name == name; });
  if (policies.size() == before) return NotFound(fmt::format("no policy '{}'", name));
  return store::SaveTierPolicies(*meta_, policies);
}

Result<std::vector<store::TierPolicy>> TierAdmin::ResolvedPolicies() {
  const auto policies = AQ_TRY(store::LoadTierPolicies(*meta_));
  if (std::none_of(policies.begin(), policies.end(), [](const store::TierPolicy& p) { return p.pool.empty(); })) {
    return policies;
  }
  if (etcd_) {
    const auto nodes = AQ_TRY(cluster::ReadClusterMap(*etcd_, kClusterPrefix));
    return store::ResolveTierMedia(policies,
                                   [&](store::Media m) { return store::PoolForMedia(cluster::MemberPools(nodes), m); });
  }
  const auto pools = AQ_TRY(store::PublishedPools(*meta_));
  return store::ResolveTierMedia(policies, [&](store::Media m) { return store::PoolForMedia(pools, m); });
}

Result<store::TierPlacement> TierAdmin::Placement(const std::vector<store::TierPolicy>* resolved) {
  if (resolved != nullptr) return store::MeasureTierPlacement(*meta_, *resolved, clock_->WallNanos());
  return store::MeasureTierPlacement(*meta_, AQ_TRY(ResolvedPolicies()), clock_->WallNanos());
}

Result<std::string> TierAdmin::RunNodePass(bool dry_run, double timeout_s, const std::function<void()>& tick) {
  if (cluster()) return InvalidArgument("a cluster's nodes move continuously: wait with WaitUntilPlaced");
  std::mt19937_64 rng{std::random_device{}()};
  const store::TierRunRequest request{fmt::format("{:016x}", rng()), dry_run};
  AQ_TRY(meta_->PutSetting(store::kTierRequestSetting, request.ToString()));
  const double deadline = clock_->Now() + timeout_s;
  while (clock_->Now() < deadline) {
    clock_->SleepFor(0.2);
    if (tick) tick();
    auto text = meta_->GetSetting(store::kTierReportSetting);
    if (!text.ok()) continue;
    auto r = nlohmann::json::parse(*text, nullptr, false);
    if (r.is_object() && r.value("request", "") == request.id) return *text;
  }
  return Status(StatusCode::kTimedOut, fmt::format("no node answered within {:.0f} s", timeout_s));
}

Result<store::TierPlacement> TierAdmin::WaitUntilPlaced(
    double timeout_s, const std::function<void(const store::TierPlacement&)>& progress) {
  const auto policies = AQ_TRY(ResolvedPolicies());
  const double t0 = clock_->Now();
  while (true) {
    auto m = AQ_TRY(store::MeasureTierPlacement(*meta_, policies, clock_->WallNanos()));
    if (progress) progress(m);
    if (m.misplaced_blocks == 0) return m;
    if (clock_->Now() - t0 >= timeout_s) {
      return Status(
          StatusCode::kTimedOut,
          fmt::format("{} blocks ({}) still to move after {:.0f} s (are the cluster's nodes up? "
                      "aquifer cluster status shows their repair errors)",
                      m.misplaced_blocks, units::Bytes(static_cast<double>(m.misplaced_bytes)), clock_->Now() - t0));
    }
    clock_->SleepFor(0.5);
  }
}

std::string TierAdmin::LastReport() {
  if (cluster()) return "null";
  auto t = meta_->GetSetting(store::kTierReportSetting);
  return t.ok() ? *t : "null";
}

}  // namespace aq::node
