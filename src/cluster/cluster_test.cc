// The MetaStore contract, run against SQLite (the single node) and etcd (the
// cluster; a real etcd started on 127.0.0.1 for the test), and the etcd
// client itself.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "cluster/etcd_client.h"
#include "cluster/etcd_meta_store.h"
#include "cluster/membership.h"
#include "cluster/placement.h"
#include "cluster/repair.h"
#include "cluster/test_etcd.h"
#include "common/clock.h"
#include "store/block_store.h"
#include "store/meta_store.h"

namespace aq::cluster {
namespace {

namespace fs = std::filesystem;
using store::BlockRef;
using store::ObjectMeta;

// Polls `done` for up to `seconds` of real time; whether it came true.
bool Within(double seconds, const std::function<bool()>& done) {
  const double until = Clock::Real().Now() + seconds;
  while (Clock::Real().Now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

// Lease renewals are due on the membership's clock. Held still, the clock
// lets the lease run out in etcd's (real) time and the node is down in the
// map; moved on, the next renewal finds the lease gone and the node marks
// itself alive again under a new one.
TEST(MembershipTest, LeaseRenewalsRunOnItsClock) {
  auto& etcd = Etcd::Get();
  if (!etcd.ok()) GTEST_SKIP() << etcd.why();
  ManualClock clock(1000, Clock::Real().WallNanos());
  NodeInfo self;
  self.id = "lease-node";
  self.address = "127.0.0.1:1";
  const std::string prefix = "/t/lease/";
  auto m = Membership::Join(etcd.client(), self, prefix, 2, clock);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto up = [&] {
    const auto nodes = ReadClusterMap(*etcd.client(), prefix);
    for (const auto& n : nodes.ok() ? *nodes : std::vector<NodeInfo>()) {
      if (n.id == self.id) return n.up;
    }
    return false;
  };
  EXPECT_TRUE(up());
  EXPECT_TRUE(Within(10, [&] { return !up(); })) << "no renewal while the clock stands still";
  EXPECT_EQ((*m)->rejoins(), 0u);
  clock.Advance(1);  // a renewal is due (a third of the TTL)
  EXPECT_TRUE(Within(5, [&] { return up() && (*m)->rejoins() == 1; })) << (*m)->rejoins();
}

// A member record's pools and their media come back typed; a record with a
// media this version does not know is named, not read as another media.
TEST(MembershipTest, MemberRecordsCarryTypedPoolMedia) {
  auto& etcd = Etcd::Get();
  if (!etcd.ok()) GTEST_SKIP() << etcd.why();
  ManualClock clock(1000, Clock::Real().WallNanos());
  NodeInfo self;
  self.id = "media-node";
  self.address = "127.0.0.1:1";
  self.pools = {"flash", "archive"};
  self.pool_media = {store::Media::kSsd, store::Media::kHdd};
  const std::string prefix = "/t/media/";
  auto m = Membership::Join(etcd.client(), self, prefix, 2, clock);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto nodes = ReadClusterMap(*etcd.client(), prefix);
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].pools, self.pools);
  EXPECT_EQ((*nodes)[0].pool_media, self.pool_media);
  EXPECT_EQ(store::PoolForMedia(MemberPools(*nodes), store::Media::kHdd), "archive");
  ASSERT_TRUE(
      etcd.client()
          ->Put(prefix + "members/odd-node", R"({"address": "127.0.0.1:2", "pools": ["t"], "pool_media": ["tape"]})")
          .ok());
  nodes = ReadClusterMap(*etcd.client(), prefix);
  ASSERT_FALSE(nodes.ok());
  EXPECT_EQ(nodes.status().code(), StatusCode::kCorruption);
  EXPECT_NE(nodes.status().message().find("odd-node"), std::string::npos) << nodes.status().message();
  EXPECT_NE(nodes.status().message().find("'tape'"), std::string::npos) << nodes.status().message();
  ASSERT_TRUE(etcd.client()->Delete(prefix + "members/odd-node", "").ok());
}

TEST(EtcdClientTest, KeysTransactionsAndLeases) {
  auto& etcd = Etcd::Get();
  if (!etcd.ok()) GTEST_SKIP() << etcd.why();
  auto c = etcd.client();
  const std::string k = "/t/client/a";
  ASSERT_TRUE(c->Put(k, std::string("bin\0ary\xff", 8)).ok());
  auto got = c->Get(k).value();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->value, std::string("bin\0ary\xff", 8));
  EXPECT_EQ(got->version, 1);
  ASSERT_TRUE(c->Put("/t/client/b", "2").ok());
  ASSERT_TRUE(c->Put("/t/client0", "outside").ok());
  EXPECT_EQ(c->Prefix("/t/client/")->size(), 2u);
  EXPECT_EQ(c->Prefix("/t/client/", 1)->size(), 1u);
  // A guarded write: only if the key is unchanged.
  auto t = c->Txn({{k, "", Compare::Target::kVersion, Compare::Op::kEqual, 1, ""}},
                  {{TxnOp::Kind::kGet, k, "", "", 0}, {TxnOp::Kind::kPut, k, "", "v2", 0}})
               .value();
  EXPECT_TRUE(t.succeeded);
  ASSERT_EQ(t.ranges.size(), 1u);
  EXPECT_EQ(t.ranges[0].at(0).value, std::string("bin\0ary\xff", 8));
  t = c->Txn({{k, "", Compare::Target::kVersion, Compare::Op::kEqual, 1, ""}}, {{TxnOp::Kind::kPut, k, "", "v3", 0}})
          .value();
  EXPECT_FALSE(t.succeeded);
  EXPECT_EQ(c->Get(k).value()->value, "v2");
  EXPECT_EQ(c->Delete("/t/client/", EtcdClient::PrefixEnd("/t/client/")).value(), 2);
  EXPECT_FALSE(c->Get(k).value().has_value());
  // A key under a lease lives while the lease does.
  int64_t lease = c->LeaseGrant(5).value();
  ASSERT_TRUE(c->Put("/t/alive", "x", lease).ok());
  EXPECT_GT(c->LeaseKeepAlive(lease).value(), 0);
  ASSERT_TRUE(c->LeaseRevoke(lease).ok());
  EXPECT_FALSE(c->Get("/t/alive").value().has_value());
  EXPECT_EQ(c->LeaseKeepAlive(lease).value(), 0);
  // Unreachable endpoints are named.
  auto bad = EtcdClient::Connect("etcd://127.0.0.1:1");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("127.0.0.1:1"), std::string_view::npos);
  EXPECT_FALSE(EtcdClient::Connect("etcd://nohostport").ok());
  EXPECT_EQ(EtcdClient::PrefixEnd("a/"), "a0");
  EXPECT_EQ(Base64Decode(Base64Encode(std::string("\0\1\2xyz", 6))).value(), std::string("\0\1\2xyz", 6));
}

