// PlanObjectRepair and NodesToRemove, case by case: what repair decides
// for a block, from the layout, the map, the bucket's protection and the
// tiering policy, with nothing carried out.
#include "cluster/repair_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "cluster/placement.h"

namespace aq::cluster {
namespace {

using Kind = BlockAction::Kind;

std::vector<NodeInfo> Nodes(int n, std::vector<std::string> pools = {}) {
  std::vector<NodeInfo> out;
  for (int i = 0; i < n; ++i) {
    NodeInfo node;
    node.id = "n" + std::to_string(i);
    node.up = true;
    node.pools = pools;
    out.push_back(node);
  }
  return out;
}

NodeInfo* Find(std::vector<NodeInfo>& nodes, const std::string& id) {
  for (auto& n : nodes) {
    if (n.id == id) return &n;
  }
  return nullptr;
}

// A node that is not in `want`.
std::string Other(const std::vector<NodeInfo>& nodes, const std::vector<std::string>& want) {
  for (const auto& n : nodes) {
    if (std::find(want.begin(), want.end(), n.id) == want.end()) return n.id;
  }
  return "";
}

store::ObjectMeta Object(const std::string& key, std::vector<store::BlockRef> blocks) {
  store::ObjectMeta o;
  o.bucket = "b";
  o.key = key;
  o.blocks = std::move(blocks);
  return o;
}

store::BlockRef Block(const std::string& id, uint64_t size, std::vector<std::string> holders,
                      const std::string& pool = "default") {
  store::BlockRef b;
  b.id = id;
  b.size = size;
  b.pool = pool;
  b.nodes = std::move(holders);
  return b;
}

const Policy kTwo = *ParsePolicy("replicas:2");

// A tiering policy sending everything to `pool`.
store::TierPolicy ToPool(const std::string& pool) {
  store::TierPolicy t;
  t.name = "to-" + pool;
  t.pool = pool;
  return t;
}
const std::string kId = "0123456789abcdef0123456789abcdef";

// Every case is planned as the object's coordinator unless it says not.
ObjectRepairPlan Plan(const store::ObjectMeta& o, const std::vector<NodeInfo>& nodes, const Policy& policy,
                      const store::TierPolicy* tier = nullptr) {
  return PlanObjectRepair(o, nodes, Coordinator("b/" + o.key, nodes), policy, tier);
}

TEST(PlanRepairTest, APlacedWholeBlockNeedsNothing) {
  auto nodes = Nodes(4);
  const auto want = Place(kId, nodes, 2);
  const auto p = Plan(Object("k", {Block(kId, 1000, want)}), nodes, kTwo);
  EXPECT_TRUE(p.coordinator);
  EXPECT_EQ(p.blocks, 1u);
  EXPECT_EQ(p.under, 0u);
  EXPECT_EQ(p.misplaced, 0u);
  EXPECT_TRUE(p.actions.empty());
  EXPECT_EQ(p.held.at(want[0]), 1u);
  EXPECT_EQ(p.held.at(want[1]), 1u);
}

TEST(PlanRepairTest, AReplicaOnADownNodeIsCopiedToWherePlacementWantsIt) {
  auto nodes = Nodes(4);
  const auto all = Place(kId, nodes, 2);
  Find(nodes, all[1])->up = false;  // its second holder is lost
  const auto want = Place(kId, nodes, 2);
  const auto p = Plan(Object("k", {Block(kId, 1000, all)}), nodes, kTwo);
  EXPECT_EQ(p.under, 1u);
  EXPECT_EQ(p.misplaced, 1u);
  ASSERT_EQ(p.actions.size(), 1u);
  const auto& a = p.actions[0];
  EXPECT_EQ(a.kind, Kind::kReplicate);
  EXPECT_EQ(a.keep, std::vector<std::string>{all[0]});
  ASSERT_EQ(a.add.size(), 1u);
  EXPECT_NE(a.add[0], all[1]);  // not to the down node
  EXPECT_TRUE(std::find(want.begin(), want.end(), a.add[0]) != want.end());
  EXPECT_TRUE(a.drop.empty());  // a down holder's replica is not dropped (it is not reachable)
}

TEST(PlanRepairTest, AJoinedNodeTakesItsShareAndTheOldHolderIsDroppedAfter) {
  auto nodes = Nodes(5);
  const auto want = Place(kId, nodes, 2);
  const std::string old = Other(nodes, want);
  const auto p = Plan(Object("k", {Block(kId, 1000, {want[0], old})}), nodes, kTwo);
  EXPECT_EQ(p.under, 0u);  // still two live replicas
  EXPECT_EQ(p.misplaced, 1u);
  ASSERT_EQ(p.actions.size(), 1u);
  EXPECT_EQ(p.actions[0].kind, Kind::kReplicate);
  EXPECT_EQ(p.actions[0].keep, std::vector<std::string>{want[0]});
  EXPECT_EQ(p.actions[0].add, std::vector<std::string>{want[1]});
  EXPECT_EQ(p.actions[0].drop, std::vector<std::string>{old});
}

TEST(PlanRepairTest, AnExtraReplicaIsDroppedWithNothingCopied) {
  auto nodes = Nodes(5);
  const auto want = Place(kId, nodes, 2);
  const std::string extra = Other(nodes, want);
  const auto p = Plan(Object("k", {Block(kId, 1000, {want[0], want[1], extra})}), nodes, kTwo);
  ASSERT_EQ(p.actions.size(), 1u);
  EXPECT_TRUE(p.actions[0].add.empty());
  EXPECT_EQ(p.actions[0].drop, std::vector<std::string>{extra});
}

TEST(PlanRepairTest, OnlyTheCoordinatorActsButEveryNodeCounts) {
  auto nodes = Nodes(4);
  const auto all = Place(kId, nodes, 2);
  Find(nodes, all[1])->up = false;
  const auto o = Object("k", {Block(kId, 1000, all)});
  const std::string coordinator = Coordinator("b/k", nodes);
  for (const auto& n : nodes) {
    if (!n.up) continue;
    const auto p = PlanObjectRepair(o, nodes, n.id, kTwo, nullptr);
    EXPECT_EQ(p.coordinator, n.id == coordinator);
    EXPECT_EQ(p.under, 1u);
    EXPECT_EQ(p.actions.empty(), n.id != coordinator) << n.id;
  }
}

TEST(PlanRepairTest, ASingleNodesBlocksAreNotTheClustersToRepair) {
  auto nodes = Nodes(3);
  const auto p = Plan(Object("k", {Block(kId, 1000, {})}), nodes, kTwo);
  EXPECT_EQ(p.blocks, 0u);
  EXPECT_TRUE(p.actions.empty());
}

TEST(PlanRepairTest, ATieringPolicyMovesTheBlockToNodesWithItsPool) {
  auto nodes = Nodes(4, {"ssd", "hdd"});
  const auto want = Place(kId, nodes, 2, "ssd");
  const store::TierPolicy cold = ToPool("hdd");
  const auto p = Plan(Object("k", {Block(kId, 1000, want, "ssd")}), nodes, kTwo, &cold);
  EXPECT_EQ(p.tier_misplaced, 1u);
  EXPECT_EQ(p.tier_blocked, 0u);
  ASSERT_EQ(p.actions.size(), 1u);
  EXPECT_EQ(p.actions[0].kind, Kind::kRewrite);
  EXPECT_EQ(p.actions[0].pool, "hdd");
  EXPECT_TRUE(p.actions[0].moves);
  EXPECT_FALSE(p.actions[0].reprotects);
  EXPECT_EQ(p.actions[0].form, kTwo);
}

TEST(PlanRepairTest, ATierPoolOnTooFewNodesLeavesTheBlockWhereItIs) {
  auto nodes = Nodes(4, {"ssd"});
  nodes[0].pools = {"ssd", "hdd"};  // one node has hdd; a block needs two
  const auto want = Place(kId, nodes, 2, "ssd");
  const store::TierPolicy cold = ToPool("hdd");
  const auto p = Plan(Object("k", {Block(kId, 1000, want, "ssd")}), nodes, kTwo, &cold);
  EXPECT_EQ(p.tier_misplaced, 1u);
  EXPECT_EQ(p.tier_blocked, 1u);
  EXPECT_EQ(p.misplaced, 0u);  // placed, in the pool it can have
  EXPECT_TRUE(p.actions.empty());
}

TEST(PlanRepairTest, ANewProtectionPolicyRewritesTheBlockInItsForm) {
  auto nodes = Nodes(5);
  const Policy ec = *ParsePolicy("ec:2+1");
  const uint64_t big = kEcMinBlockBytes;
  const auto want = Place(kId, nodes, 2);
  const auto p = Plan(Object("k", {Block(kId, big, want)}), nodes, ec);
  ASSERT_EQ(p.actions.size(), 1u);
  EXPECT_EQ(p.actions[0].kind, Kind::kRewrite);
  EXPECT_TRUE(p.actions[0].reprotects);
  EXPECT_FALSE(p.actions[0].moves);
  EXPECT_EQ(p.actions[0].form, ec.ForBlock(big));
  // A block under kEcMinBlockBytes keeps M+1 replicas instead: two for
  // ec:2+1, which the same layout already has.
  const auto small = Plan(Object("k", {Block(kId, 1000, want)}), nodes, ec);
  EXPECT_EQ(small.misplaced, 0u);
  EXPECT_TRUE(small.actions.empty());
}

TEST(PlanRepairTest, ALostFragmentIsRebuiltOnAWantedNodeThatHoldsNone) {
  auto nodes = Nodes(5);
  const Policy ec = *ParsePolicy("ec:2+1");
  auto b = Block(kId, kEcMinBlockBytes, Place(kId, nodes, 3));
  b.ec_k = 2;
  b.ec_m = 1;
  b.fragment_crcs.assign(3, 0);
  const std::string lost = b.nodes[2];
  Find(nodes, lost)->up = false;
  const auto want = Place(kId, nodes, 3);
  const auto p = Plan(Object("k", {b}), nodes, ec);
  EXPECT_EQ(p.under, 1u);
  ASSERT_EQ(p.actions.size(), 1u);
  EXPECT_EQ(p.actions[0].kind, Kind::kRebuildFragments);
  ASSERT_EQ(p.actions[0].fragments.size(), 1u);
  EXPECT_EQ(p.actions[0].fragments[0].first, 2);
  const std::string target = p.actions[0].fragments[0].second;
  EXPECT_NE(target, lost);
  EXPECT_NE(target, b.nodes[0]);
  EXPECT_NE(target, b.nodes[1]);
  EXPECT_TRUE(std::find(want.begin(), want.end(), target) != want.end());
}

TEST(PlanRepairTest, EveryBlockOfAnObjectIsPlannedOnItsOwn) {
  auto nodes = Nodes(4);
  const std::string id2 = "fedcba9876543210fedcba9876543210";
  const auto w1 = Place(kId, nodes, 2), w2 = Place(id2, nodes, 2);
  const auto p = Plan(Object("k", {Block(kId, 1000, w1), Block(id2, 1000, {w2[0]})}), nodes, kTwo);
  EXPECT_EQ(p.blocks, 2u);
  EXPECT_EQ(p.under, 1u);
  ASSERT_EQ(p.actions.size(), 1u);
  EXPECT_EQ(p.actions[0].block, 1u);
  EXPECT_EQ(p.actions[0].add, std::vector<std::string>{w2[1]});
}

TEST(PlanRepairTest, ADrainedNodeIsRemovedOnlyWhenEmptyAndNothingIsUnderProtected) {
  auto nodes = Nodes(4);
  nodes[3].state = NodeState::kSmartfail;
  const std::string self = Coordinator("cluster", nodes);
  std::string other;
  for (const auto& n : nodes) {
    if (n.id != self && n.up) other = n.id;
  }
  std::map<std::string, uint64_t> held = {{"n0", 5}, {"n1", 5}, {"n2", 5}};
  EXPECT_EQ(NodesToRemove(nodes, held, 0, self), std::vector<std::string>{"n3"});
  EXPECT_TRUE(NodesToRemove(nodes, held, 0, other).empty());  // one node decides
  EXPECT_TRUE(NodesToRemove(nodes, held, 1, self).empty());   // something is under-protected
  held["n3"] = 1;
  EXPECT_TRUE(NodesToRemove(nodes, held, 0, self).empty());  // it still holds a piece
  nodes[3].state = NodeState::kActive;
  held["n3"] = 0;
  EXPECT_TRUE(NodesToRemove(nodes, held, 0, self).empty());  // an empty active node stays
}

TEST(PlanRepairTest, TheCoordinatorIsALiveMemberAndTheSameForEveryOrder) {
  auto nodes = Nodes(5);
  const std::string c = Coordinator("b/k", nodes);
  auto reversed = nodes;
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_EQ(Coordinator("b/k", reversed), c);
  Find(nodes, c)->up = false;
  const std::string next = Coordinator("b/k", nodes);
  EXPECT_FALSE(next.empty());
  EXPECT_NE(next, c);
  for (auto& n : nodes) n.state = NodeState::kRemoved;
  EXPECT_EQ(Coordinator("b/k", nodes), "");
}

}  // namespace
}  // namespace aq::cluster
