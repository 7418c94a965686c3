// A read plan as a client sends it (POST /_aquifer/plan?stream=ID) and the
// node reads it: the reads a reader will make next, in order.
//
//   {"reads": [{"bucket": "b", "key": "k", "offset": N, "length": N}, ...]}
//
// offset (default 0) and length (default: to the end) are optional
// unsigned integers. Written by the aquifer:// client, read by the node,
// so the one definition lives here; the parser is fuzzed (fuzz_plan).
//
// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace aq::s3 {

struct PlanRead {
  std::string bucket, key;
  uint64_t offset = 0;
  uint64_t length = UINT64_MAX;  // to the end
};

inline constexpr size_t kMaxPlanReads = 65536;
inline constexpr size_t kMaxPlanBytes = 8 << 20;

std::string PlanToJson(const std::vector<PlanRead>& reads);
// The whole plan or an error naming the first bad read; nothing partial.
// More than kMaxPlanReads reads, a read without a bucket or key (strings,
// not empty) or with an offset or length that is not an unsigned integer
// is an error.
Result<std::vector<PlanRead>> PlanFromJson(std::string_view json);

}  // namespace aq::s3
