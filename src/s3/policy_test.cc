#include "s3/policy.h"

#include <gtest/gtest.h>

namespace aq::s3 {
namespace {

std::vector<Grant> Grants(std::initializer_list<std::pair<const char*, const char*>> list) {
  std::vector<Grant> out;
  for (const auto& [actions, scope] : list) out.push_back(*ParseScope(scope, *ParseActions(actions)));
  return out;
}

TEST(PolicyTest, ActionsParseAndPrint) {
  EXPECT_EQ(*ParseActions("read,list"), kRead | kList);
  EXPECT_EQ(*ParseActions("ro"), kRead | kList);
  EXPECT_EQ(*ParseActions("rw"), kRead | kWrite | kDelete | kList);
  EXPECT_EQ(*ParseActions("all"), kAllActions);
  EXPECT_EQ(ActionsToString(kRead | kList), "read,list");
  EXPECT_EQ(ActionsToString(kAllActions), "all");
  EXPECT_EQ(ActionsToString(0), "none");
  for (const char* bad : {"", "read,", "Read", "write delete", "everything"}) {
    EXPECT_FALSE(ParseActions(bad).ok()) << bad;
  }
}

TEST(PolicyTest, Scopes) {
  EXPECT_EQ(ScopeToString(*ParseScope("*", kRead)), "*");
  EXPECT_EQ(ScopeToString(*ParseScope("train", kRead)), "train");
  auto g = *ParseScope("train/imagenet/*", kRead);
  EXPECT_EQ(g.bucket, "train");
  EXPECT_EQ(g.prefix, "imagenet/");
  for (const char* bad : {"", "/x", "tr*n", "train/a*b", "*/x"}) EXPECT_FALSE(ParseScope(bad, kRead).ok()) << bad;
}

// Every action against every kind of grant: exactly the granted actions on
// exactly the granted keys.
TEST(PolicyTest, AllowsExactlyWhatIsGranted) {
  const auto ro = Grants({{"ro", "data"}});
  const auto prefix = Grants({{"read,write", "data/train/"}});
  const auto everything = Grants({{"all", "*"}});
  struct Case {
    const std::vector<Grant>* grants;
    Action action;
    const char* bucket;
    const char* key;
    bool allowed;
  };
  const Case cases[] = {
      {&ro, kRead, "data", "a.jpg", true},          {&ro, kWrite, "data", "a.jpg", false},
      {&ro, kDelete, "data", "a.jpg", false},       {&ro, kAdmin, "data", "", false},
      {&ro, kRead, "other", "a.jpg", false},        {&ro, kRead, "dat", "a.jpg", false},
      {&ro, kRead, "data2", "a.jpg", false},        {&prefix, kRead, "data", "train/x", true},
      {&prefix, kWrite, "data", "train/x", true},   {&prefix, kRead, "data", "train", false},
      {&prefix, kRead, "data", "val/x", false},     {&prefix, kDelete, "data", "train/x", false},
      {&everything, kAdmin, "anything", "k", true}, {&everything, kDelete, "x", "k", true},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Allows(*c.grants, c.action, c.bucket, c.key), c.allowed)
        << ActionsToString(c.action) << " " << c.bucket << "/" << c.key;
  }
  EXPECT_TRUE(AllowsList(ro, "data", ""));
  EXPECT_FALSE(AllowsList(prefix, "data", ""));  // listing the whole bucket reveals keys outside
  EXPECT_FALSE(AllowsList(Grants({{"list", "data/train/"}}), "data", "train"));
  EXPECT_TRUE(AllowsList(Grants({{"list", "data/train/"}}), "data", "train/cats/"));
  EXPECT_FALSE(AllowsBucket(Grants({{"admin", "data/train/"}}), kAdmin, "data"));
  EXPECT_TRUE(AllowsBucket(Grants({{"admin", "data"}}), kAdmin, "data"));
  EXPECT_TRUE(Touches(prefix, "data"));
  EXPECT_FALSE(Touches(prefix, "other"));
}

TEST(PolicyTest, KeysRoundTripThroughJson) {
  StoredKey k;
  k.key = {"AQKEY", "secret/+="};
  k.name = "training job";
  k.created_ns = 123;
  k.grants = Grants({{"ro", "data/train/"}, {"all", "scratch"}});
  auto back = KeysFromJson(KeysToJson({k}));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].key.access_key, "AQKEY");
  EXPECT_EQ((*back)[0].key.secret, "secret/+=");
  EXPECT_EQ((*back)[0].name, "training job");
  EXPECT_EQ((*back)[0].grants, k.grants);
  EXPECT_TRUE(KeysFromJson("")->empty());
  for (const char* bad : {"[]", "{}", R"({"keys":[{"access_key":"A"}]})",
                          R"({"keys":[{"access_key":"A","secret":"s","grants":{}}]})", "{"}) {
    EXPECT_FALSE(KeysFromJson(bad).ok()) << bad;
  }
  // An action a later version adds grants nothing here.
  auto future =
      KeysFromJson(R"({"keys":[{"access_key":"A","secret":"s","grants":[{"bucket":"b","actions":["read","tag"]}]}]})");
  ASSERT_TRUE(future.ok());
  EXPECT_EQ((*future)[0].grants[0].actions, kRead);
}

}  // namespace
}  // namespace aq::s3