// ---- placement ----

std::vector<NodeInfo> Nodes(int n) {
  std::vector<NodeInfo> out;
  for (int i = 0; i < n; ++i) {
    NodeInfo x;
    x.id = "node-" + std::to_string(i);
    x.up = true;
    out.push_back(x);
  }
  return out;
}

TEST(PlacementTest, DistinctDeterministicAndOnlyOnLiveActiveNodes) {
  auto nodes = Nodes(5);
  for (int b = 0; b < 200; ++b) {
    const std::string id = store::NewBlockId();
    auto p = Place(id, nodes, 3);
    ASSERT_EQ(p.size(), 3u);
    EXPECT_NE(p[0], p[1]);
    EXPECT_NE(p[1], p[2]);
    EXPECT_NE(p[0], p[2]);
    EXPECT_EQ(Place(id, nodes, 3), p);  // every node computes the same answer
    auto shuffled = nodes;
    std::reverse(shuffled.begin(), shuffled.end());
    EXPECT_EQ(Place(id, shuffled, 3), p);  // whatever order the map lists them in
  }
  nodes[1].up = false;
  nodes[2].state = NodeState::kSmartfail;
  nodes[3].state = NodeState::kRemoved;
  for (int b = 0; b < 50; ++b) {
    auto p = Place(store::NewBlockId(), nodes, 3);
    ASSERT_EQ(p.size(), 2u);  // only node-0 and node-4 can take replicas
    for (const auto& n : p) EXPECT_TRUE(n == "node-0" || n == "node-4");
  }
}

