#include "cluster/repair.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <unordered_map>

#include "cluster/placement.h"
#include "common/log.h"
#include "common/mutex.h"
#include "store/tiering.h"

namespace aq::cluster {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The node that coordinates an object's repair: the highest placement
// weight of its name among nodes that are up and not removed.
std::string Coordinator(const std::string& name, const std::vector<NodeInfo>& nodes) {
  std::string best;
  uint64_t best_w = 0;
  for (const auto& n : nodes) {
    if (!n.up || n.state == "removed") continue;
    const uint64_t w = PlacementWeight(name, n.id);
    if (best.empty() || w > best_w || (w == best_w && n.id < best)) {
      best = n.id;
      best_w = w;
    }
  }
  return best;
}

}  // namespace

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
  for (const auto& bucket : AQ_TRY(meta.ListBuckets())) {
    std::string after;
    while (true) {
      auto page = AQ_TRY(meta.ListObjects({bucket.name, "", after, 1000}));
      for (const auto& listed : page.objects) {
        after = listed.key;
        auto o = meta.GetObject(bucket.name, listed.key);
        if (o.ok()) keep(o->blocks);
      }
      if (!page.truncated) break;
    }
    for (const auto& u : AQ_TRY(meta.ListUploads(bucket.name))) {
      auto full = meta.GetUpload(u.id);
      if (!full.ok()) continue;
      for (const auto& p : full->parts) keep(p.blocks);
    }
  }
  return out;
}

Repairer::Repairer(Membership& membership, store::MetaStore& meta, ClusterBlockService& blocks, BlockClient& client,
                   RepairOptions options)
    : membership_(membership), meta_(meta), blocks_(blocks), client_(client), options_(options) {
  repair_budget_.rate = options_.bytes_per_second;
  tier_budget_.rate = options_.tier_bytes_per_second;
  thread_ = std::thread([this] { Loop(); });
}

