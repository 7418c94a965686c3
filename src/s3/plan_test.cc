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

}  // namespace
}  // namespace aq::s3