TEST(PolicyTest, ParsingFormsAndEfficiency) {
  auto ec = ParsePolicy("ec:8+2");
  ASSERT_TRUE(ec.ok());
  EXPECT_TRUE(ec->erasure_coded());
  EXPECT_EQ(ec->width(), 10u);
  EXPECT_DOUBLE_EQ(ec->efficiency(), 0.8);
  EXPECT_EQ(ec->ToString(), "ec:8+2");
  // Small blocks keep M+1 replicas: the same number of lost nodes survived.
  const Policy small = ec->ForBlock(kEcMinBlockBytes - 1);
  EXPECT_FALSE(small.erasure_coded());
  EXPECT_EQ(small.replicas, 3u);
  EXPECT_TRUE(ec->ForBlock(kEcMinBlockBytes).erasure_coded());
  auto rep = ParsePolicy("replicas:3");
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->width(), 3u);
  EXPECT_NEAR(rep->efficiency(), 1.0 / 3, 1e-9);
  EXPECT_EQ(rep->ForBlock(1 << 30), *rep);
  EXPECT_EQ(ParsePolicy("2")->replicas, 2u);
  for (const char* bad : {"", "ec:", "ec:4", "ec:1+1", "replicas:0", "replicas:17", "replicas:x", "rs:4+2", "3x"}) {
    EXPECT_EQ(ParsePolicy(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  Policies p;
  p.cluster.replicas = 2;
  p.buckets["cold"] = *ec;
  EXPECT_EQ(p.For("cold"), *ec);
  EXPECT_EQ(p.For("hot").replicas, 2u);
}

// An erasure-coded block under its policy: placed when its K+M fragments
// sit on the nodes placement names; readable while K are live.
TEST(PolicyTest, ProtectionOfAStripe) {
  std::vector<NodeInfo> nodes;
  for (int i = 0; i < 8; ++i) {
    NodeInfo n;
    n.id = "n" + std::to_string(i);
    n.up = true;
    nodes.push_back(n);
  }
  store::BlockRef b;
  b.id = store::NewBlockId();
  b.size = 1 << 20;
  b.ec_k = 4;
  b.ec_m = 2;
  b.fragment_crcs.assign(6, 0);
  b.nodes = Place(b.id, nodes, 6);
  const Policy policy = *ParsePolicy("ec:4+2");
  auto p = Protection(b, nodes, policy);
  EXPECT_TRUE(p.placed);
  EXPECT_EQ(p.live, 6u);
  EXPECT_EQ(p.width, 6u);
  EXPECT_EQ(p.needed, 4u);
  // Fragment order does not matter, the set of holders does.
  std::swap(b.nodes[0], b.nodes[5]);
  EXPECT_TRUE(Protection(b, nodes, policy).placed);
  for (auto& n : nodes) n.up = n.id != b.nodes[1] && n.id != b.nodes[2];
  p = Protection(b, nodes, policy);
  EXPECT_EQ(p.live, 4u);
  EXPECT_FALSE(p.placed);
  // Under a replica policy the same block is in the wrong form.
  for (auto& n : nodes) n.up = true;
  EXPECT_FALSE(Protection(b, nodes, *ParsePolicy("replicas:2")).placed);
  EXPECT_FALSE(SameForm(b, *ParsePolicy("ec:4+3")));
  EXPECT_TRUE(SameForm(b, policy));
}

TEST(PlacementTest, APoolPlacesOnlyOnNodesThatHaveIt) {
  auto nodes = Nodes(6);
  for (int i = 0; i < 6; ++i) nodes[static_cast<size_t>(i)].pools = {i < 3 ? "flash" : "archive"};
  nodes[5].pools = {"archive", "flash"};
  for (int b = 0; b < 100; ++b) {
    const std::string id = store::NewBlockId();
    auto flash = Place(id, nodes, 2, "flash");
    auto archive = Place(id, nodes, 2, "archive");
    ASSERT_EQ(flash.size(), 2u);
    ASSERT_EQ(archive.size(), 2u);
    for (const auto& n : flash) EXPECT_TRUE(n == "node-0" || n == "node-1" || n == "node-2" || n == "node-5") << n;
    for (const auto& n : archive) EXPECT_TRUE(n == "node-3" || n == "node-4" || n == "node-5") << n;
    EXPECT_EQ(Place(id, nodes, 9, "tape").size(), 0u);
    EXPECT_EQ(Place(id, nodes, 9).size(), 6u);  // no pool: every node
  }
  // Media: the pool of that media most nodes have.
  using store::Media;
  for (auto& n : nodes) n.pool_media.assign(n.pools.size(), Media::kSsd);
  nodes[3].pool_media = {Media::kHdd};
  nodes[4].pool_media = {Media::kHdd};
  nodes[5].pool_media = {Media::kHdd, Media::kSsd};
  EXPECT_EQ(store::PoolForMedia(MemberPools(nodes), Media::kHdd), "archive");
  EXPECT_EQ(store::PoolForMedia(MemberPools(nodes), Media::kSsd), "flash");
  nodes[3].up = nodes[4].up = nodes[5].up = false;
  EXPECT_EQ(store::PoolForMedia(MemberPools(nodes), Media::kHdd), "");
  nodes[3].up = nodes[4].up = nodes[5].up = true;
  // One rule for a cluster and a single node (a cluster of one): ties go
  // to the pool seen first, so a node's first pool of the media wins.
  const std::vector<store::PoolConfig> one = {{.name = "fast", .media = Media::kSsd},
                                              {.name = "slow", .media = Media::kHdd},
                                              {.name = "cold", .media = Media::kHdd}};
  EXPECT_EQ(store::PoolForMedia(one, Media::kHdd), "slow");
  EXPECT_EQ(store::PoolForMedia(one, Media::kSsd), "fast");
  EXPECT_EQ(store::PoolForMedia(std::vector<store::PoolConfig>{}, Media::kSsd), "");
  const std::vector<std::vector<store::PoolConfig>> three = {{{.name = "slow", .media = Media::kHdd}},
                                                             {{.name = "cold", .media = Media::kHdd}},
                                                             {{.name = "cold", .media = Media::kHdd}}};
  EXPECT_EQ(store::PoolForMedia(three, Media::kHdd), "cold");  // most members
  NodeInfo old;
  old.id = "old";
  EXPECT_TRUE(HasPool(old, "flash"));  // a member that published no pools takes any
  // A block in the wrong pool is not placed, though its holders are right.
  store::BlockRef b;
  b.id = store::NewBlockId();
  b.size = 100;
  b.pool = "flash";
  b.nodes = Place(b.id, nodes, 2, "flash");
  Policy two;
  two.replicas = 2;
  EXPECT_TRUE(Protection(b, nodes, two).placed);
  EXPECT_TRUE(Protection(b, nodes, two, "flash").placed);
  EXPECT_FALSE(Protection(b, nodes, two, "archive").placed);
}

TEST(PlacementTest, AddingANodeMovesOnlyItsShare) {
  auto four = Nodes(4), five = Nodes(5);
  const int blocks = 4000;
  int moved = 0, to_new = 0;
  std::vector<int> load(5, 0);
  for (int b = 0; b < blocks; ++b) {
    const std::string id = store::NewBlockId();
    auto before = Place(id, four, 1), after = Place(id, five, 1);
    if (before != after) {
      ++moved;
      if (after[0] == "node-4") ++to_new;
    }
    load[std::stoi(after[0].substr(5))]++;
  }
  // About 1/5 of the blocks move, all of them to the new node.
  EXPECT_EQ(moved, to_new);
  EXPECT_NEAR(moved / double(blocks), 0.2, 0.03);
  for (int l : load) EXPECT_NEAR(l / double(blocks), 0.2, 0.03);
}

// ---- the MetaStore contract ----

class MetaStoreContract : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "sqlite") {
      dir_ = fs::temp_directory_path() / ("aq_meta_" + std::to_string(::getpid()) + "_" + store::NewBlockId());
      fs::create_directories(dir_);
      meta_ = store::OpenSqliteMetaStore((dir_ / "m.db").string()).value();
    } else {
      auto& etcd = Etcd::Get();
      if (!etcd.ok()) GTEST_SKIP() << etcd.why();
      // Each test its own prefix: a fresh namespace in the shared etcd.
      meta_ = NewEtcdMetaStore(etcd.client(), "/test-" + store::NewBlockId() + "/");
    }
  }
  void TearDown() override {
    meta_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  static ObjectMeta Obj(const std::string& bucket, const std::string& key, std::vector<BlockRef> blocks) {
    ObjectMeta o;
    o.bucket = bucket;
    o.key = key;
    for (const auto& b : blocks) o.size += b.size;
    o.block_size = 100;
    o.etag = "\"e\"";
    o.blocks = std::move(blocks);
    return o;
  }
  static BlockRef Ref(const std::string& id, uint64_t size, std::vector<std::string> nodes = {}) {
    return {id, size, 7, "default", std::move(nodes)};
  }
  fs::path dir_;
  std::unique_ptr<store::MetaStore> meta_;
};