Repairer::~Repairer() {
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

void Repairer::Throttle(uint64_t bytes, Budget* budget) {
  Budget& b = budget != nullptr ? *budget : repair_budget_;
  const double now = Now();
  if (now - b.start > 1.0) {
    b.start = now;
    b.bytes = 0;
  }
  b.bytes += bytes;
  const double ahead = static_cast<double>(b.bytes) / b.rate - (now - b.start);
  if (ahead > 0) {
    MutexLock lock(mu_);
    cv_.WaitFor(std::chrono::duration<double>(ahead), [&]() AQ_REQUIRES(mu_) { return stop_; });
  }
}

void Repairer::DropDue(bool all) {
  std::vector<Drop> due;
  {
    MutexLock lock(mu_);
    const double now = Now();
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
  const double t0 = Now();
  const auto nodes = membership_.Nodes();
  const std::string self = membership_.self().id;
  std::map<std::string, bool> up;
  for (const auto& n : nodes) up[n.id] = n.up;
  uint64_t objects = 0, nblocks = 0, under = 0, misplaced = 0, tier_misplaced = 0, tier_blocked = 0;
  // Tiering: the policies, and the recorded reads when a policy asks for them.
  std::vector<store::TierPolicy> tiers;
  std::unordered_map<std::string, int64_t> atimes;
  if (auto t = store::LoadTierPolicies(meta_); t.ok()) {
    tiers = std::move(*t);
    // A media names the pool of that media most nodes have; none: the
    // policy's objects stay where they are (tier_blocked).
    for (auto& p : tiers) {
      if (p.pool.empty()) p.pool = PoolForMedia(nodes, p.media);
    }
    bool by_access = false;
    for (const auto& p : tiers) by_access |= p.idle_s > 0 || p.accessed_within_s > 0;
    if (by_access) {
      auto a = meta_.AccessTimes();
      if (a.ok()) atimes = std::move(*a);
    }
  } else {
    MutexLock lock(mu_);
    stats_.errors++;
    stats_.last_error = std::string(t.status().message());
  }
  const int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::map<std::string, uint64_t> held;  // replicas each node holds, per the layouts
  for (const auto& bucket : AQ_TRY(meta_.ListBuckets())) {
    std::string after;
    while (true) {
      auto page = AQ_TRY(meta_.ListObjects({bucket.name, "", after, 1000}));
      for (const auto& listed : page.objects) {
        after = listed.key;
        {
          MutexLock lock(mu_);
          if (stop_) return Status::Ok();
        }
        auto got = meta_.GetObject(bucket.name, listed.key);
        if (!got.ok()) continue;  // deleted meanwhile
        store::ObjectMeta o = std::move(*got);
        ++objects;
        const Policy policy = blocks_.PolicyFor(o.bucket);
        const bool mine = Coordinator(o.bucket + "/" + o.key, nodes) == self;
        const store::TierPolicy* tier =
            tiers.empty() ? nullptr : store::MatchTierPolicy(tiers, o, now_ns, store::LastRead(atimes, o));
        bool changed = false;
        // Pieces to remove once the new layout is committed: (node, piece).
        std::vector<std::pair<std::string, store::BlockRef>> drops;
        for (auto& b : o.blocks) {
          if (b.nodes.empty()) continue;  // a single node's block
          ++nblocks;
          for (const auto& h : b.nodes) held[h]++;
          const Policy form = policy.ForBlock(b.size);
          // Where the block belongs: its tiering policy's pool when enough
          // nodes have that pool, else where it is.
          std::string home = b.pool;
          if (tier != nullptr && tier->pool != b.pool) {
            ++tier_misplaced;
            if (!tier->pool.empty() && Place(b.id, nodes, form.width(), tier->pool).size() >= form.width()) {
              home = tier->pool;
            } else {
              ++tier_blocked;
            }
          }
          const auto prot = Protection(b, nodes, policy, home);
          if (prot.live < prot.width) ++under;
          if (prot.placed) continue;
          ++misplaced;
          if (!mine) continue;
          if (!SameForm(b, form) || b.pool != home) {
            // Re-protection (replicas <-> erasure-coded, or another K+M) or
            // a move to another pool (tiering): the block is written anew
            // in the policy's form and pool beside the old pieces, which
            // go once the layout names the new ones.
            const bool moves = b.pool != home;
            Throttle(b.size, moves ? &tier_budget_ : nullptr);
            auto nb = blocks_.Rewrite(b, form, home);
            MutexLock lock(mu_);
            if (!nb.ok()) {
              stats_.errors++;
              stats_.last_error = std::string(nb.status().message());
              continue;
            }
            for (auto& [h, piece] : store::StoredPieces(b)) {
              if (up[h]) drops.emplace_back(h, std::move(piece));
            }
            if (moves) {
              stats_.tiered++;
              stats_.bytes_tiered += b.size;
            }
            if (!SameForm(b, form)) stats_.reprotected++;
            stats_.bytes_copied += b.size;
            b = std::move(*nb);
            changed = true;
            continue;
          }
          const auto want = Place(b.id, nodes, form.width(), b.pool);
          if (want.empty()) continue;
          if (b.erasure_coded()) {
            // Fragments on live nodes where placement wants them stay; each
            // other one is copied (its holder up) or rebuilt from K others
            // onto a wanted node that holds none of this block yet.
            std::vector<std::string> now = b.nodes;
            std::set<std::string> used;
            std::vector<int> todo;
            for (size_t i = 0; i < b.nodes.size(); ++i) {
              const auto& h = b.nodes[i];
              if (up[h] && std::find(want.begin(), want.end(), h) != want.end() && !used.count(h)) {
                used.insert(h);
              } else {
                todo.push_back(static_cast<int>(i));
              }
            }
            std::vector<std::string> free;
            for (const auto& w : want) {
              if (!used.count(w)) free.push_back(w);
            }
            for (size_t t = 0; t < todo.size() && t < free.size(); ++t) {
              const int i = todo[t];
              Throttle(b.FragmentSize());
              Status s = blocks_.RebuildFragment(b, i, free[t]);
              MutexLock lock(mu_);
              if (!s.ok()) {
                stats_.errors++;
                stats_.last_error = std::string(s.message());
                continue;
              }
              stats_.copied++;
              stats_.bytes_copied += b.FragmentSize();
              if (up[b.nodes[i]]) drops.emplace_back(b.nodes[i], store::FragmentRef(b, i));
              now[i] = free[t];
            }
            if (now != b.nodes) {
              b.nodes = now;
              changed = true;
            }
            continue;
          }
          const size_t r = form.width();
          std::vector<std::string> now;  // holders after this block's repair
          for (const auto& h : b.nodes) {
            if (up[h] && std::find(want.begin(), want.end(), h) != want.end()) now.push_back(h);
          }
          for (const auto& w : want) {
            if (std::find(now.begin(), now.end(), w) != now.end()) continue;
            Throttle(b.size);
            Status s = blocks_.Replicate(b, w);
            MutexLock lock(mu_);
            if (s.ok()) {
              now.push_back(w);
              stats_.copied++;
              stats_.bytes_copied += b.size;
            } else {
              stats_.errors++;
              stats_.last_error = std::string(s.message());
            }
          }
          if (now.size() < std::min(r, want.size())) {
            // Not all copies made: keep every old holder too, lose nothing.
            for (const auto& h : b.nodes) {
              if (std::find(now.begin(), now.end(), h) == now.end()) now.push_back(h);
            }
          } else {
            for (const auto& h : b.nodes) {
              if (std::find(now.begin(), now.end(), h) == now.end() && up[h]) {
                store::BlockRef one = b;
                one.nodes = {h};
                drops.emplace_back(h, std::move(one));
              }
            }
          }
          if (now != b.nodes) {
            b.nodes = now;
            changed = true;
          }
        }
        if (!changed) continue;
        auto committed = meta_.UpdateLayout(o);
        MutexLock lock(mu_);
        if (!committed.ok()) {
          stats_.errors++;
          stats_.last_error = std::string(committed.status().message());
        } else if (!*committed) {
          stats_.conflicts++;  // rewritten meanwhile: the next pass sees the new layout
        } else {
          stats_.layouts_committed++;
          const double due = Now() + options_.drop_delay_seconds;
          for (auto& [h, piece] : drops) drops_.push_back({due, o.bucket, o.key, h, std::move(piece)});
        }
      }
      if (!page.truncated) break;
    }
  }
  // A drained node that no layout names any more is removed. One node does
  // this: the coordinator of the cluster itself.
  if (Coordinator("cluster", nodes) == self) {
    for (const auto& n : nodes) {
      if (n.state == "smartfail" && held[n.id] == 0 && under == 0) {
        Status s = SetNodeState(membership_.etcd(), membership_.prefix(), n.id, "removed");
        if (s.ok()) log::info("cluster: node {} is drained and removed", n.id);
      }
    }
  }
  MutexLock lock(mu_);
  stats_.passes++;
  stats_.objects = objects;
  stats_.blocks = nblocks;
  stats_.under_protected = under;
  stats_.misplaced = misplaced;
  stats_.tier_misplaced = tier_misplaced;
  stats_.tier_blocked = tier_blocked;
  stats_.fully_protected = under == 0 && misplaced == 0;
  stats_.last_pass_seconds = Now() - t0;
  return Status::Ok();
}

}  // namespace aq::cluster
