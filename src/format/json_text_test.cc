#include "format/json_text.h"

#include <gtest/gtest.h>

namespace aq::format {
namespace {

TEST(JsonText, ValidUtf8IsWrittenAsNlohmannWritesIt) {
  nlohmann::json j = {{"file", "n01/caf\xc3\xa9.jpg"}, {"n", 3}, {"list", {"a", "\xe2\x82\xac"}}};
  EXPECT_EQ(DumpJson(j), j.dump());
  EXPECT_EQ(DumpJson(j, 2), j.dump(2));
}

// What Python's json.loads + os.fsencode turn back into the same bytes.
TEST(JsonText, BytesThatAreNotUtf8BecomeSurrogateEscapes) {
  nlohmann::json j = {{"file", "caf\xe9.jpg"}, {"ok", "x"}};
  EXPECT_EQ(DumpJson(j), R"({"file":"caf\udce9.jpg","ok":"x"})");
  // Keys, nested arrays, a cut multi-byte sequence, a lone continuation byte.
  nlohmann::json k = nlohmann::json::object();
  k["\xff"] = nlohmann::json::array({"\xe2\x82", "a\x80z"});
  EXPECT_EQ(DumpJson(k), R"({"\udcff":["\udce2\udc82","a\udc80z"]})");
  // A name that holds one of the private-use characters used as marks is
  // escaped byte by byte, so nothing is ambiguous.
  nlohmann::json m = {{"f", "\xf4\x8f\xbf\xbf\xe9"}};
  EXPECT_EQ(DumpJson(m), R"({"f":"\udcf4\udc8f\udcbf\udcbf\udce9"})");
  // Control characters are escaped as JSON escapes them.
  nlohmann::json c = {{"f", std::string("a\tb\x01\xe9", 5)}};
  EXPECT_EQ(DumpJson(c), R"({"f":"a\tb\u0001\udce9"})");
}

// ParseJson reads DumpJson's escapes back into the raw bytes.
TEST(JsonText, WhatDumpJsonWritesParsesBackToTheSameBytes) {
  nlohmann::json j = {{"f", "caf\xe9.jpg"}, {"k", {"\xff", "ok", "\xf4\x8f\xbf\xbf"}}, {"\xe2\x82", 3}};
  const std::string text = DumpJson(j, 1);
  EXPECT_EQ(ParseJson(text), j);
  // Escaped backslashes and a valid surrogate pair are left to nlohmann.
  EXPECT_EQ(ParseJson(R"({"a":"\\udce9","b":"\ud83d\ude00"})"),
            (nlohmann::json{{"a", "\\udce9"}, {"b", "\xf0\x9f\x98\x80"}}));
  EXPECT_TRUE(ParseJson("{not json").is_discarded());
}

}  // namespace
}  // namespace aq::format
