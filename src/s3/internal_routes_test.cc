#include "s3/internal_routes.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "s3/sigv4.h"

namespace aq::s3::internal {
namespace {

using Params = std::vector<std::pair<std::string, std::string>>;

// A query string as the handler sees it: split and decoded.
Params Decode(const std::string& query) {
  Params out;
  size_t at = 0;
  while (at <= query.size()) {
    const size_t amp = std::min(query.find('&', at), query.size());
    const std::string part = query.substr(at, amp - at);
    const size_t eq = part.find('=');
    out.emplace_back(UriDecode(part.substr(0, eq)), eq == std::string::npos ? "" : UriDecode(part.substr(eq + 1)));
    at = amp + 1;
  }
  return out;
}

TEST(InternalRoutesTest, ABlockTargetSurvivesItsQuery) {
  for (const BlockTarget& t : {
           BlockTarget{.id = "0123456789abcdef0123456789abcdef", .pool = "default", .crc32c = 7, .size = 1 << 20},
           BlockTarget{.id = "ab", .pool = "fast pool/é", .crc32c = 4294967295u, .size = 0},
           BlockTarget{
               .id = "a.b_c-d", .pool = "", .crc32c = 1, .size = 100, .sliced = true, .offset = 40, .length = 60},
       }) {
    EXPECT_EQ(t.Path(), "/_aquifer/blocks/" + t.id);
    auto back = ParseBlockTarget("blocks/" + t.id, Decode(t.Query()));
    ASSERT_TRUE(back.ok()) << t.Query() << ": " << back.status().ToString();
    EXPECT_EQ(back->id, t.id);
    EXPECT_EQ(back->pool, t.pool);
    EXPECT_EQ(back->crc32c, t.crc32c);
    EXPECT_EQ(back->size, t.size);
    EXPECT_EQ(back->sliced, t.sliced);
    EXPECT_EQ(back->offset, t.offset);
    EXPECT_EQ(back->length, t.length);
  }
}

TEST(InternalRoutesTest, TheQueryIsInCanonicalOrder) {
  // SigV4 signs the query sorted by name; the client sends it that way.
  const BlockTarget t{.id = "ab", .pool = "p", .crc32c = 1, .size = 9, .sliced = true, .offset = 2, .length = 3};
  EXPECT_EQ(t.Query(), "crc=1&length=3&offset=2&pool=p&size=9");
}

TEST(InternalRoutesTest, MalformedBlockRequestsAreRefusedNamingWhy) {
  const Params ok = {{"crc", "1"}, {"pool", "p"}, {"size", "9"}};
  auto refused = [](std::string_view key, const Params& q) {
    auto t = ParseBlockTarget(key, q);
    return t.ok() ? std::string() : std::string(t.status().message());
  };
  EXPECT_EQ(refused("blocks/ab", ok), "");
  EXPECT_NE(refused("blocks/", ok).find("block id"), std::string::npos);
  EXPECT_NE(refused("blocks/../../etc/passwd", ok).find("block id"), std::string::npos);
  EXPECT_NE(refused("blocks/" + std::string(129, 'a'), ok).find("block id"), std::string::npos);
  EXPECT_NE(refused("inventory", ok).find("not a block"), std::string::npos);
  EXPECT_NE(refused("blocks/ab", {{"pool", "p"}, {"size", "9"}}).find("crc"), std::string::npos);
  EXPECT_NE(refused("blocks/ab", {{"crc", "4294967296"}, {"size", "9"}}).find("crc"), std::string::npos);
  EXPECT_NE(refused("blocks/ab", {{"crc", "1"}, {"size", "-9"}}).find("size"), std::string::npos);
  EXPECT_NE(refused("blocks/ab", {{"crc", "1"}, {"size", "9x"}}).find("size"), std::string::npos);
  Params offset_only = ok;
  offset_only.emplace_back("offset", "3");
  EXPECT_NE(refused("blocks/ab", offset_only).find("offset and length"), std::string::npos);
  Params bad_length = offset_only;
  bad_length.emplace_back("length", "");
  EXPECT_NE(refused("blocks/ab", bad_length).find("offset and length"), std::string::npos);
}

TEST(InternalRoutesTest, PlanQueries) {
  EXPECT_EQ(PlanQuery("epoch 1/é"), "stream=epoch%201%2F%C3%A9");
  EXPECT_EQ(PlanQuery("s", true), "pieces=1&stream=s");
}

TEST(InternalRoutesTest, AnInventoryIsAllBlockIdsOrAnError) {
  const std::vector<std::string> ids = {"0123456789abcdef0123456789abcdef", "ab.c"};
  auto back = InventoryFromJson(InventoryToJson(ids));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, ids);
  EXPECT_TRUE(InventoryFromJson("[]").ok());
  for (const char* bad : {"", "{}", "[1]", R"(["ok", null])", R"(["../x"])", R"(["a b"])", "[\"ab\""}) {
    auto r = InventoryFromJson(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << bad;
    }
  }
}

TEST(InternalRoutesTest, AClusterMapSurvivesItsDocument) {
  ClusterMapDoc map;
  map.replicas = 2;
  map.self = "n1";
  map.nodes = {{"n1", "10.0.0.1:9000", "active", true}, {"n2", "[::1]:9001", "smartfailed", false}};
  auto back = ClusterMapFromJson(ClusterMapToJson(map));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->replicas, 2u);
  EXPECT_EQ(back->self, "n1");
  ASSERT_EQ(back->nodes.size(), 2u);
  EXPECT_EQ(back->nodes[1].address, "[::1]:9001");
  EXPECT_EQ(back->nodes[1].state, "smartfailed");
  EXPECT_FALSE(back->nodes[1].up);
  EXPECT_TRUE(back->nodes[0].up);
}

TEST(InternalRoutesTest, ASingleNodesMapNamesNoMember) {
  EXPECT_EQ(ClusterMapToJson({}), R"({"nodes":[]})");
  auto back = ClusterMapFromJson(R"({"nodes":[]})");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->nodes.empty());
  EXPECT_TRUE(back->self.empty());
}

TEST(InternalRoutesTest, AMalformedClusterMapIsAnErrorNamingTheField) {
  auto refused = [](const char* json) {
    auto m = ClusterMapFromJson(json);
    return m.ok() ? std::string() : std::string(m.status().message());
  };
  EXPECT_EQ(refused(R"({"nodes": [{"id": "n1"}]})"), "");  // absent fields read as empty
  EXPECT_NE(refused("[]").find("a cluster map is"), std::string::npos);
  EXPECT_NE(refused(R"({"nodes": {}})").find("a cluster map is"), std::string::npos);
  EXPECT_NE(refused(R"({"nodes": [3]})").find("nodes[0] is not an object"), std::string::npos);
  EXPECT_NE(refused(R"({"nodes": [{}, {"up": "yes"}]})").find("nodes[1].up is string"), std::string::npos);
  EXPECT_NE(refused(R"({"nodes": [{"address": 9000}]})").find("nodes[0].address is number"), std::string::npos);
  EXPECT_NE(refused(R"({"replicas": -1, "nodes": []})").find("replicas is number"), std::string::npos);
}

}  // namespace
}  // namespace aq::s3::internal
