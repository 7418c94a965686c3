#include "cluster/repair.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <unordered_map>

#include "cluster/placement.h"
#include "cluster/repair_plan.h"
#include "common/log.h"
#include "common/mutex.h"
#include "store/stager.h"
#include "store/tiering.h"

namespace aq::cluster {

bool SameForm(const store::BlockRef& b, const Policy& form) {
  if (b.erasure_coded()) return form.erasure_coded() && form.ec.k == b.ec_k && form.ec.m == b.ec_m;
  return !form.erasure_coded();
}

BlockProtection Protection(const store::BlockRef& block, const std::vector<NodeInfo>& nodes, const Policy& policy,
                           const std::string& pool) {
  BlockProtection p;
  const Policy form = policy.ForBlock(block.size);
  std::set<std::string> up;
  for (const auto& n : nodes) {
    if (n.up) up.insert(n.id);
  }
  for (const auto& h : block.nodes) p.live += up.count(h);
  p.width = block.erasure_coded() ? static_cast<size_t>(block.ec_k + block.ec_m) : form.width();
  p.needed = block.erasure_coded() ? block.ec_k : 1;
  const std::string& home = pool.empty() ? block.pool : pool;
  auto want = Place(block.id, nodes, form.width(), home);
  std::vector<std::string> have = block.nodes;
  std::sort(want.begin(), want.end());
  std::sort(have.begin(), have.end());
  p.placed = SameForm(block, form) && block.pool == home && want == have && have.size() >= form.width();
  return p;
}

Result<std::vector<std::string>> BlocksHeldBy(store::MetaStore& meta, const std::string& node) {
  std::vector<std::string> out;
  auto keep = [&](const std::vector<store::BlockRef>& blocks) {
    for (const auto& b : blocks) {
      if (b.nodes.empty()) out.push_back(b.id);
      for (const auto& [holder, piece] : store::StoredPieces(b)) {
        if (holder == node) out.push_back(piece.id);
      }
    }
  };
  AQ_TRY(store::ForEachObject(meta, [&](const store::ObjectMeta& o) {
    keep(o.blocks);
    return Status::Ok();
  }));
  for (const auto& bucket : AQ_TRY(meta.ListBuckets())) {
    for (const auto& u : AQ_TRY(meta.ListUploads(bucket.name))) {
      auto full = meta.GetUpload(u.id);
      if (!full.ok()) continue;
      for (const auto& p : full->parts) keep(p.blocks);
    }
  }
  return out;
}

Repairer::Repairer(Membership& membership, store::MetaStore& meta, ClusterBlockService& blocks, RepairOptions options,
                   Clock& clock)
    : membership_(membership),
      meta_(meta),
      blocks_(blocks),
      options_(options),
      clock_(clock),
      repair_budget_(options.bytes_per_second, 1.0, clock),
      tier_budget_(options.tier_bytes_per_second, 1.0, clock) {
  thread_ = std::thread([this] { Loop(); });
}

Repairer::~Repairer() {
  stopping_ = true;
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

RepairStats Repairer::Stats() const {
  MutexLock lock(mu_);
  return stats_;
}

void Repairer::Loop() {
  while (true) {
    {
      MutexLock lock(mu_);
      if (cv_.WaitFor(std::chrono::duration<double>(options_.interval_seconds),
                      [&]() AQ_REQUIRES(mu_) { return stop_; }))
        return;
    }
    (void)RunPass();
  }
}

Status Repairer::RunPass() {
  MutexLock one(pass_mu_);
  Status s = Pass();
  if (!s.ok()) {
    MutexLock lock(mu_);
    stats_.errors++;
    stats_.last_error = std::string(s.message());
  }
  return s;
}

void Repairer::Throttle(uint64_t bytes, RateLimiter& budget) {
  const double factor = options_.busy && options_.busy() ? store::kYieldFactor : 1;
  const double wait = budget.Reserve(static_cast<uint64_t>(static_cast<double>(bytes) * factor));
  if (wait <= 0) return;
  MutexLock lock(mu_);
  cv_.WaitFor(std::chrono::duration<double>(wait), [&]() AQ_REQUIRES(mu_) { return stop_; });
}

void Repairer::DropDue(bool all) {
  std::vector<Drop> due;
  {
    MutexLock lock(mu_);
    const double now = clock_.Now();
    auto keep = std::partition(drops_.begin(), drops_.end(), [&](const Drop& d) { return !all && d.due > now; });
    due.assign(std::make_move_iterator(keep), std::make_move_iterator(drops_.end()));
    drops_.erase(keep, drops_.end());
    stats_.drops_pending = drops_.size();
  }
  for (const auto& d : due) {
    // A later layout may name the same piece again (a node back where
    // placement wants it, a form changed back): then it stays.
    auto o = meta_.GetObject(d.bucket, d.key);
    bool named = false;
    if (o.ok()) {
      for (const auto& b : o->blocks) {
        for (const auto& [h, piece] : store::StoredPieces(b)) {
          named |= h == d.node && piece.id == d.piece.id && piece.pool == d.piece.pool;
        }
      }
    } else if (o.status().code() != StatusCode::kNotFound) {
      MutexLock lock(mu_);
      drops_.push_back(d);  // cannot tell now: later
      continue;
    }
    if (named) continue;
    Status s = blocks_.RemovePiece(d.node, d.piece);
    MutexLock lock(mu_);
    if (s.ok()) stats_.dropped++;
  }
}

Status Repairer::Pass() {
  DropDue(false);
  const double t0 = clock_.Now();
  const auto nodes = membership_.Nodes();
  const std::string self = membership_.self().id;
  // Tiering: the policies, and the recorded reads when a policy asks for them.
  std::vector<store::TierPolicy> tiers;
  if (auto t = store::LoadTierPolicies(meta_); t.ok()) {
    tiers = std::move(*t);
    // A media names the pool of that media most nodes have; none: the
    // policy's objects stay where they are (tier_blocked).
    for (auto& p : tiers) {
      if (p.pool.empty() && p.media) p.pool = store::PoolForMedia(MemberPools(nodes), *p.media);
    }
  } else {
    Failed(t.status());
  }
  const int64_t now_ns = clock_.WallNanos();
  auto loaded = store::TierMatcher::Load(meta_, tiers, now_ns);
  if (!loaded.ok()) Failed(loaded.status());  // matched without the recorded reads
  const auto matcher = loaded.ok() ? std::move(*loaded) : store::TierMatcher(tiers, {}, now_ns);
  ObjectRepairPlan total;  // the counts over the whole namespace
  uint64_t objects = 0;
  AQ_TRY(store::ForEachObject(
      meta_,
      [&](store::ObjectMeta o) -> Status {
        const auto plan = PlanObjectRepair(o, nodes, self, blocks_.PolicyFor(o.bucket), matcher.For(o));
        ++objects;
        total.blocks += plan.blocks;
        total.under += plan.under;
        total.misplaced += plan.misplaced;
        total.tier_misplaced += plan.tier_misplaced;
        total.tier_blocked += plan.tier_blocked;
        for (const auto& [h, n] : plan.held) total.held[h] += n;
        if (!plan.actions.empty()) Execute(std::move(o), plan.actions, nodes);
        return Status::Ok();
      },
      &stopping_));
  if (stopping_.load()) return Status::Ok();
  for (const auto& id : NodesToRemove(nodes, total.held, total.under, self)) {
    if (SetNodeState(membership_.etcd(), membership_.prefix(), id, NodeState::kRemoved).ok()) {
      log::info("cluster: node {} is drained and removed", id);
    }
  }
  MutexLock lock(mu_);
  stats_.passes++;
  stats_.objects = objects;
  stats_.blocks = total.blocks;
  stats_.under_protected = total.under;
  stats_.misplaced = total.misplaced;
  stats_.tier_misplaced = total.tier_misplaced;
  stats_.tier_blocked = total.tier_blocked;
  stats_.fully_protected = total.under == 0 && total.misplaced == 0;
  stats_.last_pass_seconds = clock_.Now() - t0;
  return Status::Ok();
}

void Repairer::Failed(const Status& s) {
  MutexLock lock(mu_);
  stats_.errors++;
  stats_.last_error = std::string(s.message());
}

// Each Apply* carries out one block's action on `b` (the object's copy of
// its layout) and adds the pieces to drop once the new layout is
// committed; it returns whether the layout changed.
bool Repairer::ApplyRewrite(const BlockAction& a, store::BlockRef& b, const std::set<std::string>& up,
                            std::vector<PendingDrop>* drops) {
  Throttle(b.size, a.moves ? tier_budget_ : repair_budget_);
  auto nb = blocks_.Rewrite(b, a.form, a.pool);
  if (!nb.ok()) {
    Failed(nb.status());
    return false;
  }
  for (auto& [h, piece] : store::StoredPieces(b)) {
    if (up.count(h)) drops->emplace_back(h, std::move(piece));
  }
  {
    MutexLock lock(mu_);
    if (a.moves) {
      stats_.tiered++;
      stats_.bytes_tiered += b.size;
    }
    if (a.reprotects) stats_.reprotected++;
    stats_.bytes_copied += b.size;
  }
  b = std::move(*nb);
  return true;
}

bool Repairer::ApplyFragments(const BlockAction& a, store::BlockRef& b, const std::set<std::string>& up,
                              std::vector<PendingDrop>* drops) {
  std::vector<std::string> now = b.nodes;
  for (const auto& [i, target] : a.fragments) {
    Throttle(b.FragmentSize(), repair_budget_);
    Status s = blocks_.RebuildFragment(b, i, target);
    if (!s.ok()) {
      Failed(s);
      continue;
    }
    {
      MutexLock lock(mu_);
      stats_.copied++;
      stats_.bytes_copied += b.FragmentSize();
    }
    if (up.count(b.nodes[i])) drops->emplace_back(b.nodes[i], store::FragmentRef(b, i));
    now[i] = target;
  }
  if (now == b.nodes) return false;
  b.nodes = now;
  return true;
}

bool Repairer::ApplyReplicas(const BlockAction& a, store::BlockRef& b, std::vector<PendingDrop>* drops) {
  std::vector<std::string> now = a.keep;  // holders after this block's repair
  for (const auto& w : a.add) {
    Throttle(b.size, repair_budget_);
    Status s = blocks_.Replicate(b, w);
    if (!s.ok()) {
      Failed(s);
      continue;
    }
    now.push_back(w);
    MutexLock lock(mu_);
    stats_.copied++;
    stats_.bytes_copied += b.size;
  }
  if (now.size() < a.keep.size() + a.add.size()) {
    // Not all copies made: keep every old holder too, lose nothing.
    for (const auto& h : b.nodes) {
      if (std::find(now.begin(), now.end(), h) == now.end()) now.push_back(h);
    }
  } else {
    for (const auto& h : a.drop) {
      store::BlockRef one = b;
      one.nodes = {h};
      drops->emplace_back(h, std::move(one));
    }
  }
  if (now == b.nodes) return false;
  b.nodes = now;
  return true;
}

void Repairer::Execute(store::ObjectMeta o, const std::vector<BlockAction>& actions,
                       const std::vector<NodeInfo>& nodes) {
  std::set<std::string> up;
  for (const auto& n : nodes) {
    if (n.up) up.insert(n.id);
  }
  bool changed = false;
  std::vector<PendingDrop> drops;
  for (const auto& a : actions) {
    store::BlockRef& b = o.blocks[a.block];
    switch (a.kind) {
      case BlockAction::Kind::kRewrite: changed |= ApplyRewrite(a, b, up, &drops); break;
      case BlockAction::Kind::kRebuildFragments: changed |= ApplyFragments(a, b, up, &drops); break;
      case BlockAction::Kind::kReplicate: changed |= ApplyReplicas(a, b, &drops); break;
    }
  }
  if (!changed) return;
  auto committed = meta_.UpdateLayout(o);
  if (!committed.ok()) return Failed(committed.status());
  MutexLock lock(mu_);
  if (!*committed) {
    stats_.conflicts++;  // rewritten meanwhile: the next pass sees the new layout
    return;
  }
  stats_.layouts_committed++;
  const double due = clock_.Now() + options_.drop_delay_seconds;
  for (auto& [h, piece] : drops) drops_.push_back({due, o.bucket, o.key, h, std::move(piece)});
}

}  // namespace aq::cluster
