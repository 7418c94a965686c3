#include "s3/node_stats_doc.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

namespace aq::s3 {
namespace {

// Gives every leaf of `j` a value of its type that no other leaf has (and
// not the default): true, "sN", N + 0.5, N.
void VaryEveryLeaf(nlohmann::json& j) {
  int n = 0;
  std::function<void(nlohmann::json&)> vary = [&](nlohmann::json& v) {
    ++n;
    if (v.is_object() || v.is_array()) {
      for (auto& x : v) vary(x);
    } else if (v.is_boolean()) {
      v = true;
    } else if (v.is_string()) {
      v = "s" + std::to_string(n);
    } else if (v.is_number_float()) {
      v = n + 0.5;
    } else {
      v = static_cast<uint64_t>(n);
    }
  };
  vary(j);
}

// A document with every section present and every array one element long,
// its leaves then given distinct values: what the writer names, the reader
// must read back under the same name.
nlohmann::json EveryFieldSet() {
  NodeStatsDoc doc;
  doc.ops["get"] = {};
  doc.cache.emplace();
  doc.l3.emplace();
  doc.prefetch.emplace();
  doc.staging.emplace();
  PoolStatsDoc pool;
  pool.size_bytes = 1;
  pool.available_bytes = 1;
  pool.dedup_writes.emplace();
  pool.compression_writes.emplace();
  doc.pools.push_back(pool);
  doc.machine["cpu.user"] = 1;
  doc.scrub.emplace();
  doc.scrub->objects_at_risk = {"b/k"};
  doc.scrub->quarantine.emplace_back();
  doc.scrub->findings.emplace_back().also = {"b/other"};
  doc.same_host.emplace();
  doc.uploads.emplace();
  doc.connections.emplace();
  doc.cluster.emplace();
  doc.cluster->bucket_policies["b"] = "ec:4+2";
  doc.errors_by_status["404"] = 1;
  nlohmann::json j = ToJson(doc);
  VaryEveryLeaf(j);
  return j;
}

TEST(NodeStatsDocTest, EveryFieldWrittenIsReadBackUnderItsName) {
  const nlohmann::json j = EveryFieldSet();
  auto doc = ParseNodeStatsDoc(j);
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ(ToJson(*doc), j) << "written:\n" << j.dump(1) << "\nread back:\n" << ToJson(*doc).dump(1);
  // Spot checks through the struct, not the codec.
  EXPECT_GT(doc->cache->hits, 0u);
  EXPECT_GT(doc->cluster->repair.bytes_tiered, 0u);
  EXPECT_GT(doc->pools.at(0).compression_writes->stored_bytes, 0u);
  EXPECT_GT(doc->ops.at("get").latency.p99_us, 0);
  EXPECT_GT(doc->bodies_cut, 0u);
  EXPECT_EQ(doc->scrub->objects_at_risk.size(), 1u);
}

TEST(NodeStatsDocTest, AbsentSectionsReadAsAbsentAndAreLeftOut) {
  auto doc = ParseNodeStatsDoc(std::string_view(R"({"uptime_seconds": 3, "ops": {}})"));
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ(doc->uptime_seconds, 3);
  EXPECT_FALSE(doc->cache || doc->l3 || doc->prefetch || doc->staging || doc->scrub || doc->same_host || doc->uploads ||
               doc->connections || doc->cluster);
  EXPECT_TRUE(doc->pools.empty());
  const nlohmann::json out = ToJson(*doc);
  for (const char* k :
       {"cache", "l3", "prefetch", "staging", "scrub", "same_host", "uploads", "connections", "cluster"}) {
    EXPECT_FALSE(out.contains(k)) << k;
  }
  EXPECT_TRUE(out.contains("reclaim"));  // every node has one
}

TEST(NodeStatsDocTest, NullReadsAsZeroAndMachineKeepsNumbersOnly) {
  // A NaN is written as null; a sampler value that is not a number is dropped.
  auto doc = ParseNodeStatsDoc(
      std::string_view(R"({"cache": {"hit_ratio": null, "hits": 7}, "same_host": null,)"
                       R"( "machine": {"cpu.user": 12.5, "net.eth0.rx": 3, "net.lo.rx": 1, "net.eth0.tx": 2,)"
                       R"( "disk.sda.read": 4, "disk.sda.write": 5, "gpu.name": "x", "cpu.iowait": null}})"));
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ(doc->cache->hit_ratio, 0);
  EXPECT_EQ(doc->cache->hits, 7u);
  EXPECT_FALSE(doc->same_host);
  EXPECT_EQ(doc->machine.size(), 6u);
  const auto t = doc->MachineThroughput();
  EXPECT_EQ(t.net_in, 4);
  EXPECT_EQ(t.net_out, 2);
  EXPECT_EQ(t.disk_in, 4);
  EXPECT_EQ(t.disk_out, 5);
}

TEST(NodeStatsDocTest, AFieldOfTheWrongTypeIsAnErrorNamingIt) {
  struct Case {
    const char* json;
    const char* names;
  };
  for (const Case& c : {
           Case{R"({"cache": {"hits": "many"}})", "cache.hits is string"},
           Case{R"({"pools": [{"name": "p"}, {"bytes": true}]})", "pools[1].bytes is boolean"},
           Case{R"({"ops": {"get": {"latency": {"p99_us": []}}}})", "ops.get.latency.p99_us is array"},
           Case{R"({"cluster": {"bucket_policies": {"b": 3}}})", "cluster.bucket_policies.b is number"},
           Case{R"({"uptime_seconds": -1, "denied": -4})", "denied is number, not a count"},
           Case{R"({"pools": {}})", "pools is object, not an array"},
           Case{R"([1, 2])", "the document is array, not an object"},
           Case{R"({"bodies": {"cut": "x"}})", "bodies.cut is string"},
       }) {
    auto doc = ParseNodeStatsDoc(std::string_view(c.json));
    ASSERT_FALSE(doc.ok()) << c.json;
    EXPECT_EQ(doc.status().code(), StatusCode::kCorruption) << c.json;
    EXPECT_NE(doc.status().message().find(c.names), std::string::npos) << doc.status().message();
  }
  EXPECT_FALSE(ParseNodeStatsDoc(std::string_view("{\"ops\": ")).ok());
}

TEST(NodeStatsDocTest, ACountWrittenAsADoubleReadsAsACount) {
  auto doc = ParseNodeStatsDoc(std::string_view(R"({"bytes_out": 1.5e9, "pools": [{"size_bytes": 2e12}]})"));
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ(doc->bytes_out, 1500000000u);
  EXPECT_EQ(*doc->pools.at(0).size_bytes, 2e12);
}

TEST(NodeStatsDocTest, LatencySummaryIsInMicroseconds) {
  LatencyHistogram h;
  for (int i = 0; i < 100; ++i) h.Record(2'000'000);  // 2 ms
  const auto s = LatencySummary::Of(h);
  EXPECT_EQ(s.count, 100u);
  EXPECT_NEAR(s.p50_us, 2000, 2000 * 0.05);
  EXPECT_NEAR(s.max_us, 2000, 1);
}

TEST(MemberStatusDocTest, EveryFieldWrittenIsReadBackUnderItsName) {
  MemberStatusDoc doc;
  doc.repair.emplace();
  doc.scrub.emplace().objects_at_risk = {"b/k"};
  nlohmann::json j = ToJson(doc);
  VaryEveryLeaf(j);
  auto back = ParseMemberStatusDoc(j.dump());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ToJson(*back), j);
  EXPECT_GT(back->pool_logical_bytes, 0u);
  EXPECT_GT(back->scrub->quarantined_bytes, 0u);
}

TEST(MemberStatusDocTest, AnEmptyRecordIsEmptyAndABadOneIsNamed) {
  auto empty = ParseMemberStatusDoc("");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->scrub || empty->repair);
  EXPECT_EQ(empty->cache_hits, 0u);
  auto bad = ParseMemberStatusDoc(R"({"scrub": {"objects_at_risk": "b/k"}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("member status: scrub.objects_at_risk is string"), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(ParseMemberStatusDoc("{").ok());
  EXPECT_FALSE(ParseMemberStatusDoc("[]").ok());
}

}  // namespace
}  // namespace aq::s3
