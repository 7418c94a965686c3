#include "s3/same_host.h"

#include <gtest/gtest.h>

#include <vector>

namespace aq::s3 {
namespace {

const std::string kToken = "0123456789abcdef0123456789abcdef";

TEST(SameHostGrantTest, RoundTripsAndRefusesAnythingElse) {
  SameHostGrant g{"aquifer-7-00ff", kToken, {{100, 50}, {150, 10}, {300, 700}}};
  auto back = SameHostGrantFromJson(SameHostGrantToJson(g), 1000);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->socket, g.socket);
  EXPECT_EQ(back->token, kToken);
  ASSERT_EQ(back->blocks.size(), 3u);
  EXPECT_EQ(back->blocks[2].offset, 300u);
  EXPECT_EQ(back->blocks[2].size, 700u);
  // The same grant is refused for an object too small to hold it.
  EXPECT_FALSE(SameHostGrantFromJson(SameHostGrantToJson(g), 999).ok());
  const std::string t = "\"token\": \"" + kToken + "\"";
  for (const std::string bad : std::vector<std::string>{
           std::string(""), std::string("{"), std::string("[]"), std::string("null"),
           R"({"socket": "s", "blocks": [[0, 1]]})",                                               // no token
           R"({"socket": "s", "token": "abc", "blocks": [[0, 1]]})",                               // short token
           R"({"socket": "s", "token": "0123456789ABCDEF0123456789ABCDEF", "blocks": [[0, 1]]})",  // upper case
           "{\"socket\": \"\", " + t + ", \"blocks\": [[0, 1]]}",                                  // empty socket name
           "{\"socket\": \"a/b\", " + t + ", \"blocks\": [[0, 1]]}",                               // a path, not a name
           "{\"socket\": \"sock\\u0000et\", " + t + ", \"blocks\": [[0, 1]]}",                     // a NUL in the name
           "{\"socket\": \"s\", " + t + "}",                                                       // no blocks
           "{\"socket\": \"s\", " + t + ", \"blocks\": []}",                                       // none granted
           "{\"socket\": \"s\", " + t + ", \"blocks\": [[0, 0]]}",                                 // empty block
           "{\"socket\": \"s\", " + t + ", \"blocks\": [[10, 5], [0, 5]]}",                        // out of order
           "{\"socket\": \"s\", " + t + ", \"blocks\": [[0, 10], [5, 5]]}",                        // overlapping
           "{\"socket\": \"s\", " + t + ", \"blocks\": [[0, -1]]}",                                // negative
           "{\"socket\": \"s\", " + t + ", \"blocks\": [[0]]}",                                    // no size
           "{\"socket\": \"s\", " + t + ", \"blocks\": [[1, 18446744073709551615]]}",              // wraps around
       }) {
    EXPECT_FALSE(SameHostGrantFromJson(bad, 1000).ok()) << bad;
  }
  SameHostGrant many{"s", kToken, {}};
  for (uint64_t i = 0; i <= kMaxSameHostBlocks; ++i) many.blocks.push_back({i, 1});
  EXPECT_FALSE(SameHostGrantFromJson(SameHostGrantToJson(many), 1000).ok());
  many.blocks.pop_back();
  EXPECT_TRUE(SameHostGrantFromJson(SameHostGrantToJson(many), 1000).ok());
}

TEST(SameHostGrantTest, AnswersRoundTripAndAnythingElseIsRefused) {
  const std::vector<SameHostPiece> pieces = {{SameHostForm::kMemfd},
                                             {SameHostForm::kFile, 24, 0x0badf00d},
                                             {SameHostForm::kNone},
                                             {SameHostForm::kFile, 40, 0xffffffff}};
  const std::string text = SameHostAnswerToText(pieces);
  EXPECT_EQ(text, "OK 1f0f\n24 0badf00d\n40 ffffffff");
  auto back = SameHostAnswerFromText(text, 4, true);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, pieces);
  EXPECT_EQ(SameHostDescriptors(*back), 3u);
  // A client that asked for memfds only takes no file.
  EXPECT_FALSE(SameHostAnswerFromText(text, 4, false).ok());
  EXPECT_TRUE(SameHostAnswerFromText("OK 10", 2, false).ok());
  auto refused = SameHostAnswerFromText("ERR unknown, used or expired token", 3, true);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("expired token"), std::string::npos);
  for (const std::string bad : std::vector<std::string>{
           "", "OK", "ok 1f", "OK 1f",                       // too few blocks
           "OK 1f0f\n24 0badf00d",                           // a line missing
           "OK 1f0f\n24 0badf00d\n40 ffffffff\n1 00000000",  // a line too many
           "OK 1x0f\n24 0badf00d\n40 ffffffff",              // an unknown form
           "OK 1f0f\n24 0BADF00D\n40 ffffffff",              // upper-case hex
           "OK 1f0f\n24 0badf00\n40 ffffffff",               // short CRC
           "OK 1f0f\n-4 0badf00d\n40 ffffffff",              // negative offset
           "OK 1f0f\n4097 0badf00d\n40 ffffffff",            // past any header
           "OK 1f0f\n99999 0badf00d\n40 ffffffff",           // too many digits
           "OK 1f0f\n 0badf00d\n40 ffffffff",                // no offset
           "OK 1f0f\n24\n40 ffffffff",                       // no CRC
       }) {
    EXPECT_FALSE(SameHostAnswerFromText(bad, 4, true).ok()) << bad;
  }
}

TEST(SameHostGrantTest, OnlyLoopbackAddressesAreThisMachine) {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  }
  for (const char* h : {"10.0.0.1", "128.0.0.1", "::2", "[::ffff:10.0.0.1]", "localhost.example.com", "", "example",
                        "127.0.0.1.nip.io"}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
}

}  // namespace
}  // namespace aq::s3
