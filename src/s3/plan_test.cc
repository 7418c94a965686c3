#include "s3/plan.h"

#include <gtest/gtest.h>

namespace aq::s3 {
namespace {

TEST(PlanTest, RoundTripsAndRefusesAnythingElseWhole) {
  const std::vector<PlanRead> reads = {{"b", "dir é/x.jpg"}, {"b", "shard-0", 4096, 1 << 20}, {"c", "k", 0, 0}};
  auto back = PlanFromJson(PlanToJson(reads));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ((*back)[0].key, "dir é/x.jpg");
  EXPECT_EQ((*back)[0].length, UINT64_MAX);  // to the end
  EXPECT_EQ((*back)[1].offset, 4096u);
  EXPECT_EQ((*back)[1].length, 1u << 20);
  EXPECT_EQ((*back)[2].length, 0u);
  EXPECT_TRUE(PlanFromJson(R"({"reads": []})").ok());
  for (const char* bad :
       {"", "{", "[]", "null", R"({"reads": {}})", R"({"reads": [1]})", R"({"reads": [{"key": "k"}]})",
        R"({"reads": [{"bucket": "", "key": "k"}]})", R"({"reads": [{"bucket": "b", "key": 7}]})",
        R"({"reads": [{"bucket": "b", "key": "k", "offset": -1}]})",
        R"({"reads": [{"bucket": "b", "key": "k", "length": 1.5}]})",
        R"({"reads": [{"bucket": "b", "key": "k"}, {"bucket": "b", "key": "k", "offset": "0"}]})"}) {
    auto p = PlanFromJson(bad);
    EXPECT_FALSE(p.ok()) << bad;
  }
  EXPECT_NE(PlanFromJson(R"({"reads": [{"bucket": "b", "key": "k"}, {"key": "k"}]})").status().message().find("read 1"),
            std::string::npos);
  std::string many = R"({"reads": [)";
  for (size_t i = 0; i <= kMaxPlanReads; ++i) many += std::string(i ? "," : "") + R"({"bucket":"b","key":"k"})";
  EXPECT_FALSE(PlanFromJson(many + "]}").ok());
}

TEST(PlanTest, FieldsItDoesNotUseAreSkippedWhateverTheyHold) {
  auto p =
      PlanFromJson(R"({"v": 1, "extra": {"a": [1, {"b": null}], "reads": 3}, "reads": [{"why": [[{}]], "bucket": "b",)"
                   R"( "key": "k", "note": {"offset": "x"}, "length": 9}], "after": [true, false, 1.5, -2]})");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->size(), 1u);
  EXPECT_EQ((*p)[0].bucket, "b");
  EXPECT_EQ((*p)[0].length, 9u);
  EXPECT_EQ((*p)[0].offset, 0u);
  // No reads array at all, two of them, trailing bytes, a read field holding a container.
  for (const char* bad : {R"({"v": 1})", R"({"reads": [], "reads": []})", R"({"reads": []} x)",
                          R"({"reads": [{"bucket": ["b"], "key": "k"}]})", R"({"reads": [[]]})"}) {
    EXPECT_FALSE(PlanFromJson(bad).ok()) << bad;
  }
}

TEST(PlanTest, ABodyOfManyTinyValuesFailsAtTheFirstBadRead) {
  // 8 MiB of empty objects: a document tree of them takes hundreds of MiB;
  // read as it is parsed, the first one is the error.
  std::string body = R"({"reads": [)";
  while (body.size() < kMaxPlanBytes - 8) body += "{},";
  body += "{}]}";
  auto p = PlanFromJson(body);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("read 0"), std::string::npos) << p.status().message();
}

TEST(PlanTest, PiecesRoundTripAndRefuseBadIdsWhole) {
  const std::vector<PlanPiece> pieces = {{"0123456789abcdef0123456789abcdef", "default", 262144, 0xffffffffu},
                                         {"fedcba9876543210fedcba9876543210", "hdd pool", 0, 7}};
  auto back = PiecesFromJson(PiecesToJson(pieces));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].crc32c, 0xffffffffu);
  EXPECT_EQ((*back)[0].size, 262144u);
  EXPECT_EQ((*back)[1].pool, "hdd pool");
  EXPECT_TRUE(PiecesFromJson(R"({"pieces": []})").ok());
  for (const char* bad :
       {"", "{}", R"({"reads": []})", R"({"pieces": [{}]})", R"({"pieces": [{"id": "a", "pool": "p", "size": 1}]})",
        R"({"pieces": [{"id": "a", "pool": "p", "size": 1, "crc": 4294967296}]})",
        R"({"pieces": [{"id": "a", "pool": "p", "size": -1, "crc": 1}]})",
        R"({"pieces": [{"id": "", "pool": "p", "size": 1, "crc": 1}]})",
        R"({"pieces": [{"id": "../etc/passwd", "pool": "p", "size": 1, "crc": 1}]})",
        R"({"pieces": [{"id": "a", "pool": 3, "size": 1, "crc": 1}]})"}) {
    EXPECT_FALSE(PiecesFromJson(bad).ok()) << bad;
  }
  const auto second = PiecesFromJson(R"({"pieces": [{"id": "a", "pool": "", "size": 1, "crc": 1}, {"id": "a/b"}]})");
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("piece 1"), std::string::npos);
  EXPECT_FALSE(
      PiecesFromJson(R"({"pieces": [{"id": ")" + std::string(129, 'a') + R"(", "pool": "", "size": 1, "crc": 1}]})")
          .ok());
}

}  // namespace
}  // namespace aq::s3
