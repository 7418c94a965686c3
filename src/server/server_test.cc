#include <gtest/gtest.h>

#include "server/node_stats.h"

namespace aq::server {
namespace {

TEST(NodeStatsTest, CountsPerOperationAndErrorClass) {
  NodeStats s;
  s.Record(Op::kGet, 0.001, 0, 100, 200);
  s.Record(Op::kGet, 0.003, 0, 50, 404);
  s.Record(Op::kPut, 0.010, 4096, 0, 200);
  s.Record(Op::kPut, 0.010, 0, 0, 503);
  EXPECT_EQ(s.requests(Op::kGet), 2u);
  EXPECT_EQ(s.bytes_out(), 150u);
  EXPECT_EQ(s.bytes_in(), 4096u);
  EXPECT_EQ(s.client_errors(), 1u);
  EXPECT_EQ(s.server_errors(), 1u);
  auto j = s.ToJson();
  EXPECT_EQ(j["ops"]["get"]["client_errors"], 1);
  EXPECT_EQ(j["ops"]["put"]["server_errors"], 1);
  EXPECT_EQ(j["errors_by_status"]["404"], 1);
  EXPECT_EQ(j["errors_by_status"]["503"], 1);
  EXPECT_EQ(j["ops"]["put"]["bytes_in"], 4096);
  EXPECT_GT(j["ops"]["get"]["latency"]["p99_us"].get<double>(), 1000);
  EXPECT_EQ(j["ops"]["delete"]["requests"], 0);
}

}  // namespace
}  // namespace aq::server
