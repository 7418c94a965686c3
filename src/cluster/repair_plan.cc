#include "cluster/repair_plan.h"

#include <algorithm>
#include <set>

#include "cluster/placement.h"
#include "cluster/repair.h"

namespace aq::cluster {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Fragments on live nodes where placement wants them stay; each other one
// goes to a wanted node that holds none of this block yet.
BlockAction PlanFragments(size_t index, const store::BlockRef& b, const std::vector<std::string>& want,
                          const std::set<std::string>& up) {
  BlockAction a;
  a.kind = BlockAction::Kind::kRebuildFragments;
  a.block = index;
  std::set<std::string> used;
  std::vector<int> todo;
  for (size_t i = 0; i < b.nodes.size(); ++i) {
    const auto& h = b.nodes[i];
    if (up.count(h) && Contains(want, h) && !used.count(h)) {
      used.insert(h);
    } else {
      todo.push_back(static_cast<int>(i));
    }
  }
  std::vector<std::string> free;
  for (const auto& w : want) {
    if (!used.count(w)) free.push_back(w);
  }
  for (size_t t = 0; t < todo.size() && t < free.size(); ++t) a.fragments.emplace_back(todo[t], free[t]);
  return a;
}

BlockAction PlanReplicas(size_t index, const store::BlockRef& b, const std::vector<std::string>& want,
                         const std::set<std::string>& up) {
  BlockAction a;
  a.kind = BlockAction::Kind::kReplicate;
  a.block = index;
  for (const auto& h : b.nodes) {
    if (up.count(h) && Contains(want, h)) a.keep.push_back(h);
  }
  for (const auto& w : want) {
    if (!Contains(a.keep, w)) a.add.push_back(w);
  }
  for (const auto& h : b.nodes) {
    if (up.count(h) && !Contains(a.keep, h) && !Contains(a.add, h)) a.drop.push_back(h);
  }
  return a;
}

}  // namespace

std::string Coordinator(const std::string& name, const std::vector<NodeInfo>& nodes) {
  std::string best;
  uint64_t best_w = 0;
  for (const auto& n : nodes) {
    if (!n.up || n.state == NodeState::kRemoved) continue;
    const uint64_t w = PlacementWeight(name, n.id);
    if (best.empty() || w > best_w || (w == best_w && n.id < best)) {
      best = n.id;
      best_w = w;
    }
  }
  return best;
}

ObjectRepairPlan PlanObjectRepair(const store::ObjectMeta& o, const std::vector<NodeInfo>& nodes,
                                  const std::string& self, const Policy& policy, const store::TierPolicy* tier) {
  ObjectRepairPlan plan;
  plan.coordinator = Coordinator(o.bucket + "/" + o.key, nodes) == self;
  std::set<std::string> up;
  for (const auto& n : nodes) {
    if (n.up) up.insert(n.id);
  }
  // Where each block's tiering policy wants it, by the rule a single node's
  // Mover follows too.
  std::vector<const std::string*> tier_pool(o.blocks.size(), nullptr);
  const auto moves = store::PlanTierMoves(o, tier);
  for (const auto& m : moves) tier_pool[m.block] = &m.pool;
  for (size_t i = 0; i < o.blocks.size(); ++i) {
    const auto& b = o.blocks[i];
    if (b.nodes.empty()) continue;  // a single node's block
    ++plan.blocks;
    for (const auto& h : b.nodes) plan.held[h]++;
    const Policy form = policy.ForBlock(b.size);
    // Where the block belongs: its tiering policy's pool when enough nodes
    // have that pool, else where it is.
    std::string home = b.pool;
    if (const std::string* want = tier_pool[i]; want != nullptr) {
      ++plan.tier_misplaced;
      if (!want->empty() && Place(b.id, nodes, form.width(), *want).size() >= form.width()) {
        home = *want;
      } else {
        ++plan.tier_blocked;
      }
    }
    const auto prot = Protection(b, nodes, policy, home);
    if (prot.live < prot.width) ++plan.under;
    if (prot.placed) continue;
    ++plan.misplaced;
    if (!plan.coordinator) continue;
    if (!SameForm(b, form) || b.pool != home) {
      BlockAction a;
      a.kind = BlockAction::Kind::kRewrite;
      a.block = i;
      a.form = form;
      a.pool = home;
      a.moves = b.pool != home;
      a.reprotects = !SameForm(b, form);
      plan.actions.push_back(std::move(a));
      continue;
    }
    const auto want = Place(b.id, nodes, form.width(), b.pool);
    if (want.empty()) continue;
    if (b.erasure_coded()) {
      auto a = PlanFragments(i, b, want, up);
      if (!a.fragments.empty()) plan.actions.push_back(std::move(a));
    } else {
      auto a = PlanReplicas(i, b, want, up);
      if (!a.add.empty() || !a.drop.empty() || a.keep != b.nodes) plan.actions.push_back(std::move(a));
    }
  }
  return plan;
}

std::vector<std::string> NodesToRemove(const std::vector<NodeInfo>& nodes, const std::map<std::string, uint64_t>& held,
                                       uint64_t under, const std::string& self) {
  std::vector<std::string> out;
  if (under > 0 || Coordinator("cluster", nodes) != self) return out;
  for (const auto& n : nodes) {
    auto it = held.find(n.id);
    if (n.state == NodeState::kSmartfail && (it == held.end() || it->second == 0)) out.push_back(n.id);
  }
  return out;
}

}  // namespace aq::cluster