TEST_P(MetaStoreContract, Buckets) {
  ASSERT_TRUE(meta_->CreateBucket("data").ok());
  EXPECT_EQ(meta_->CreateBucket("data").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(meta_->CreateBucket("Bad_Name").code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(meta_->CreateBucket("more").ok());
  auto list = meta_->ListBuckets().value();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "data");
  EXPECT_GT(list[0].created_ns, 0);
  ASSERT_TRUE(meta_->PutObject(Obj("data", "k", {Ref("b1", 5)})).ok());
  Status s = meta_->DeleteBucket("data");
  EXPECT_EQ(s.code(), StatusCode::kNotEmpty);
  ASSERT_TRUE(meta_->DeleteObject("data", "k").ok());
  EXPECT_TRUE(meta_->DeleteBucket("data").ok());
  EXPECT_EQ(meta_->DeleteBucket("data").code(), StatusCode::kNotFound);
}

TEST_P(MetaStoreContract, ObjectsSwitchLayoutsWhole) {
  ASSERT_TRUE(meta_->CreateBucket("data").ok());
  EXPECT_TRUE(meta_->PutObject(Obj("data", "a/x", {Ref("b1", 5), Ref("b2", 3, {"n1", "n2"})}))->empty());
  auto got = meta_->GetObject("data", "a/x").value();
  EXPECT_EQ(got.size, 8u);
  ASSERT_EQ(got.blocks.size(), 2u);
  EXPECT_EQ(got.blocks[1], Ref("b2", 3, {"n1", "n2"}));
  const uint64_t v1 = got.version;
  auto old = meta_->PutObject(Obj("data", "a/x", {Ref("b3", 2)})).value();
  ASSERT_EQ(old.size(), 2u);
  EXPECT_EQ(old[0].id, "b1");
  EXPECT_GT(meta_->GetObject("data", "a/x")->version, v1);
  ObjectMeta bad = Obj("data", "bad", {Ref("b4", 2)});
  bad.size = 3;  // the blocks do not add up
  EXPECT_EQ(meta_->PutObject(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(meta_->PutObject(Obj("nobucket", "k", {})).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(meta_->PutObject(Obj("data", "../k", {})).status().code(), StatusCode::kInvalidArgument);
  auto missing = meta_->GetObject("data", "nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message().rfind("no object", 0), 0u);
  EXPECT_EQ(meta_->GetObject("nobucket", "k").status().message().rfind("no bucket", 0), 0u);
  auto gone = meta_->DeleteObject("data", "a/x").value();
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].id, "b3");
  EXPECT_EQ(meta_->DeleteObject("data", "a/x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(meta_->DeleteObject("nobucket", "x").status().message().rfind("no bucket", 0), 0u);
}

// S3's conditional writes, checked inside the commit's transaction: create
// only (If-None-Match: *) and replace-this-version (If-Match), on PutObject
// and CompleteUpload; a failed condition writes nothing; of many writers
// racing a create-only write of one key exactly one wins.
TEST_P(MetaStoreContract, ConditionalWritesHoldAgainstConcurrentWriters) {
  ASSERT_TRUE(meta_->CreateBucket("data").ok());
  ObjectMeta first = Obj("data", "k", {Ref("c1", 4)});
  first.condition.absent = true;
  ASSERT_TRUE(meta_->PutObject(first).ok());
  ObjectMeta again = Obj("data", "k", {Ref("c2", 4)});
  again.etag = "\"e2\"";
  again.condition.absent = true;
  auto refused = meta_->PutObject(again);
  EXPECT_EQ(refused.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(refused.status().subject(), Subject::kObject);
  EXPECT_EQ(meta_->GetObject("data", "k")->blocks[0].id, "c1");
  again.condition = {false, "\"other\""};
  EXPECT_EQ(meta_->PutObject(again).status().code(), StatusCode::kAlreadyExists);
  again.condition = {false, "\"e\""};  // the stored ETag
  ASSERT_TRUE(meta_->PutObject(again).ok());
  EXPECT_EQ(meta_->GetObject("data", "k")->etag, "\"e2\"");
  ObjectMeta missing = Obj("data", "none", {Ref("c3", 1)});
  missing.condition.etag = "\"e\"";
  auto nf = meta_->PutObject(missing);
  EXPECT_EQ(nf.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(nf.status().subject(), Subject::kObject);
  missing.bucket = "nobucket";
  missing.condition = {true, ""};
  EXPECT_EQ(meta_->PutObject(missing).status().subject(), Subject::kBucket);

  // A completion under a condition that fails leaves the upload as it was.
  ASSERT_TRUE(meta_->CreateUpload({"cu", "data", "k", 0, {}}).ok());
  ASSERT_TRUE(meta_->PutPart("cu", {1, 2, "\"p\"", 0, {Ref("cp", 2)}}).ok());
  ObjectMeta done = Obj("data", "k", {});
  done.etag = "\"m-1\"";
  done.condition.absent = true;
  EXPECT_EQ(meta_->CompleteUpload("cu", {{1, "\"p\""}}, done).status().code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(meta_->GetUpload("cu").ok());
  done.condition = {false, "\"e2\""};
  ASSERT_TRUE(meta_->CompleteUpload("cu", {{1, "\"p\""}}, done).ok());
  EXPECT_EQ(meta_->GetObject("data", "k")->blocks[0].id, "cp");

  // Eight writers, one create-only key each round: one winner per round.
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> won{0}, lost{0};
    std::vector<std::thread> writers;
    for (int w = 0; w < 8; ++w) {
      writers.emplace_back([&, w] {
        ObjectMeta o = Obj("data", "race-" + std::to_string(round), {Ref("r" + std::to_string(w), 1)});
        o.condition.absent = true;
        auto r = meta_->PutObject(o);
        if (r.ok()) {
          won++;
        } else if (r.status().code() == StatusCode::kAlreadyExists) {
          lost++;
        }
      });
    }
    for (auto& t : writers) t.join();
    EXPECT_EQ(won.load(), 1) << "round " << round;
    EXPECT_EQ(lost.load(), 7) << "round " << round;
  }
}

// A prefix is bytes: one with multi-byte UTF-8 characters matches exactly
// the keys that start with those bytes (aws s3 ls/sync list "ds/données/").
TEST_P(MetaStoreContract, ListingUnderANonAsciiPrefix) {
  ASSERT_TRUE(meta_->CreateBucket("data").ok());
  for (const char* k : {"ds/données/1.jpg", "ds/données/2.jpg", "ds/donnéesX", "ds/donne/1", "ds/日本/a", "ds/😀/b"})
    ASSERT_TRUE(meta_->PutObject(Obj("data", k, {})).ok());
  auto keys = [&](const std::string& prefix) {
    std::vector<std::string> out;
    auto page = meta_->ListObjects({"data", prefix, "", 100}).value();
    for (const auto& o : page.objects) out.push_back(o.key);
    return out;
  };
  EXPECT_EQ(keys("ds/données/"), (std::vector<std::string>{"ds/données/1.jpg", "ds/données/2.jpg"}));
  EXPECT_EQ(keys("ds/données"), (std::vector<std::string>{"ds/données/1.jpg", "ds/données/2.jpg", "ds/donnéesX"}));
  EXPECT_EQ(keys("ds/日本/"), std::vector<std::string>{"ds/日本/a"});
  EXPECT_EQ(keys("ds/😀/"), std::vector<std::string>{"ds/😀/b"});
  EXPECT_EQ(keys("ds/").size(), 6u);
  auto page = meta_->ListObjects({"data", "ds/données/", "", 1}).value();
  ASSERT_EQ(page.objects.size(), 1u);
  EXPECT_TRUE(page.truncated);
  page = meta_->ListObjects({"data", "ds/données/", page.objects[0].key, 1}).value();
  ASSERT_EQ(page.objects.size(), 1u);
  EXPECT_EQ(page.objects[0].key, "ds/données/2.jpg");
  EXPECT_FALSE(page.truncated);
}

TEST_P(MetaStoreContract, ListingByPrefixWithPagination) {
  ASSERT_TRUE(meta_->CreateBucket("data").ok());
  for (const char* k : {"a/1", "a/2", "a/3", "b/1", "a%_"}) ASSERT_TRUE(meta_->PutObject(Obj("data", k, {})).ok());
  auto page = meta_->ListObjects({"data", "a/", "", 2}).value();
  ASSERT_EQ(page.objects.size(), 2u);
  EXPECT_EQ(page.objects[0].key, "a/1");
  EXPECT_TRUE(page.truncated);
  page = meta_->ListObjects({"data", "a/", "a/2", 2}).value();
  ASSERT_EQ(page.objects.size(), 1u);
  EXPECT_EQ(page.objects[0].key, "a/3");
  EXPECT_FALSE(page.truncated);
  page = meta_->ListObjects({"data", "a%", "", 10}).value();
  ASSERT_EQ(page.objects.size(), 1u);  // '%' and '_' are not wildcards
  EXPECT_EQ(meta_->ListObjects({"data", "", "", 100})->objects.size(), 5u);
  EXPECT_EQ(meta_->ListObjects({"data", "", "", 0})->objects.size(), 0u);
  EXPECT_EQ(meta_->ListObjects({"nobucket", "", "", 10}).status().code(), StatusCode::kNotFound);
}

TEST_P(MetaStoreContract, MultipartUploads) {
  ASSERT_TRUE(meta_->CreateBucket("data").ok());
  ASSERT_TRUE(meta_->PutObject(Obj("data", "big", {Ref("old", 4)})).ok());
  ASSERT_TRUE(meta_->CreateUpload({"u1", "data", "big", 0, {}}).ok());
  EXPECT_EQ(meta_->CreateUpload({"u1", "data", "big", 0, {}}).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(meta_->CreateUpload({"u2", "nobucket", "big", 0, {}}).code(), StatusCode::kNotFound);
  EXPECT_TRUE(meta_->PutPart("u1", {2, 3, "\"p2a\"", 0, {Ref("p2a", 3)}})->empty());
  auto replaced = meta_->PutPart("u1", {2, 3, "\"p2\"", 0, {Ref("p2", 3)}}).value();
  ASSERT_EQ(replaced.size(), 1u);
  EXPECT_EQ(replaced[0].id, "p2a");
  ASSERT_TRUE(meta_->PutPart("u1", {1, 5, "\"p1\"", 0, {Ref("p1a", 4), Ref("p1b", 1)}}).ok());
  ASSERT_TRUE(meta_->PutPart("u1", {3, 1, "\"p3\"", 0, {Ref("p3", 1)}}).ok());
  EXPECT_EQ(meta_->PutPart("nope", {1, 1, "\"x\"", 0, {Ref("x", 1)}}).status().code(), StatusCode::kNotFound);
  auto u = meta_->GetUpload("u1").value();
  EXPECT_EQ(u.key, "big");
  ASSERT_EQ(u.parts.size(), 3u);
  EXPECT_EQ(u.parts[0].number, 1u);
  EXPECT_EQ(u.parts[0].blocks.size(), 2u);
  EXPECT_EQ(meta_->ListUploads("data")->size(), 1u);
  EXPECT_EQ(meta_->DeleteBucket("data").code(), StatusCode::kNotEmpty);  // objects and an upload
  auto refs = meta_->ReferencedBlocks().value();
  for (const char* id : {"old", "p1a", "p1b", "p2", "p3"}) {
    EXPECT_NE(std::find(refs.begin(), refs.end(), id), refs.end()) << id;
  }
  EXPECT_EQ(meta_->CompleteUpload("u1", {{1, "\"wrong\""}}, Obj("data", "big", {})).status().code(),
            StatusCode::kInvalidArgument);
  auto freed = meta_->CompleteUpload("u1", {{1, "\"p1\""}, {2, "\"p2\""}}, Obj("data", "big", {})).value();
  std::vector<std::string> ids;
  for (const auto& b : freed) ids.push_back(b.id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"old", "p3"}));  // the replaced object and the part left out
  auto big = meta_->GetObject("data", "big").value();
  EXPECT_EQ(big.size, 8u);
  ASSERT_EQ(big.blocks.size(), 3u);
  EXPECT_EQ(big.blocks[2].id, "p2");
  EXPECT_EQ(meta_->GetUpload("u1").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(meta_->ListUploads("data")->empty());
  // Abort returns the parts' blocks.
  ASSERT_TRUE(meta_->CreateUpload({"u3", "data", "other", 0, {}}).ok());
  ASSERT_TRUE(meta_->PutPart("u3", {1, 2, "\"q\"", 0, {Ref("q1", 2)}}).ok());
  auto aborted = meta_->AbortUpload("u3").value();
  ASSERT_EQ(aborted.size(), 1u);
  EXPECT_EQ(aborted[0].id, "q1");
  EXPECT_EQ(meta_->AbortUpload("u3").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(meta_->GetObject("data", "other").status().code(), StatusCode::kNotFound);
}

TEST_P(MetaStoreContract, Settings) {
  auto* m = meta_.get();
  EXPECT_EQ(m->GetSetting("tier/policies").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(m->PutSetting("tier/policies", "[1]").ok());
  EXPECT_EQ(m->GetSetting("tier/policies").value(), "[1]");
  ASSERT_TRUE(m->PutSetting("tier/policies", "[2]").ok());
  EXPECT_EQ(m->GetSetting("tier/policies").value(), "[2]");
  ASSERT_TRUE(m->PutSetting("tier/policies", "").ok());
  EXPECT_EQ(m->GetSetting("tier/policies").status().code(), StatusCode::kNotFound);
}

// Read-modify-write by several writers at once through SwapSetting: every
// increment survives (none is overwritten by a writer that read before it).
TEST_P(MetaStoreContract, SwapSettingLosesNoConcurrentUpdate) {
  auto* m = meta_.get();
  EXPECT_FALSE(m->SwapSetting("counter", "7", "8").value());  // not set: "7" is not its value
  ASSERT_TRUE(m->SwapSetting("counter", "", "0").value());
  EXPECT_FALSE(m->SwapSetting("counter", "", "0").value());  // set now
  constexpr int kThreads = 4, kEach = 10;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        for (;;) {
          auto v = m->GetSetting("counter");
          if (!v.ok()) {
            failures++;
            return;
          }
          auto swapped = m->SwapSetting("counter", *v, std::to_string(std::stoi(*v) + 1));
          if (!swapped.ok()) {
            failures++;
            return;
          }
          if (*swapped) break;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(m->GetSetting("counter").value(), std::to_string(kThreads * kEach));
  ASSERT_TRUE(m->SwapSetting("counter", std::to_string(kThreads * kEach), "").value());
  EXPECT_EQ(m->GetSetting("counter").status().code(), StatusCode::kNotFound);
}

TEST_P(MetaStoreContract, AccessTimes) {
  auto* m = meta_.get();
  ASSERT_TRUE(m->CreateBucket("data").ok());
  ASSERT_TRUE(m->PutObject(Obj("data", "a/b", {Ref("b1", 5)})).ok());
  ASSERT_TRUE(m->PutObject(Obj("data", "c", {Ref("b2", 5)})).ok());
  EXPECT_TRUE(m->AccessTimes()->empty());
  ASSERT_TRUE(m->RecordAccess({}).ok());
  std::vector<store::AccessTime> many;
  for (int i = 0; i < 150; ++i) many.push_back({"data", i % 2 ? "a/b" : "c", 1000 + i});  // > one etcd batch
  ASSERT_TRUE(m->RecordAccess(many).ok());
  auto t = m->AccessTimes().value();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.at(store::AccessKey("data", "a/b")), 1149);
  EXPECT_EQ(t.at(store::AccessKey("data", "c")), 1148);
  // Deleting an object forgets its access time.
  ASSERT_TRUE(m->DeleteObject("data", "c").ok());
  t = m->AccessTimes().value();
  EXPECT_EQ(t.size(), 1u);
  EXPECT_FALSE(t.count(store::AccessKey("data", "c")));
}

TEST_P(MetaStoreContract, UpdateLayoutOnlyIfUnchanged) {
  ASSERT_TRUE(meta_->CreateBucket("data").ok());
  ASSERT_TRUE(meta_->PutObject(Obj("data", "k", {Ref("b1", 5, {"n1", "n2"})})).ok());
  ObjectMeta o = meta_->GetObject("data", "k").value();
  o.blocks[0].nodes = {"n1", "n3"};  // a replica moved from n2 to n3
  EXPECT_TRUE(meta_->UpdateLayout(o).value());
  auto now = meta_->GetObject("data", "k").value();
  EXPECT_EQ(now.blocks[0].nodes, (std::vector<std::string>{"n1", "n3"}));
  EXPECT_NE(now.version, o.version);
  // Against the old version: refused (the object moved on).
  o.blocks[0].nodes = {"n9"};
  EXPECT_FALSE(meta_->UpdateLayout(o).value());
  EXPECT_EQ(meta_->GetObject("data", "k")->blocks[0].nodes, (std::vector<std::string>{"n1", "n3"}));
  // A deleted object is not brought back.
  now.blocks[0].nodes = {"n4"};
  ASSERT_TRUE(meta_->DeleteObject("data", "k").ok());
  EXPECT_FALSE(meta_->UpdateLayout(now).value());
  EXPECT_EQ(meta_->GetObject("data", "k").status().code(), StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(Engines, MetaStoreContract, testing::Values("sqlite", "etcd"),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace aq::cluster
