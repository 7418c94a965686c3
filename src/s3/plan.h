// A read plan as a client sends it (POST /_aquifer/plan?stream=ID) and the
// node reads it: the reads a reader will make next, in order.
//
//   {"reads": [{"bucket": "b", "key": "k", "offset": N, "length": N}, ...]}
//
// offset (default 0) and length (default: to the end) are optional
// unsigned integers. Written by the aquifer:// client, read by the node,
// so the one definition lives here; the parsers are fuzzed (fuzz_plan).
//
// In a cluster the node a plan reaches passes each node its share, as the
// stored pieces it holds (a replica, or one fragment of an erasure-coded
// block), on the cluster's node key (POST /_aquifer/plan?pieces=1&stream=ID):
//
//   {"pieces": [{"id": "...", "pool": "...", "size": N, "crc": N}, ...]}
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

// A stored piece a node is asked to stage: what a block read names.
struct PlanPiece {
  std::string id, pool;
  uint64_t size = 0;
  uint32_t crc32c = 0;
};

std::string PiecesToJson(const std::vector<PlanPiece>& pieces);
// All pieces or an error naming the first bad one: more than
// kMaxPlanReads, an id that is empty, longer than 128 bytes or not made of
// [0-9A-Za-z._-], a pool that is not a string, a size or crc that is not an
// unsigned integer (crc below 2^32).
Result<std::vector<PlanPiece>> PiecesFromJson(std::string_view json);

}  // namespace aq::s3
