// Any bytes as a node's /stats document (what `aquifer stats`, `bench train
// --node-stats` and `size --stored-from` read from a node's metrics
// address) and as a cluster member's published status (what `cluster
// status` and the audit read from etcd): read or refused with an error
// naming the field, never a crash; what reads, written back, reads to the
// same document.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "s3/node_stats_doc.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto member = aq::s3::ParseMemberStatusDoc(text); member.ok()) {
    const nlohmann::json once = aq::s3::ToJson(*member);
    auto again = aq::s3::ParseMemberStatusDoc(once.dump());
    if (!again.ok() || aq::s3::ToJson(*again) != once) __builtin_trap();
  } else if (member.status().message().empty()) {
    __builtin_trap();
  }
  auto doc = aq::s3::ParseNodeStatsDoc(text);
  if (!doc.ok()) {
    if (doc.status().message().empty()) __builtin_trap();
    return 0;
  }
  const nlohmann::json once = aq::s3::ToJson(*doc);
  auto again = aq::s3::ParseNodeStatsDoc(once);
  if (!again.ok() || aq::s3::ToJson(*again) != once) __builtin_trap();
  (void)doc->MachineThroughput();
  return 0;
}
