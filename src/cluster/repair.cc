#include "cluster/repair.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "cluster/placement.h"
#include "common/log.h"
#include "common/mutex.h"

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

BlockProtection Protection(const store::BlockRef& block, const std::vector<NodeInfo>& nodes, size_t replicas) {
  BlockProtection p;
  std::set<std::string> up;
  for (const auto& n : nodes) {
    if (n.up) up.insert(n.id);
  }
  for (const auto& h : block.nodes) p.live += up.count(h);
  auto want = Place(block.id, nodes, replicas);
  std::vector<std::string> have = block.nodes;
  std::sort(want.begin(), want.end());
  std::sort(have.begin(), have.end());
  p.placed = want == have && have.size() >= replicas;
  return p;
}

Result<std::vector<std::string>> BlocksHeldBy(store::MetaStore& meta, const std::string& node) {
  std::vector<std::string> out;
  auto keep = [&](const std::vector<store::BlockRef>& blocks) {
    for (const auto& b : blocks) {
      if (b.nodes.empty() || std::find(b.nodes.begin(), b.nodes.end(), node) != b.nodes.end()) out.push_back(b.id);
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

void Repairer::Throttle(uint64_t bytes) {
  const double now = Now();
  if (now - budget_start_ > 1.0) {
    budget_start_ = now;
    budget_bytes_ = 0;
  }
  budget_bytes_ += bytes;
  const double ahead = static_cast<double>(budget_bytes_) / options_.bytes_per_second - (now - budget_start_);
  if (ahead > 0) {
    MutexLock lock(mu_);
    cv_.WaitFor(std::chrono::duration<double>(ahead), [&]() AQ_REQUIRES(mu_) { return stop_; });
  }
}

Status Repairer::Pass() {
  const double t0 = Now();
  const auto nodes = membership_.Nodes();
  const std::string self = membership_.self().id;
  std::map<std::string, std::string> address;
  std::map<std::string, bool> up;
  for (const auto& n : nodes) {
    address[n.id] = n.address;
    up[n.id] = n.up;
  }
  uint64_t objects = 0, nblocks = 0, under = 0, misplaced = 0;
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
        const size_t r = blocks_.ReplicasFor(o.bucket);
        const bool mine = Coordinator(o.bucket + "/" + o.key, nodes) == self;
        bool changed = false;
        std::vector<store::BlockRef> drops;  // replicas to remove once the new layout is committed
        for (auto& b : o.blocks) {
          if (b.nodes.empty()) continue;  // a single node's block
          ++nblocks;
          for (const auto& h : b.nodes) held[h]++;
          const auto prot = Protection(b, nodes, r);
          if (prot.live < r) ++under;
          if (prot.placed) continue;
          ++misplaced;
          if (!mine) continue;
          const auto want = Place(b.id, nodes, r);
          if (want.empty()) continue;
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
            store::BlockRef drop = b;
            drop.nodes.clear();
            for (const auto& h : b.nodes) {
              if (std::find(now.begin(), now.end(), h) == now.end() && up[h]) drop.nodes.push_back(h);
            }
            if (!drop.nodes.empty()) drops.push_back(std::move(drop));
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
          for (const auto& d : drops) {
            for (const auto& h : d.nodes) {
              store::BlockRef one = d;
              one.nodes = {h};
              if (h == self || client_.Delete(address[h], one).ok()) stats_.dropped++;
              if (h == self) (void)blocks_.Remove(one);
            }
          }
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
  stats_.fully_protected = under == 0 && misplaced == 0;
  stats_.last_pass_seconds = Now() - t0;
  return Status::Ok();
}

}  // namespace aq::cluster
